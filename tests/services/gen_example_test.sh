#!/bin/sh
# The Greeter example of docs/services.md: its server, then its client, a good call and one the
# server refuses. Exit 77 (skipped) when the server cannot start because io_uring is unavailable.
# Usage: gen_example_test.sh PATH/TO/greeter_server PATH/TO/greeter_client
set -u
server=${1:?usage: $0 greeter_server greeter_client}
client=${2:?usage: $0 greeter_server greeter_client}
work=$(mktemp -d "${TMPDIR:-/tmp}/gen_example.XXXXXX") || exit 1
pid=
cleanup() {
  # Only ever the server this script started, by its PID.
  if [ -n "$pid" ]; then
    kill -TERM "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  fi
  rm -rf "$work"
}
trap cleanup EXIT

"$server" 0 >"$work/server.out" 2>"$work/server.err" &
pid=$!
port=
i=0
while [ $i -lt 100 ] && [ -z "$port" ]; do
  port=$(sed -n 's/^listening on .*:\([0-9][0-9]*\)$/\1/p' "$work/server.out")
  if [ -z "$port" ] && ! kill -0 "$pid" 2>/dev/null; then
    wait "$pid"
    pid=
    cat "$work/server.err" >&2
    if grep -qi 'io_uring' "$work/server.err"; then exit 77; fi
    exit 1
  fi
  [ -n "$port" ] || sleep 0.1
  i=$((i + 1))
done
[ -n "$port" ] || { echo "greeter_server did not print its port" >&2; exit 1; }

out=$(timeout 10 "$client" "$port" world)
[ "$out" = "hello, world" ] || { echo "FAIL: greeter_client printed '$out'" >&2; exit 1; }
echo "ok: greeter_client $port world -> $out"

err=$(timeout 10 "$client" "$port" "" 2>&1)
rc=$?
[ $rc -eq 1 ] || { echo "FAIL: an empty name exited $rc, expected 1" >&2; exit 1; }
[ "$err" = "SayHello failed: server_status: bad_request: name is empty" ] || {
  echo "FAIL: an empty name printed '$err'" >&2
  exit 1
}
echo "ok: an empty name -> $err"

kill -TERM "$pid"
wait "$pid"
src=$?
pid=
[ $src -eq 0 ] || { echo "FAIL: greeter_server exited $src after SIGTERM" >&2; exit 1; }
echo "ok: greeter_server stops on SIGTERM with status 0"
