#!/usr/bin/env bash
# ringrpc-load's ringrpcs:// against ringrpc-server's TLS listener, certificates made here by
# openssl req: echo calls byte-exact (--verify), mutual TLS (--cert/--key accepted; no client
# certificate and one from another CA refused with one line and a nonzero exit), and
# --new-conn-per-call counting one connection and one handshake per call (plaintext too).
# Usage: load_tls_server_test.sh PATH/TO/ringrpc-load PATH/TO/ringrpc-server
# Exit 77 (skipped) when openssl or python3 is missing or io_uring is unusable.
set -u

load=${1:?usage: $0 ringrpc-load ringrpc-server}
server=${2:?usage: $0 ringrpc-load ringrpc-server}
if ! command -v openssl >/dev/null || ! command -v python3 >/dev/null; then
  echo "openssl or python3 not installed: skipped"
  exit 77
fi

# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
test_init load_tls_server

cd "$work" || exit 1
make_cert ca "load test CA" && make_cert server localhost ca && make_cert client "load client" ca &&
  make_cert stranger "stranger CA" && make_cert intruder "intruder" stranger ||
  { echo "openssl req failed" >&2; exit 1; }

# start_tls_server NAME ARGS...: ringrpc-server with a TLS listener; sets $plain and $tls (ports).
start_tls_server() {
  name=$1
  shift
  start_server "$work/$name" "$server" --port 0 --readers 1 --handlers 2 --tls-port "$(free_port)" \
    --tls-cert server.pem --tls-key server.key "$@" || exit $?
  plain=$listen_port
  wait_for "$work/$name.out" '^tls listening on .*:[0-9]+$' ||
    { echo "ringrpc-server printed no 'tls listening on' line" >&2; exit 1; }
  tls=$(sed -n 's/^tls listening on .*:\([0-9][0-9]*\)$/\1/p' "$work/$name.out")
}

# --- TLS, no client certificates --------------------------------------------------------------
start_tls_server tls
tls_port=$tls plain_port=$plain

run_load echo -c 2 -P 4 -n 400 -s 1000 --verify --cacert ca.pem --json echo.json "ringrpcs://localhost:$tls_port/echo"
expect_run echo 'j["calls_ok"], sum(j["errors"].values()), j["tls_handshakes"]["count"]' "(400, 0, 2)" \
  "ringrpcs:// echo --verify: 400 calls of 1000 bytes came back byte-exact over 2 handshakes"

run_load wrongca -c 1 -n 5 --cacert stranger.pem "ringrpcs://localhost:$tls_port/echo"
if [ "$rc" = 0 ] || ! grep -q "was not verified" wrongca.err; then
  fail "a server certificate from an untrusted CA: exit $rc, no 'not verified' line"; cat wrongca.err >&2
else
  ok "untrusted server: $(grep 'not verified' wrongca.err)"
fi

# --- --new-conn-per-call: one connection (and one full handshake) per call ---------------------
run_load percall -c 2 -n 60 --new-conn-per-call --verify --cacert ca.pem --json percall.json \
  "ringrpcs://localhost:$tls_port/echo"
expect_run percall 'j["calls_ok"], sum(j["errors"].values()), j["connections"]["opened"], j["tls_handshakes"]["count"], j["tls_handshakes"]["measured"], j["tls_handshakes"]["per_sec"] > 0' \
  "(60, 0, 60, 60, 60, True)" "--new-conn-per-call over ringrpcs://: 60 calls, 60 connections, 60 handshakes"
if ! grep -q "tls handshakes/s" percall.out || ! grep -q "connections/s" percall.out; then
  fail "the summary of a --new-conn-per-call run shows no connections/s and tls handshakes/s"; cat percall.out >&2
fi

run_load percall_plain -c 2 -n 60 --new-conn-per-call --verify --json percall_plain.json \
  "ringrpc://127.0.0.1:$plain_port/echo"
expect_run percall_plain 'j["calls_ok"], sum(j["errors"].values()), j["connections"]["opened"]' "(60, 0, 60)" \
  "--new-conn-per-call over ringrpc://: 60 calls on 60 connections"

run_load percall_depth -c 1 -P 4 -n 10 --new-conn-per-call "ringrpc://127.0.0.1:$plain_port/echo"
if [ "$rc" != 2 ] || ! grep -q "needs -P 1" percall_depth.err; then
  fail "--new-conn-per-call with -P 4: exit $rc, expected 2 and 'needs -P 1'"; cat percall_depth.err >&2
else
  ok "--new-conn-per-call -P 4 refused: $(cat percall_depth.err)"
fi

# --- mutual TLS ---------------------------------------------------------------------------------
start_tls_server mtls --tls-ca ca.pem --tls-require-client-cert true
mtls_port=$tls

run_load mtls_ok -c 2 -P 2 -n 100 --verify --cacert ca.pem --cert client.pem --key client.key --json mtls_ok.json \
  "ringrpcs://localhost:$mtls_port/echo"
expect_run mtls_ok 'j["calls_ok"], sum(j["errors"].values())' "(100, 0)" "mutual TLS with --cert/--key: 100 calls"

# refused NAME ARGS...: a nonzero exit and exactly one error line, naming the client certificate.
refused() {
  name=$1
  shift
  run_load "$name" -c 1 -n 5 --cacert ca.pem "$@" "ringrpcs://localhost:$mtls_port/echo"
  lines=$(grep -c '^ringrpc-load: ' "$name.err")  # beside the start line on stderr
  if [ "$rc" = 0 ] || [ "$lines" != 1 ] || ! grep -q "refused our client certificate" "$name.err"; then
    fail "$name: exit $rc, $lines stderr line(s), expected one naming 'refused our client certificate'"
    cat "$name.err" "$name.out" >&2
  else
    ok "$name: exit $rc: $(cat "$name.err")"
  fi
}
refused mtls_nocert
refused mtls_othca --cert intruder.pem --key intruder.key

[ "$failures" = 0 ] || { echo "$failures failure(s)" >&2; exit 1; }
echo "all checks passed"
