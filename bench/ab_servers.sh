#!/usr/bin/env bash
# Two ringrpc-server binaries (A = before a change, B = after) under the same load, alternated
# within each round (A, B, A, B, ...), on one server core: calls/s at each depth of DEPTHS and
# server CPU per call, each as B/A, median of the rounds with min and max. Calls carry no metadata.
#
#   bench/ab_servers.sh OLD/ringrpc-server NEW/ringrpc-server [ringrpc-load]
#   bench/ab_servers.sh commit:d619993 NEW/ringrpc-server    A built from a commit, see below
#   ROUNDS=5 DURATION=5 DISPATCH=direct DEPTHS="1 16" bench/ab_servers.sh ...
#
# commit:REF builds that commit's ringrpc-server (release, no tests, no benchmarks) from
# `git archive` of this repository into /tmp/ringrpc-ab.SHA, kept for the next run; the
# repository itself is not touched. The load tool is B's (or the third argument), for both.
#
# Environment: ROUNDS [5] DURATION [4] s, WARMUP [1] s, CONNECTIONS [64], DEPTHS [$DEPTH or 16],
# SIZE [64], DISPATCH [direct] (direct: the echo on the reader; all: through the pool),
# PROTOCOL [ringrpc] (grpc: the same echo called as gRPC's /echo/echo), SERVER_CPU [0],
# LOAD_CPU [1]. Run it under `flock /tmp/ringrpc-bench.lock`. Only 127.0.0.1; every process
# runs under `timeout` and is stopped by its PID.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# server_of ARG: ARG itself, or for commit:REF the path of that commit's ringrpc-server, built
# once (logs on stderr).
server_of() {
  if [[ $1 != commit:* ]]; then printf '%s\n' "$1"; return; fi
  local sha dir
  sha=$(git -C "$repo" rev-parse --verify "${1#commit:}^{commit}")
  dir=/tmp/ringrpc-ab.$sha
  if [[ ! -x $dir/build/tools/ringrpc-server ]]; then
    if [[ ! -f $dir/src/meson.build ]]; then
      mkdir -p "$dir/src"
      git -C "$repo" archive "$sha" | tar -x -C "$dir/src"
    fi
    [[ -f $dir/build/build.ninja ]] ||
      meson setup "$dir/build" "$dir/src" -Dbuildtype=release -Dbenchmarks=false -Dtests=false >&2
    ninja -C "$dir/build" -j"${AB_JOBS:-2}" tools/ringrpc-server >&2
  fi
  printf '%s\n' "$dir/build/tools/ringrpc-server"
}
a_bin=$(server_of "${1:?usage: $0 A/ringrpc-server|commit:REF B/ringrpc-server|commit:REF [ringrpc-load]}")
b_bin=$(server_of "${2:?usage: $0 A/ringrpc-server|commit:REF B/ringrpc-server|commit:REF [ringrpc-load]}")
load_bin=${3:-$(dirname "$b_bin")/ringrpc-load}
rounds=${ROUNDS:-5} duration=${DURATION:-4} warmup=${WARMUP:-1}
connections=${CONNECTIONS:-64} depths=${DEPTHS:-${DEPTH:-16}} size=${SIZE:-64} dispatch=${DISPATCH:-direct}
server_cpu=${SERVER_CPU:-0} load_cpu=${LOAD_CPU:-1}
case ${PROTOCOL:-ringrpc} in
  ringrpc) target_path=/echo scheme=ringrpc ;;
  grpc) target_path=/echo/echo scheme=grpc ;;
  *) echo "ab_servers.sh: PROTOCOL is '$PROTOCOL', not ringrpc or grpc" >&2; exit 2 ;;
esac
work=$(mktemp -d "${TMPDIR:-/tmp}/ab_servers.XXXXXX")
pinned_pid=
cleanup() {
  stop_pinned_server
  rm -rf "$work"
}
trap cleanup EXIT

run() {  # run VARIANT BIN ROUND DEPTH: prints "VARIANT DEPTH calls_per_s cpu_us_per_call"
  local variant=$1 bin=$2 round=$3 depth=$4 port=
  start_pinned_server "$work/server" 120 "$server_cpu" "$bin" --port 0 --readers 1 --handlers 1 \
    --log-level error --dispatch="$dispatch" || { echo "ab_servers.sh: $variant did not start" >&2; exit 1; }
  port=$listen_port
  local -a load=(timeout 60 taskset -c "$load_cpu" "$load_bin" -s "$size" -c "$connections" -P "$depth")
  "${load[@]}" -d "${warmup}s" --warmup 0s "$scheme://127.0.0.1:$port$target_path" >/dev/null 2>&1
  local c0 c1
  c0=$(cpu_ticks "$pinned_pid")
  "${load[@]}" -d "${duration}s" --warmup 0s --json "$work/$variant.$round.$depth.json" "$scheme://127.0.0.1:$port$target_path" >/dev/null
  c1=$(cpu_ticks "$pinned_pid")
  stop_pinned_server
  python3 - "$work/$variant.$round.$depth.json" "$c0" "$c1" "$(getconf CLK_TCK)" "$variant" "$depth" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
cpu_s = (int(sys.argv[3]) - int(sys.argv[2])) / int(sys.argv[4])
print(sys.argv[5], sys.argv[6], "%.0f" % j["calls_per_sec"], "%.3f" % (cpu_s * 1e6 / j["calls_ok"]))
PY
}

echo "A: $a_bin"
echo "B: $b_bin"
# The order alternates per round too (AB, BA, ...), so neither variant always runs second.
for r in $(seq "$rounds"); do
  for d in $depths; do
    if ((r % 2)); then
      run A "$a_bin" "$r" "$d" >>"$work/results"
      run B "$b_bin" "$r" "$d" >>"$work/results"
    else
      run B "$b_bin" "$r" "$d" >>"$work/results"
      run A "$a_bin" "$r" "$d" >>"$work/results"
    fi
  done
done
python3 - "$work/results" "$depths" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
for depth in sys.argv[2].split():
    a = [r for r in rows if r[0] == "A" and r[1] == depth]
    b = [r for r in rows if r[0] == "B" and r[1] == depth]
    for i, name in ((2, "calls/s"), (3, "server CPU us/call")):
        ratios = [float(y[i]) / float(x[i]) for x, y in zip(a, b)]
        print("depth %-3s %-20s A %s | B %s | B/A median %.3f (min %.3f, max %.3f)" % (
            depth, name, " ".join(x[i] for x in a), " ".join(y[i] for y in b),
            statistics.median(ratios), min(ratios), max(ratios)))
PY
