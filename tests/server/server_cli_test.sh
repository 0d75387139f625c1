#!/usr/bin/env bash
# ringrpc-server as an operator runs it: start-up failures (an endless or hanging --config, a
# huge file, products of knobs past their maxima, a missing file) are one line and exit 2;
# SIGHUP reloads [logging] and keeps serving; a second SIGTERM during a drain exits 3 at once;
# a stderr whose reader went away does not kill the server (SIGPIPE).
# Usage: server_cli_test.sh PATH/TO/ringrpc-server PATH/TO/ringrpc-load
# Exit 77 (skipped) when the server cannot start because io_uring is unavailable.
set -u

server=${1:?usage: $0 ringrpc-server ringrpc-load}
load=${2:?usage: $0 ringrpc-server ringrpc-load}

work=$(mktemp -d "${TMPDIR:-/tmp}/server_cli.XXXXXX") || exit 1
pid=
load_pid=
failures=0

# fail, ok, wait_exit; and from scripts/lib.sh running, wait_listening, wait_for
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"

# This script's own (its $pid, $load_pid and fd 5) in place of tests/lib.sh's.
cleanup() {
  # Only the processes this script started, by their PIDs.
  for p in $pid $load_pid; do
    if running "$p"; then
      kill -KILL "$p" 2>/dev/null
      wait "$p" 2>/dev/null
    fi
  done
  exec 5<&- 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# --- start-up failures: exit 2, one line naming the cause ---------------------------------------
# Capped: before the fix /dev/zero was read until memory ran out. Not under sanitizers: their
# runtimes reserve terabytes of address space and die under such a cap (the release stage has it).
as_cap=(prlimit --as=2147483648)
if sanitized "$server"; then as_cap=(); fi
expect_startup_error() {
  name=$1
  pattern=$2
  shift 2
  timeout 10 "${as_cap[@]}" "$server" "$@" >"$work/$name.out" 2>"$work/$name.err" </dev/null
  rc=$?
  lines=$(wc -l <"$work/$name.err")
  if [ $rc -ne 2 ]; then
    fail "$name: ringrpc-server $* exited $rc, expected 2 (124: it hung)"
    head -c 2000 "$work/$name.err" >&2
  elif [ "$lines" -ne 1 ]; then
    fail "$name: $lines lines on stderr, expected one:"
    head -c 2000 "$work/$name.err" >&2
  elif ! grep -Eq -- "^ringrpc-server: .*($pattern)" "$work/$name.err"; then
    fail "$name: stderr does not name the cause (/$pattern/): $(cat "$work/$name.err")"
  else
    ok "$name: $(cat "$work/$name.err")"
  fi
}

mkfifo "$work/config.fifo" || exit 1
head -c 2097152 /dev/zero | tr '\0' '#' >"$work/huge.toml"
expect_startup_error dev_zero 'character device' --config /dev/zero
expect_startup_error fifo 'FIFO' --config "$work/config.fifo"
expect_startup_error huge '1048576 bytes' --config "$work/huge.toml"
expect_startup_error missing 'No such file' --config "$work/no-such.toml"
expect_startup_error directory 'directory' --config "$work"
expect_startup_error handlers_x_queue 'at most 16777216' --handlers 4096 --handler-queue-size 1048576
expect_startup_error bad_flag 'not expected' --no-such-flag
expect_startup_error bad_value 'out of range' --port 70000

timeout 10 "$server" --help >"$work/help.out" 2>&1
rc=$?
if [ $rc -ne 0 ]; then
  fail "--help exited $rc"
elif ! grep -q 'Exit status: 0' "$work/help.out" || ! grep -q 'SIGHUP' "$work/help.out" ||
     ! grep -q '3 a second SIGINT/SIGTERM' "$work/help.out"; then
  fail "--help has no signals and exit status footer"
  cat "$work/help.out" >&2
else
  ok "--help documents signals and exit statuses"
fi

# --- a running server ---------------------------------------------------------------------------
echo_calls() {
  timeout 30 "$load" -c 1 -n 20 --warmup 0s "ringrpc://127.0.0.1:$port/echo" >"$work/$1.out" 2>"$work/$1.err"
}

printf '[logging]\nlevel = "warn"\n' >"$work/ringrpc.toml"
"$server" --config "$work/ringrpc.toml" --port 0 --readers 1 --handlers 2 --drain-timeout-ms 60000 \
  --admin-port 0 >"$work/a.out" 2>"$work/a.err" &
pid=$!
wait_listening "$pid" "$work/a.out" "$work/a.err" || exit $?
port=$listen_port
admin_port=$(sed -n 's|^admin on http://127.0.0.1:\([0-9]*\)/$|\1|p' "$work/a.out")

# busy_handlers: how many of the server's handler threads run a call now (its /metrics).
busy_handlers() {
  local n
  exec 3<>"/dev/tcp/127.0.0.1/$admin_port" || return 1
  printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3
  n=$(sed -n 's/^ringrpc_pool_active_threads{pool="default".*} \([0-9]*\)$/\1/p' <&3)
  exec 3>&-
  echo "${n:-0}"
}

# SIGHUP: the log level comes from the file again; the server keeps serving.
printf '[logging]\nlevel = "info"\n' >"$work/ringrpc.toml"
kill -HUP "$pid"
if ! wait_for "$work/a.err" 'event=config_reloaded .*level=info'; then
  fail "SIGHUP: no config_reloaded line at the file's new level:"
  cat "$work/a.err" >&2
elif ! running "$pid"; then
  fail "SIGHUP killed the server"
elif ! echo_calls after_hup; then
  fail "no calls answered after SIGHUP"
  cat "$work/after_hup.err" >&2
else
  ok "SIGHUP reloaded the log level and the server still serves"
fi
printf '[logging]\nlevel = "loud"\n' >"$work/ringrpc.toml"
kill -HUP "$pid"
if ! wait_for "$work/a.err" 'event=config_reload_failed'; then
  fail "SIGHUP with a broken file logged no config_reload_failed"
elif ! running "$pid" || ! echo_calls after_bad_hup; then
  fail "SIGHUP with a broken file stopped the server"
else
  ok "SIGHUP with a broken file keeps the configuration and serves"
fi

# SIGTERM starts a drain that waits for a 20 s sleep; a second SIGTERM ends it at once, exit 3.
printf '20000000' >"$work/sleep.payload"
timeout 60 "$load" -c 1 -n 1 --warmup 0s --timeout 60s --payload-file "$work/sleep.payload" \
  "ringrpc://127.0.0.1:$port/sleep" >"$work/sleep.out" 2>"$work/sleep.err" &
load_pid=$!
# The call must be sleeping in a handler before the first SIGTERM: on a busy machine the load
# tool can take over a second to connect, and a drain with nothing in flight ends at once.
# Seen busy on two reads in a row: a handler still finishing an earlier call is busy for
# microseconds, the sleep for 20 s.
i=0 seen=0
while [ $seen -lt 2 ] && [ $i -lt 300 ]; do
  if [ "$(busy_handlers)" -ge 1 ]; then seen=$((seen + 1)); else seen=0; fi
  sleep 0.1
  i=$((i + 1))
done
if [ $seen -lt 2 ]; then
  fail "the sleep call did not reach a handler within 30 s:"
  cat "$work/sleep.err" >&2
fi
kill -TERM "$pid"
sleep 0.5
if ! running "$pid"; then
  fail "the server did not wait for the call in flight after one SIGTERM (drain_timeout 60 s)"
fi
kill -TERM "$pid"
if ! wait_exit "$pid" 50; then
  fail "the server still runs 5 s after a second SIGTERM; its threads (name state wchan) and stderr:"
  for t in /proc/"$pid"/task/*; do
    echo "  $(cat "$t/comm") $(awk '{print $3}' "$t/stat") $(cat "$t/wchan" 2>/dev/null)" >&2
  done
  cat "$work/a.err" >&2
else
  wait "$pid"
  rc=$?
  if [ $rc -ne 3 ]; then
    fail "a second SIGTERM during the drain: exit status $rc, expected 3"
    cat "$work/a.err" >&2
  elif ! grep -q 'second SIGTERM during the drain' "$work/a.err"; then
    fail "the forced stop did not say why"
  else
    ok "a second SIGTERM during the drain exits 3 at once"
  fi
fi
pid=
if running "$load_pid"; then kill -TERM "$load_pid" 2>/dev/null; fi
wait "$load_pid" 2>/dev/null
load_pid=

# --- stderr is a pipe whose reader went away ------------------------------------------------------
mkfifo "$work/stderr.fifo" || exit 1
"$server" --port 0 --readers 1 --handlers 2 --slow-call-us 1000 >"$work/b.out" 2>"$work/stderr.fifo" &
pid=$!
exec 5<"$work/stderr.fifo"  # the reader: lets the server's open of its stderr complete
wait_listening "$pid" "$work/b.out" || exit $?  # not its stderr: the fifo would block
port=$listen_port
exec 5<&-                   # ... and goes away without reading
printf '20000' >"$work/short_sleep.payload"  # 20 ms: over the 1 ms slow-call threshold, a warning
timeout 30 "$load" -c 1 -n 3 --warmup 0s --payload-file "$work/short_sleep.payload" \
  "ringrpc://127.0.0.1:$port/sleep" >"$work/slow.out" 2>"$work/slow.err"
sleep 0.5  # the log queue's thread writes the warning
if ! running "$pid"; then
  wait "$pid"
  fail "writing a warning to a closed stderr pipe killed the server (status $?)"
  pid=
elif ! echo_calls after_epipe; then
  fail "no calls answered after a warning to a closed stderr pipe"
else
  ok "a warning to a closed stderr pipe does not kill the server"
fi
if [ -n "$pid" ]; then
  kill -TERM "$pid"
  wait "$pid"
  rc=$?
  if [ $rc -ne 0 ]; then fail "SIGTERM with a closed stderr: exit status $rc, expected 0"; fi
  pid=
fi

# --- IPv6: the start-up line is a HOST:PORT a client can use as it is ---------------------------
if [ -e /proc/net/if_inet6 ]; then
  "$server" --host ::1 --port 0 >"$work/v6.out" 2>"$work/v6.err" </dev/null &
  pid=$!
  wait_listening "$pid" "$work/v6.out" "$work/v6.err" || exit $?
  if grep -Eq '^listening on \[::1\]:[0-9]+$' "$work/v6.out"; then
    ok "IPv6 start-up line: $(cat "$work/v6.out")"
  else
    fail "IPv6 start-up line lacks brackets: $(cat "$work/v6.out")"
  fi
  kill -TERM "$pid"
  wait "$pid"
  pid=
fi

# --- the open-file limit: raised to the hard one, so 10,000 connections are not capped at 1,024 --
hard=$(ulimit -Hn)
if [ "$hard" != unlimited ] && [ "$hard" -gt 1024 ]; then
  prlimit --nofile=1024:"$hard" "$server" --port 0 >"$work/nofile.out" 2>"$work/nofile.err" </dev/null &
  pid=$!
  wait_listening "$pid" "$work/nofile.out" "$work/nofile.err" || exit $?
  soft=$(awk '/^Max open files/ {print $4}' "/proc/$pid/limits")
  if [ "$soft" = "$hard" ]; then
    ok "started with a soft open-file limit of 1024, runs with $soft (the hard limit)"
  else
    fail "open-file soft limit $soft after start, expected the hard limit $hard"
  fi
  kill -TERM "$pid"
  wait "$pid"
  pid=
fi

if [ $failures -ne 0 ]; then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "all server_cli checks passed"
