#!/usr/bin/env bash
# ringrpc-load over TLS against real peers: nginx with ssl and http2 (https://, h2://) and
# redis-server with tls-port (rediss://), certificates made here by openssl req; verification
# on and off (-k), and a plaintext URL at a TLS port and the reverse (one-line diagnosis).
# Usage: load_tls_peers_test.sh PATH/TO/ringrpc-load
# Exit 77 (skipped) when nginx or redis-server is not installed or io_uring is unusable.
set -u

load=${1:?usage: $0 ringrpc-load}

# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
need_nginx_and_redis
test_init load_tls_peers

# --- certificates: a CA that signs the server's (127.0.0.1 and localhost), and one nobody trusts
if ! command -v openssl >/dev/null; then echo "openssl not installed: skipped"; exit 77; fi
cd "$work" || exit 1
make_cert ca "load test CA" && make_cert server "localhost" ca && make_cert stranger "stranger CA" ||
  { echo "openssl req failed" >&2; exit 1; }

# --- nginx: one worker, ssl + http2 on one port, plaintext on another -------------------------
sport=$(free_port)
pport=$(free_port)
start_nginx "$work/nginx" "$sport" <<CONF
  access_log off;
  server {
    listen 127.0.0.1:$sport ssl http2;
    listen 127.0.0.1:$pport;
    ssl_certificate $work/server.pem;
    ssl_certificate_key $work/server.key;
    location = /ok { return 200 "ok"; }
    location / { return 404; }
  }
CONF

for scheme in https h2; do
  run_load "$scheme" -c 2 -P 2 -n 200 --cacert "$work/ca.pem" --json "$work/$scheme.json" "$scheme://localhost:$sport/ok"
  expect_run "$scheme" 'j["calls_ok"]' 200 "$scheme:// verified against the test CA (--cacert): 200 calls"
done

# The handshakes are reported apart: one per connection (none failed), with their latency.
hs=$(python3 -c 'import json,sys; h=json.load(open(sys.argv[1]))["tls_handshakes"]; print(h["count"], sum(h["failures"].values()), h["latency_us"]["max"] > 0)' "$work/https.json" 2>&1)
if [ "$hs" != "2 0 True" ]; then
  fail "https:// JSON tls_handshakes: expected '2 0 True' (count, failures, max>0), got '$hs'"
else
  ok "tls_handshakes in the JSON: 2 handshakes for 2 connections"
fi
grep -q "tls handshakes" "$work/https.out" || fail "the text summary shows no 'tls handshakes' line"

# An untrusted certificate: one clear line naming verification, and -k gets through.
run_load untrusted -c 1 -n 10 --cacert "$work/stranger.pem" "https://127.0.0.1:$sport/ok"
if [ "$rc" = 0 ] || ! grep -q "not verified" "$work/untrusted.err" "$work/untrusted.out"; then
  fail "an untrusted certificate was not refused with a clear line (exit $rc)"; cat "$work/untrusted.err" >&2
else
  ok "untrusted certificate: $(grep -h 'not verified' "$work/untrusted.err" "$work/untrusted.out" | head -1)"
fi
run_load insecure -c 1 -n 10 -k --json "$work/insecure.json" "https://127.0.0.1:$sport/ok"
expect_run insecure 'j["calls_ok"]' 10 "-k: 10 calls without verification"

# --new-conn-per-call: a full handshake for every call, reported per second.
run_load https_percall -c 2 -n 40 --new-conn-per-call --cacert "$work/ca.pem" --json "$work/https_percall.json" \
  "https://localhost:$sport/ok"
expect_run https_percall \
  'j["calls_ok"], j["connections"]["opened"], j["tls_handshakes"]["count"], j["tls_handshakes"]["measured"], j["tls_handshakes"]["per_sec"] > 0' \
  "(40, 40, 40, 40, True)" "https:// --new-conn-per-call: 40 calls, 40 connections, 40 handshakes"

# nginx answers plaintext at its TLS port with a 400 that says so: diagnosed, not counted.
run_load plain_at_nginx_tls -c 1 -n 5 "http://127.0.0.1:$sport/ok"
if [ "$rc" = 0 ] || ! grep -qh "this looks like a TLS server; try https://127.0.0.1:$sport/ok" "$work/plain_at_nginx_tls.err"; then
  fail "http:// at nginx's TLS port: exit $rc, no 'try https://' line"; cat "$work/plain_at_nginx_tls.err" "$work/plain_at_nginx_tls.out" >&2
else
  ok "http:// at nginx's TLS port: $(grep -h 'try https' "$work/plain_at_nginx_tls.err")"
fi

# The wrong side: a TLS URL at the plaintext port (the plaintext URL at redis's TLS port, which
# hangs up without a reply, is tried below).
run_load tls_at_plain -c 1 -n 5 -k "https://127.0.0.1:$pport/ok"
if ! grep -qh "does not speak TLS" "$work/tls_at_plain.err" "$work/tls_at_plain.out"; then
  fail "https:// at a plaintext port: no clear line (exit $rc)"; cat "$work/tls_at_plain.err" "$work/tls_at_plain.out" >&2
else
  ok "https:// at a plaintext port: $(grep -h 'does not speak TLS' "$work/tls_at_plain.err" "$work/tls_at_plain.out" | head -1)"
fi

# --- redis with tls-port ----------------------------------------------------------------------
rport=$(free_port)
"$redis" --port 0 --tls-port "$rport" --bind 127.0.0.1 --save '' --appendonly no \
  --tls-cert-file "$work/server.pem" --tls-key-file "$work/server.key" --tls-ca-cert-file "$work/ca.pem" \
  --tls-auth-clients no >"$work/redis.out" 2>&1 &
rpid=$!
pids="$pids $rpid"
if ! wait_port 127.0.0.1 "$rport"; then
  if grep -qi "tls" "$work/redis.out"; then
    echo "redis-server cannot serve TLS here: skipped rediss://"; cat "$work/redis.out"
  else
    fail "redis-server did not start"; cat "$work/redis.out" >&2
  fi
else
  run_load rediss -c 2 -P 4 -n 400 --cacert "$work/ca.pem" --json "$work/rediss.json" "rediss://localhost:$rport"
  expect_run rediss 'j["calls_ok"]' 400 "rediss:// with --cacert: 400 calls"
  run_load rediss_percall -c 2 -n 40 --new-conn-per-call --cacert "$work/ca.pem" --json "$work/rediss_percall.json" \
    "rediss://localhost:$rport"
  expect_run rediss_percall 'j["calls_ok"], j["connections"]["opened"], j["tls_handshakes"]["count"]' "(40, 40, 40)" \
    "rediss:// --new-conn-per-call: 40 calls, 40 connections, 40 handshakes"
  run_load plain_at_tls -c 1 -n 5 "redis://127.0.0.1:$rport"
  if ! grep -qh "try rediss://127.0.0.1:$rport" "$work/plain_at_tls.err" "$work/plain_at_tls.out"; then
    fail "redis:// at a TLS port: no 'try rediss://' line (exit $rc)"; cat "$work/plain_at_tls.err" "$work/plain_at_tls.out" >&2
  else
    ok "redis:// at a TLS port: $(grep -h 'try rediss' "$work/plain_at_tls.err" "$work/plain_at_tls.out" | head -1)"
  fi
fi

[ "$failures" = 0 ] || { echo "$failures failure(s)" >&2; exit 1; }
