#!/usr/bin/env bash
# Server memory per idle open stream: ringrpc-server (default options) holding 10,000 idle
# bidi streams, 100 on each of 100 connections (the per-connection cap is 100, the server's
# 16,384: docs/operations.md, "Streams").
#
# bench/stream_memory (the client, one process, one client runtime) connects, makes one echo
# call per connection, opens the streams on the built-in `echo_stream` (one "x" echoed on each,
# so the server has opened them all), then half-closes and finishes them; a second cycle opens
# and ends them again (glibc keeps freed memory in its arenas: the second cycle shows whether the
# first one's is reused or lost); then it closes the connections. It stops after each step
# while this script reads the server's VmRSS and RssAnon (/proc/PID/status) after SETTLE
# seconds. Prints each reading, the memory per idle stream ((streams open - connections only) /
# streams), how much of it came back after the end, and what the second cycle added.
# A memory measurement, not a speed benchmark: about 20 s.
#
#   bench/stream_memory.sh
#   STREAM_CONNECTIONS=10 STREAMS_PER_CONNECTION=50 bench/stream_memory.sh
#
# Environment (all optional):
#   STREAM_CONNECTIONS [100]  STREAMS_PER_CONNECTION [100] (at most 100: the server's cap)
#   CYCLES [2] times the streams are opened and ended on the same connections
#   SETTLE [2] seconds before each reading      LIMIT [300] seconds each process may live
#   BUILD_DIR [build/release], configured with -Dbenchmarks=true
#   SERVER_CPUS [all the CPUs this script may use] where the server runs (its default readers
#                and handlers follow the CPUs it may use)
#
# Only 127.0.0.1 is used; both processes run under `timeout` and are stopped by their PIDs.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
cd "$(ringrpc_root)"

connections=${STREAM_CONNECTIONS:-100}
per_connection=${STREAMS_PER_CONNECTION:-100}
cycles=${CYCLES:-2}
settle=${SETTLE:-2}
limit=${LIMIT:-300}
build_dir=${BUILD_DIR:-build/release}
server_cpus=${SERVER_CPUS:-0-$(($(nproc) - 1))}
server_bin=$build_dir/tools/ringrpc-server
client_bin=$build_dir/bench/stream_memory
bench_need_built stream_memory.sh "$build_dir" "$server_bin" "$client_bin"
streams=$((connections * per_connection))
if ((streams == 0 || cycles == 0)); then
  echo "stream_memory.sh: no streams to open" >&2
  exit 2
fi

# Each connection is a socket at both ends, all on this machine, plus the rings' own fds.
need_fds=$((2 * connections + 128))
if (($(ulimit -n) < need_fds)); then
  ulimit -n "$((need_fds > 4096 ? need_fds : 4096))" || {
    echo "stream_memory.sh: $connections connections need about $need_fds open files; ulimit -n is $(ulimit -n)" >&2
    exit 2
  }
fi

bench_work_dir stream_memory
client_pid=''
cleanup() {
  [[ -z $client_pid ]] || kill -TERM "$client_pid" 2>/dev/null || true
  bench_cleanup
}
trap cleanup EXIT

if ! start_pinned_server "$work/server" "$limit" "$server_cpus" "$server_bin" --port 0 --log-level error; then
  echo "stream_memory.sh: the server did not start" >&2
  exit 1
fi

# status_kib FIELD: the server's FIELD (VmRSS, RssAnon) from /proc/PID/status, in KiB.
status_kib() { awk -v f="$1:" '$1 == f { print $2 }' "/proc/$pinned_pid/status"; }

rss=() anon=()
# reading I LABEL: after SETTLE seconds, the server's memory now, printed and kept as reading I.
reading() {
  sleep "$settle"
  running "$pinned_pid" || { echo "stream_memory.sh: the server exited" >&2; cat "$work/server.err" >&2; exit 1; }
  rss[$1]=$(status_kib VmRSS) anon[$1]=$(status_kib RssAnon)
  printf '%-36s %10s %12s\n' "$2" "${rss[$1]}" "${anon[$1]}"
}

# expect_phase NAME: the client's next line is "phase NAME" (it has done that step).
expect_phase() {
  local line=''
  if ! read -r -t "$limit" line <&"${client[0]}" || [[ $line != "phase $1" ]]; then
    echo "stream_memory.sh: the client stopped before '$1' (said '${line}')" >&2
    exit 1
  fi
}

echo "ringrpc-server (default options, CPUs $server_cpus), $connections connections x $per_connection streams = $streams idle echo_stream streams"
printf '%-36s %10s %12s\n' "step" "VmRSS KiB" "RssAnon KiB"
reading 0 "started"
coproc client { exec timeout "$limit" "$client_bin" "$listen_port" "$connections" "$per_connection" "$cycles"; }
# shellcheck disable=SC2154  # coproc sets client_PID
client_pid=$client_PID
phases=(connections) labels=("$connections connections (one echo each)")
for ((cycle = 1; cycle <= cycles; cycle++)); do
  phases+=(streams ended)
  labels+=("$streams streams open, idle (cycle $cycle)" "streams ended (cycle $cycle)")
done
phases+=(closed) labels+=("connections closed")
for i in "${!phases[@]}"; do
  expect_phase "${phases[i]}"
  reading "$((i + 1))" "${labels[i]}"
  echo go >&"${client[1]}"
done
wait "$client_pid" || { echo "stream_memory.sh: the client failed" >&2; exit 1; }
client_pid=''

# Readings by index: 0 started, 1 connections, 2 / 3 open / ended (cycle 1), 2k / 2k+1 open /
# ended (cycle k), the last one closed.
python3 - "$streams" "${rss[*]}" "${anon[*]}" <<'EOF'
import sys
n = int(sys.argv[1])
rss = [int(x) for x in sys.argv[2].split()]
anon = [int(x) for x in sys.argv[3].split()]
print(f"memory per idle stream: {(rss[2] - rss[1]) * 1024 / n:.0f} B VmRSS, "
      f"{(anon[2] - anon[1]) * 1024 / n:.0f} B RssAnon")
print(f"given back after the end: {rss[2] - rss[3]} KiB of the {rss[2] - rss[1]} KiB the streams took "
      f"(VmRSS; RssAnon {anon[2] - anon[3]} of {anon[2] - anon[1]} KiB)")
if len(rss) > 5:
    print(f"the last cycle over the first: {rss[-3] - rss[2]:+} KiB open, {rss[-2] - rss[3]:+} KiB ended (VmRSS)")
print(f"connections closed: {rss[-1] - rss[1]:+} KiB against the connections-only reading (VmRSS)")
EOF
