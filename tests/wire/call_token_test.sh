#!/usr/bin/env bash
# ringrpc-call's --token / RINGRPC_TOKEN and -H against a ringrpc-server that checks bearer tokens
# (--tokens-file): refused without a token (exit 1, "unauthenticated"), served with one, the
# token never printed, bad metadata refused before connecting (exit 2).
# Usage: call_token_test.sh PATH/TO/ringrpc-server PATH/TO/ringrpc-call
# Exit 77 (skipped) when the server cannot start because io_uring is unavailable.
set -u
server=${1:?usage: $0 ringrpc-server ringrpc-call}
call=${2:?usage: $0 ringrpc-server ringrpc-call}
work=$(mktemp -d "${TMPDIR:-/tmp}/call_token.XXXXXX") || exit 1
pid=
failures=0
cleanup() {
  # Only the server this script started, by its PID: TERM, then KILL if it lingers.
  if [ -n "$pid" ]; then
    kill -TERM "$pid" 2>/dev/null
    i=0
    while running "$pid" && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
# start_server; its track_pid hook keeps the one server in $pid for cleanup
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/../../scripts/lib.sh"
track_pid() { pid=$1; }

secret=tok-Zm9vYmFyYmF6LTEyMzQ1
printf 'ops %s\nreader tok-reader-1 sleep\n' "$secret" >"$work/tokens"
start_server "$work/server" "$server" --port 0 --readers 1 --handlers 1 --tokens-file "$work/tokens" || exit $?
port=$listen_port

# expect NAME STATUS PATTERN [ENV=VALUE] -- ARGS...: ringrpc-call exits STATUS, PATTERN in its output.
expect() {
  name=$1 want=$2 pattern=$3
  shift 3
  env_kv=
  if [ "$1" != "--" ]; then env_kv=$1; shift; fi
  shift
  if [ -n "$env_kv" ]; then
    env "$env_kv" timeout 30 "$call" "$@" >"$work/$name.out" 2>&1
  else
    env -u RINGRPC_TOKEN timeout 30 "$call" "$@" >"$work/$name.out" 2>&1
  fi
  rc=$?
  if [ $rc -ne "$want" ]; then
    fail "$name: exited $rc, expected $want: $(cat "$work/$name.out")"
  elif ! grep -Eq -- "$pattern" "$work/$name.out"; then
    fail "$name: output does not match /$pattern/: $(cat "$work/$name.out")"
  elif grep -q -- "$secret" "$work/$name.out"; then
    fail "$name: the token appears in ringrpc-call's output"
  else
    echo "ok   $name -> $rc"
  fi
}

addr=127.0.0.1:$port
expect no_token 1 'echo failed: unauthenticated: this server requires a bearer token' -- "$addr" call echo -d hi
expect wrong_token 1 'unauthenticated: bearer token not accepted' -- "$addr" call echo -d hi --token "${secret}x"
expect token_flag 0 '^hi$' -- "$addr" call echo -d hi --token "$secret"
expect token_env 0 '^hi$' "RINGRPC_TOKEN=$secret" -- "$addr" call echo -d hi
expect with_metadata 0 '^hi$' "RINGRPC_TOKEN=$secret" -- "$addr" call echo -d hi -H tenant=blue \
  -H traceparent=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
expect limited 1 'permission_denied: the bearer token of .reader. does not allow this method' -- \
  "$addr" call echo -d hi --token tok-reader-1
expect bad_key 2 '-H needs KEY=VALUE with a lowercase KEY' -- "$addr" call echo -d hi -H Tenant=blue
expect bad_token 2 'holds characters a bearer token cannot have' -- "$addr" call echo -d hi --token 'a b'
expect over_cap 1 'bad_request: metadata: 33 entries' "RINGRPC_TOKEN=$secret" -- "$addr" call echo -d hi \
  $(i=0; while [ $i -lt 32 ]; do printf -- '-H k%d=v ' $i; i=$((i + 1)); done)
if grep -q -- "$secret" "$work/server.err" "$work/server.out"; then fail "the token appears in ringrpc-server's output"; fi
[ $failures -eq 0 ] || exit 1
echo "call_token: all checks passed"
