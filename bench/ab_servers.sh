#!/usr/bin/env bash
# Two ringrpc-server binaries (A = before a change, B = after) under the same load, alternated
# within each round (A, B, A, B, ...), on one server core: calls/s at depth 16 and server CPU per
# call, each as B/A, median of the rounds with min and max. Calls carry no metadata.
#
#   bench/ab_servers.sh OLD/ringrpc-server NEW/ringrpc-server [ringrpc-load]
#   ROUNDS=5 DURATION=5 DISPATCH=direct bench/ab_servers.sh ...
#
# Environment: ROUNDS [5] DURATION [4] s, WARMUP [1] s, CONNECTIONS [64], DEPTH [16], SIZE [64],
# DISPATCH [direct] (direct: the echo on the reader; all: through the pool), SERVER_CPU [0],
# LOAD_CPU [1]. Run it under `flock /tmp/ringrpc-bench.lock`. Only 127.0.0.1; every process runs
# under `timeout` and is stopped by its PID.
set -euo pipefail
a_bin=${1:?usage: $0 A/ringrpc-server B/ringrpc-server [ringrpc-load]}
b_bin=${2:?usage: $0 A/ringrpc-server B/ringrpc-server [ringrpc-load]}
load_bin=${3:-$(dirname "$b_bin")/ringrpc-load}
rounds=${ROUNDS:-5} duration=${DURATION:-4} warmup=${WARMUP:-1}
connections=${CONNECTIONS:-64} depth=${DEPTH:-16} size=${SIZE:-64} dispatch=${DISPATCH:-direct}
server_cpu=${SERVER_CPU:-0} load_cpu=${LOAD_CPU:-1}
work=$(mktemp -d "${TMPDIR:-/tmp}/ab_servers.XXXXXX")
timeout_pid=
cleanup() {
  if [[ -n $timeout_pid ]]; then kill -TERM "$timeout_pid" 2>/dev/null || true; wait "$timeout_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

cpu_ticks() {
  local stat rest
  stat=$(<"/proc/$1/stat")
  rest=${stat##*) }
  local -a f
  read -r -a f <<<"$rest"
  echo $((f[11] + f[12]))
}

run() {  # run VARIANT BIN ROUND: prints "VARIANT calls_per_s cpu_us_per_call"
  local variant=$1 bin=$2 round=$3 port= server_pid=
  timeout 120 taskset -c "$server_cpu" "$bin" --port 0 --readers 1 --handlers 1 --log-level error \
    --dispatch="$dispatch" >"$work/out" 2>"$work/err" &
  timeout_pid=$!
  for _ in $(seq 100); do
    port=$(sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$work/out")
    [[ -n $port ]] && break
    sleep 0.05
  done
  [[ -n $port ]] || { echo "ab_servers.sh: $variant did not start: $(cat "$work/err")" >&2; exit 1; }
  server_pid=$(awk '{print $1}' "/proc/$timeout_pid/task/$timeout_pid/children")
  local -a load=(timeout 60 taskset -c "$load_cpu" "$load_bin" -s "$size" -c "$connections" -P "$depth")
  "${load[@]}" -T "${warmup}s" --warmup 0s "ringrpc://127.0.0.1:$port/echo" >/dev/null 2>&1
  local c0 c1
  c0=$(cpu_ticks "$server_pid")
  "${load[@]}" -T "${duration}s" --warmup 0s --json "$work/$variant.$round.json" "ringrpc://127.0.0.1:$port/echo" >/dev/null
  c1=$(cpu_ticks "$server_pid")
  kill -TERM "$timeout_pid"
  wait "$timeout_pid" || true
  timeout_pid=
  python3 - "$work/$variant.$round.json" "$c0" "$c1" "$(getconf CLK_TCK)" "$variant" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
cpu_s = (int(sys.argv[3]) - int(sys.argv[2])) / int(sys.argv[4])
print(sys.argv[5], "%.0f" % j["calls_per_sec"], "%.3f" % (cpu_s * 1e6 / j["calls_ok"]))
PY
}

for r in $(seq "$rounds"); do
  run A "$a_bin" "$r" >>"$work/results"
  run B "$b_bin" "$r" >>"$work/results"
done
python3 - "$work/results" "$rounds" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
a = [r for r in rows if r[0] == "A"]
b = [r for r in rows if r[0] == "B"]
for i, name in ((1, "calls/s"), (2, "server CPU us/call")):
    ratios = [float(y[i]) / float(x[i]) for x, y in zip(a, b)]
    print("%-20s A %s | B %s | B/A median %.3f (min %.3f, max %.3f)" % (
        name, " ".join(x[i] for x in a), " ".join(y[i] for y in b),
        statistics.median(ratios), min(ratios), max(ratios)))
PY
