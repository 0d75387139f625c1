#!/usr/bin/env bash
# The first five minutes with the tools: --version and exit codes of each, help with defaults
# and no bare TEXT, the stock server's reflection listing its built-in methods, untyped calls
# with raw, @file, --hex and --base64 data, and the warnings for configuration keys that do
# nothing. Exit 77 (skipped) when the server cannot start because io_uring is unavailable.
# Usage: first_minutes_test.sh SERVER CALL GEN EXAMPLE_CONFIG
set -u
server=$1 call=$2 gen=$3 example=$4
work=$(mktemp -d "${TMPDIR:-/tmp}/first_minutes.XXXXXX") || exit 1
pid=
cleanup() {
  if [ -n "$pid" ]; then kill -TERM "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; fi
  rm -rf "$work"
}
trap cleanup EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
# start_server, wait_listening; the track_pid hook keeps the one server in $pid for cleanup
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/../../scripts/lib.sh"
track_pid() { pid=$1; }

version=$("$server" --version) || fail "ringrpc-server --version exited $?"
case $version in "ringrpc-server "[0-9]*.[0-9]*.[0-9]*) ;; *) fail "ringrpc-server --version: '$version'" ;; esac
for tool in "$call" "$gen"; do
  name=$(basename "$tool")
  v=$("$tool" --version) || fail "$name --version exited $?"
  [ "$v" = "$name ${version#ringrpc-server }" ] || fail "$name --version: '$v'"
done
for tool in "$server" "$call" "$gen"; do
  name=$(basename "$tool")
  "$tool" --help >"$work/help" 2>&1 || fail "$name --help exited $?"
  grep -q 'Exit status' "$work/help" || fail "$name --help has no exit status epilogue"
  grep -q '105 and 109' "$work/help" || fail "$name --help does not say what becomes of CLI11's codes"
  if grep -q ' TEXT' "$work/help"; then fail "$name --help shows a bare TEXT"; grep ' TEXT' "$work/help" >&2; fi
  "$tool" --no-such-flag >/dev/null 2>&1
  rc=$?
  [ $rc -eq 2 ] || fail "$name --no-such-flag exited $rc, not 2"
done
"$server" --help | grep -q -- '--port PORT=0' || fail "ringrpc-server --help shows no default of --port"
"$server" --help | grep -q -- '--drain-timeout-ms MS=5000' || fail "ringrpc-server --help shows no default of --drain-timeout-ms"
"$server" extra_argument >/dev/null 2>&1
rc=$?
[ $rc -eq 2 ] || fail "ringrpc-server with an extra argument exited $rc (CLI11 says 109), not 2"
"$server" --port notanumber >/dev/null 2>&1
rc=$?
[ $rc -eq 2 ] || fail "ringrpc-server --port notanumber exited $rc, not 2"

# The example config runs the stock server without a warning; --set admin.port alone does nothing.
start_server "$work/ex" "$server" --config "$example" --port 0 --admin-port 0 --set admin.port=0
case $? in
  0) ;;
  77) exit 77 ;;
  *) fail "ringrpc-server --config $example did not start" ;;
esac
if [ -n "$pid" ]; then
  kill -TERM "$pid"
  wait "$pid"
  pid=
fi
if grep -q 'event=config_key_ignored' "$work/ex.err"; then
  fail "the example config warns about its own keys"; cat "$work/ex.err" >&2
fi

start_server "$work/server" "$server" --port 0 --set admin.port=9999 || exit $?
port=$listen_port
addr=127.0.0.1:$port
grep -q 'event=config_key_ignored key=admin.port' "$work/server.err" ||
  { fail "no warning for admin.port without admin.enabled"; cat "$work/server.err" >&2; }

expect() {  # expect NAME WANTED_STDOUT ARGS...: ringrpc-call ARGS prints exactly WANTED_STDOUT
  name=$1 want=$2
  shift 2
  got=$(timeout 20 "$call" "$@" 2>"$work/call.err")
  rc=$?
  [ $rc -eq 0 ] || { fail "$name: exit $rc: $(cat "$work/call.err")"; return; }
  [ "$got" = "$want" ] || fail "$name: got '$got', wanted '$want'"
}
timeout 20 "$call" "$addr" list >"$work/list" 2>&1 || fail "list exited $?: $(cat "$work/list")"
for m in echo sleep burn; do
  grep -q "^$m  *bytes -> bytes  // ." "$work/list" || fail "list does not show $m with its doc: $(cat "$work/list")"
done
expect echo "hello" "$addr" call echo -d hello
printf 'from\na file' >"$work/data"
expect datafile "$(printf 'from\na file')" "$addr" call echo -d @"$work/data"
expect hex "00ff10" "$addr" call echo --hex -d "00 FF 10"
expect base64 "aGk=" "$addr" call echo --base64 -d aGk=
expect empty "" "$addr" call echo
expect sleep "1000" "$addr" call sleep -d 1000
# Raw bytes come back exactly, NUL and all.
printf 'a\000b' >"$work/nul"
timeout 20 "$call" "$addr" call echo -d @"$work/nul" >"$work/nul.out" || fail "NUL payload exited $?"
cmp -s "$work/nul" "$work/nul.out" || fail "a payload with a NUL did not come back byte for byte"
timeout 20 "$call" "$addr" call echo --hex -d 0g >/dev/null 2>&1
rc=$?
[ $rc -eq 2 ] || fail "bad hex exited $rc, not 2"
timeout 20 "$call" "$addr" call nosuch -d x >/dev/null 2>"$work/err2"
rc=$?
[ $rc -eq 1 ] || fail "an unknown untyped method exited $rc, not 1: $(cat "$work/err2")"
timeout 20 "$call" "$addr" describe echo >"$work/describe" 2>&1
rc=$?
[ $rc -eq 0 ] && grep -q '^echo(bytes): bytes;  // untyped' "$work/describe" ||
  fail "describe echo exited $rc: $(cat "$work/describe")"

if [ $failures -ne 0 ]; then
  echo "$failures failure(s)" >&2
  exit 1
fi
echo "PASS"
