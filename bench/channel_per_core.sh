#!/usr/bin/env bash
# Per-core speed through a one-member channel: the server (ringrpc-server --readers 1
# --handlers 1, the built-in echo on the default pool) pinned to SERVER_CPU, the load
# (bench/channel_bench, one client I/O thread) pinned to LOAD_CPU. CONNECTIONS plain clients
# against as many one-member channels sharing one I/O thread, in alternating rounds, at depth
# 1 and 16: calls/s and the load's CPU per call, median with min and max, and the
# channel/client ratio of each round (median, min, max). Runs under the benchmark lock so no
# two benchmarks share the machine.
#
#   bench/channel_per_core.sh                 # 5 rounds of 2 s per depth: about 1 minute
#   QUICK=1 bench/channel_per_core.sh         # 1 round of 1 s (smoke test)
#
# Environment: SERVER_CPU / LOAD_CPU [0 / 1], CONNECTIONS [64], ROUNDS [5], DURATION [2],
# DEPTHS ["1 16"], BUILD_DIR [build/bench] (meson -Dbenchmarks=true).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build/bench}
SERVER_CPU=${SERVER_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
CONNECTIONS=${CONNECTIONS:-64}
ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-2}
DEPTHS=${DEPTHS:-"1 16"}
if [[ -n "${QUICK:-}" ]]; then ROUNDS=1; DURATION=1; fi
bench=$BUILD_DIR/bench/channel_bench
server=$BUILD_DIR/tools/ringrpc-server
for f in "$bench" "$server"; do
  [[ -x $f ]] || { echo "channel_per_core: $f missing; build with -Dbenchmarks=true" >&2; exit 2; }
done
command -v taskset >/dev/null || { echo "channel_per_core: taskset (util-linux) missing" >&2; exit 2; }
for depth in $DEPTHS; do
  SERVER_CPU=$SERVER_CPU flock /tmp/ringrpc-bench.lock \
    taskset -c "$LOAD_CPU" "$bench" "$server" --connections "$CONNECTIONS" --depth "$depth" \
    --rounds "$ROUNDS" --seconds "$DURATION"
done
