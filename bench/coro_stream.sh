#!/usr/bin/env bash
# Server CPU per message of a bidi echo stream written as one coroutine per stream
# (add_coroutine_stream_method: co_read, co_write) against the same echo as stream callbacks
# (the built-in `echo_stream`), on one server: bench/coro_stream_server on one core,
# ringrpc-load --stream on the other, `-c C -P P`, alternating rounds; each run's server CPU per
# message comes from --server-pid (/proc/PID/stat over the measured window). The ratio is what
# the coroutine form costs over the callbacks.
#
#   bench/coro_stream.sh
#   CS_ROUNDS=5 CS_DURATION=4s CS_CONNECTIONS=8 CS_DEPTH=16 bench/coro_stream.sh
#
# Environment: CS_BUILD_DIR (or BUILD_DIR) [build/release], CS_ROUNDS [5], CS_DURATION [4s],
# CS_CONNECTIONS [8], CS_DEPTH [16], CS_SERVER_CPU / CS_LOAD_CPU [0 / 1].
# Only 127.0.0.1; the server is stopped by PID on exit.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${CS_BUILD_DIR:-${BUILD_DIR:-build/release}}
rounds=${CS_ROUNDS:-5}
duration=${CS_DURATION:-4s}
conns=${CS_CONNECTIONS:-8}
depth=${CS_DEPTH:-16}
work=$(mktemp -d)
server_pid=
cleanup() {
  if [[ -n $server_pid ]]; then kill "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

taskset -c "${CS_SERVER_CPU:-0}" "$build/bench/coro_stream_server" >"$work/server.out" 2>&1 &
server_pid=$!
for _ in $(seq 100); do grep -q "listening on" "$work/server.out" && break; sleep 0.1; done
port=$(sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$work/server.out" | head -1)
[[ -n $port ]] || { echo "coro_stream: coro_stream_server did not start" >&2; cat "$work/server.out" >&2; exit 1; }

for r in $(seq "$rounds"); do
  for method in echo_stream co_echo_stream; do
    taskset -c "${CS_LOAD_CPU:-1}" timeout 120 "$build/tools/ringrpc-load" --stream -c "$conns" -P "$depth" \
      -d "$duration" --warmup 0.5s --server-pid "$server_pid" --json "$work/$method.$r.json" \
      "ringrpc://127.0.0.1:$port/$method" >"$work/$method.$r.log" 2>&1 ||
      { echo "coro_stream: ringrpc-load failed:" >&2; cat "$work/$method.$r.log" >&2; exit 1; }
  done
done

python3 - "$work" "$rounds" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
ratios = []
print(f"{'round':>5}  {'callbacks msgs/s':>16} {'us/msg':>8}  {'coroutine msgs/s':>16} {'us/msg':>8}  {'ratio':>6}")
for r in range(1, rounds + 1):
    cb = json.load(open(f"{work}/echo_stream.{r}.json"))
    co = json.load(open(f"{work}/co_echo_stream.{r}.json"))
    cbc, coc = cb["server_cost"]["cpu_us_per_call"], co["server_cost"]["cpu_us_per_call"]
    cbr, cor = cb["calls_ok"] / cb["measured_s"], co["calls_ok"] / co["measured_s"]
    ratios.append(coc / cbc)
    print(f"{r:>5}  {cbr:>16.0f} {cbc:>8.3f}  {cor:>16.0f} {coc:>8.3f}  {coc / cbc:>6.2f}")
print(f"server CPU per message, coroutine / callbacks: median {statistics.median(ratios):.2f} "
      f"(min {min(ratios):.2f}, max {max(ratios):.2f})")
PY
