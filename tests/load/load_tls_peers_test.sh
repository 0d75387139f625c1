#!/bin/sh
# ringrpc-load over TLS against real peers: nginx with ssl and http2 (https://, h2://) and
# redis-server with tls-port (rediss://), certificates made here by openssl req; verification
# on and off (-k), and a plaintext URL at a TLS port and the reverse (one-line diagnosis).
# Usage: load_tls_peers_test.sh PATH/TO/ringrpc-load
# Exit 77 (skipped) when nginx or redis-server is not installed or io_uring is unusable.
set -u

load=${1:?usage: $0 ringrpc-load}
nginx=$(command -v nginx || echo /usr/sbin/nginx)
redis=$(command -v redis-server || echo /usr/bin/redis-server)
if [ ! -x "$nginx" ] || [ ! -x "$redis" ] || ! command -v python3 >/dev/null; then
  echo "nginx, redis-server or python3 not installed (Debian: nginx-light, redis-server): skipped"
  exit 77
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/load_tls_peers.XXXXXX") || exit 1
pids=
failures=0

cleanup() {
  # Only the servers this script started, by their PIDs. TERM first: nginx's master then stops
  # its worker (a KILLed master leaves the worker running, orphaned); KILL what is left after 3 s.
  for p in $pids; do kill -TERM "$p" 2>/dev/null; done
  for _ in $(seq 30); do
    alive=0
    for p in $pids; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ "$alive" = 1 ] || break
    sleep 0.1
  done
  for p in $pids; do kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}
ok() { echo "ok: $*"; }

# A port the kernel just handed out and took back; nginx and redis cannot listen on port 0.
free_port() {
  python3 -c 'import socket, sys
s = socket.socket(socket.AF_INET6 if sys.argv[1] == "6" else socket.AF_INET)
s.bind(("::1" if sys.argv[1] == "6" else "127.0.0.1", 0)); print(s.getsockname()[1])' "${1:-4}"
}

# wait_port HOST PORT: until something accepts there (5 s at most).
wait_port() {
  python3 -c 'import socket, sys, time
for _ in range(50):
    try:
        socket.create_connection((sys.argv[1], int(sys.argv[2])), 0.2).close(); sys.exit(0)
    except OSError:
        time.sleep(0.1)
sys.exit(1)' "$1" "$2"
}

run_load() {
  name=$1
  shift
  timeout 30 "$load" "$@" >"$work/$name.out" 2>"$work/$name.err"
  rc=$?
}
# --- certificates: a CA that signs the server's (127.0.0.1 and localhost), and one nobody trusts
if ! command -v openssl >/dev/null; then echo "openssl not installed: skipped"; exit 77; fi
cd "$work" || exit 1
mkcert() {  # NAME SUBJECT-CN [CA-NAME]: NAME.pem NAME.key
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=$2" \
    -keyout "$1.key" -out "$1.pem" ${3:+-CA "$3.pem" -CAkey "$3.key"} \
    -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" 2>/dev/null
}
mkcert ca "load test CA" && mkcert server "localhost" ca && mkcert stranger "stranger CA" ||
  { echo "openssl req failed" >&2; exit 1; }

# --- nginx: one worker, ssl + http2 on one port, plaintext on another -------------------------
sport=$(free_port)
pport=$(free_port)
mkdir -p "$work/nginx/logs"
cat >"$work/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $work/nginx/nginx.pid;
error_log $work/nginx/logs/error.log;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path $work/nginx/body;
  server {
    listen 127.0.0.1:$sport ssl http2;
    listen 127.0.0.1:$pport;
    ssl_certificate $work/server.pem;
    ssl_certificate_key $work/server.key;
    location = /ok { return 200 "ok"; }
    location / { return 404; }
  }
}
CONF
"$nginx" -p "$work/nginx" -c "$work/nginx.conf" >"$work/nginx.out" 2>&1 &
pids="$pids $!"
if ! wait_port 127.0.0.1 "$sport"; then
  echo "nginx did not start:" >&2
  cat "$work/nginx.out" "$work/nginx/logs/error.log" >&2
  exit 1
fi

# calls_ok N FILE: the JSON's calls_ok (0 if absent)
calls_ok() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("calls_ok", 0))' "$1" 2>/dev/null || echo 0; }

for scheme in https h2; do
  run_load "$scheme" -c 2 -P 2 -n 200 --cacert "$work/ca.pem" --json "$work/$scheme.json" "$scheme://localhost:$sport/ok"
  n=$(calls_ok "$work/$scheme.json")
  if [ "$rc" != 0 ] || [ "$n" != 200 ]; then
    fail "$scheme:// verified against the test CA: exit $rc, $n calls ok"; cat "$work/$scheme.err" >&2
  else
    ok "$scheme:// with --cacert: 200 calls"
  fi
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
n=$(calls_ok "$work/insecure.json")
if [ "$rc" != 0 ] || [ "$n" != 10 ]; then
  fail "-k did not skip verification: exit $rc, $n calls ok"; cat "$work/insecure.err" >&2
else
  ok "-k: 10 calls without verification"
fi

# The wrong side: a TLS URL at the plaintext port (nginx answers plaintext at its TLS port
# with an HTTP 400, so the plaintext URL at a TLS port is tried on redis below).
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
  n=$(calls_ok "$work/rediss.json")
  if [ "$rc" != 0 ] || [ "$n" != 400 ]; then
    fail "rediss:// with --cacert: exit $rc, $n calls ok"; cat "$work/rediss.err" >&2
  else
    ok "rediss://: 400 calls"
  fi
  run_load plain_at_tls -c 1 -n 5 "redis://127.0.0.1:$rport"
  if ! grep -qh "try rediss://127.0.0.1:$rport" "$work/plain_at_tls.err" "$work/plain_at_tls.out"; then
    fail "redis:// at a TLS port: no 'try rediss://' line (exit $rc)"; cat "$work/plain_at_tls.err" "$work/plain_at_tls.out" >&2
  else
    ok "redis:// at a TLS port: $(grep -h 'try rediss' "$work/plain_at_tls.err" "$work/plain_at_tls.out" | head -1)"
  fi
fi

[ "$failures" = 0 ] || { echo "$failures failure(s)" >&2; exit 1; }
