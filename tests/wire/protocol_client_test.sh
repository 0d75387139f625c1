#!/usr/bin/env bash
# Runs tests/wire/protocol_client.py (an independent Python client written from docs/protocol.md)
# against a fresh ringrpc-server, then against one that checks bearer tokens (--tokens-file);
# each time it stops the server with SIGTERM and checks it exits 0.
# Usage: protocol_client_test.sh PATH/TO/ringrpc-server PATH/TO/protocol_client.py
# Exit 77 (skipped) when the server cannot start because io_uring is unavailable.
set -u

server=${1:?usage: $0 ringrpc-server protocol_client.py}
client=${2:?usage: $0 ringrpc-server protocol_client.py}

work=$(mktemp -d "${TMPDIR:-/tmp}/protocol_client.XXXXXX") || exit 1
pid=

# wait_exit, and from scripts/lib.sh start_server; its track_pid hook keeps the one server in
# $pid for cleanup
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
track_pid() { pid=$1; }

# This script's own (the one server in $pid) in place of tests/lib.sh's.
cleanup() {
  # Only ever the server this script started, by its PID.
  if [ -n "$pid" ] && running "$pid"; then
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# run_round CLIENT_ARGS SERVER_ARGS...: one server, the client against it, then a clean stop.
run_round() {
  client_args=$1
  shift
  # A fresh file each round: reading a reused file could find the previous round's port.
  rm -f "$work/server.out" "$work/server.err"
  start_server "$work/server" "$server" --port 0 --readers 1 --handlers 1 "$@" || exit $?
  port=$listen_port
  echo "ringrpc-server (pid $pid) listening on port $port"

  timeout 90 python3 "$client" --port "$port" $client_args
  client_rc=$?
  if [ $client_rc -ne 0 ]; then
    echo "protocol_client.py failed (status $client_rc; 124 = timed out)" >&2
  fi

  # Stop the server the way an operator would; it must drain and exit 0 within 15 s.
  kill -TERM "$pid"
  if ! wait_exit "$pid" 150; then
    echo "ringrpc-server did not exit within 15 s of SIGTERM; killing it" >&2
    cat "$work/server.err" >&2
    exit 1
  fi
  wait "$pid"
  server_rc=$?
  pid=
  cat "$work/server.err"
  if [ $server_rc -ne 0 ]; then
    echo "ringrpc-server exited with status $server_rc after SIGTERM (expected 0)" >&2
    exit 1
  fi
  return $client_rc
}

run_round "" || exit $?
# Bearer tokens (docs/security.md): a second server that checks them, one token per line.
printf '# subject token [methods]\nfull tok-full-0123456789\nlimited tok-limited-42 echo\n' >"$work/tokens"
run_round "--token tok-full-0123456789 --limited-token tok-limited-42" --tokens-file "$work/tokens"
