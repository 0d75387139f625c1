#!/usr/bin/env bash
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
# start_server; its track_pid hook keeps the one server in $pid for cleanup
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/../../scripts/lib.sh"
track_pid() { pid=$1; }

start_server "$work/server" "$server" 0 || exit $?
port=$listen_port

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
