#!/usr/bin/env bash
# Server CPU per message of a bidi stream against a unary call at the same depth: ringrpc-server
# on one core, ringrpc-load on the other, `-c C -P P` on the built-in `echo` (a unary call on the
# default pool) and `--stream -c C -P P` on the built-in `echo_stream` (C streams, P messages in
# flight on each), alternating rounds; each run's server CPU per call comes from --server-pid
# (/proc/PID/stat over the measured window). The goal (issue 27): a stream message costs the
# server no more than a unary call (ratio <= 1.0).
#
#   bench/stream_vs_unary.sh
#   SVU_ROUNDS=5 SVU_DURATION=4s SVU_CONNECTIONS=8 SVU_DEPTH=16 bench/stream_vs_unary.sh
#
# Environment: SVU_BUILD_DIR (or BUILD_DIR) [build/release], SVU_ROUNDS [5], SVU_DURATION [4s],
# SVU_CONNECTIONS [8], SVU_DEPTH [16], SVU_SERVER_CPU / SVU_LOAD_CPU [0 / 1].
# Only 127.0.0.1; the server is stopped by PID on exit.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${SVU_BUILD_DIR:-${BUILD_DIR:-build/release}}
rounds=${SVU_ROUNDS:-5}
duration=${SVU_DURATION:-4s}
conns=${SVU_CONNECTIONS:-8}
depth=${SVU_DEPTH:-16}
work=$(mktemp -d)
server_pid=
cleanup() {
  if [[ -n $server_pid ]]; then kill "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

taskset -c "${SVU_SERVER_CPU:-0}" "$build/tools/ringrpc-server" --port 0 --log-level error >"$work/server.out" 2>&1 &
server_pid=$!
for _ in $(seq 100); do grep -q "listening on" "$work/server.out" && break; sleep 0.1; done
port=$(sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$work/server.out" | head -1)
[[ -n $port ]] || { echo "stream_vs_unary: ringrpc-server did not start" >&2; cat "$work/server.out" >&2; exit 1; }

for r in $(seq "$rounds"); do
  for which in unary stream; do
    if [[ $which == stream ]]; then flags=(--stream); method=echo_stream; else flags=(); method="echo"; fi
    taskset -c "${SVU_LOAD_CPU:-1}" timeout 120 "$build/tools/ringrpc-load" "${flags[@]}" -c "$conns" -P "$depth" \
      -d "$duration" --warmup 0.5s --server-pid "$server_pid" --json "$work/$which.$r.json" \
      "ringrpc://127.0.0.1:$port/$method" >"$work/$which.$r.log" 2>&1 ||
      { echo "stream_vs_unary: ringrpc-load failed:" >&2; cat "$work/$which.$r.log" >&2; exit 1; }
  done
done

python3 - "$work" "$rounds" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
ratios = []
print(f"{'round':>5}  {'unary calls/s':>14} {'us/call':>8}  {'stream msgs/s':>14} {'us/msg':>8}  {'ratio':>6}")
for r in range(1, rounds + 1):
    u = json.load(open(f"{work}/unary.{r}.json"))
    s = json.load(open(f"{work}/stream.{r}.json"))
    uc, sc = u["server_cost"]["cpu_us_per_call"], s["server_cost"]["cpu_us_per_call"]
    ur, sr = u["calls_ok"] / u["measured_s"], s["calls_ok"] / s["measured_s"]
    ratios.append(sc / uc)
    print(f"{r:>5}  {ur:>14.0f} {uc:>8.3f}  {sr:>14.0f} {sc:>8.3f}  {sc / uc:>6.2f}")
print(f"server CPU per stream message / per unary call: median {statistics.median(ratios):.2f} "
      f"(min {min(ratios):.2f}, max {max(ratios):.2f}); goal <= 1.0")
PY
