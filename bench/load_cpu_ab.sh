#!/usr/bin/env bash
# ringrpc-load's own CPU per call against ringrpc-server, this build against a baseline build,
# alternating rounds: the check behind "client CPU per request stays within 5 %" (issue 34).
# ringrpc-server on SERVER_CPU, ringrpc-load on LOAD_CPU; CPU is the load process's user+sys
# (/usr/bin/time) over its calls_ok (--json). Prints per round both figures, then new/old as
# median (min, max).
#
#   BASELINE_LOAD=/tmp/old/tools/ringrpc-load bench/load_cpu_ab.sh              # closed loop -c 64
#   LOADARGS="-R 20k -c 64 -z 4s" BASELINE_LOAD=... ROUNDS=5 bench/load_cpu_ab.sh  # open loop
#
# Environment: BASELINE_LOAD (required), BUILD_DIR [build/release], LOADARGS [-c 64 -z 4s],
# ROUNDS [5], SERVER_CPU / LOAD_CPU [0 / 1]. Only 127.0.0.1; the server is stopped by PID.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${BUILD_DIR:-build/release}
old=${BASELINE_LOAD:?set BASELINE_LOAD to the ringrpc-load to compare with}
read -r -a loadargs <<<"${LOADARGS:--c 64 -z 4s}"
rounds=${ROUNDS:-5}
work=$(mktemp -d)
server_pid=
cleanup() {
  if [[ -n $server_pid ]]; then kill "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

taskset -c "${SERVER_CPU:-0}" "$build/tools/ringrpc-server" --port 0 --log-level error >"$work/server.out" 2>&1 &
server_pid=$!
for _ in $(seq 100); do grep -q "listening on" "$work/server.out" && break; sleep 0.1; done
port=$(sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$work/server.out" | head -1)
[[ -n $port ]] || { echo "load_cpu_ab: ringrpc-server did not start" >&2; exit 1; }

for r in $(seq "$rounds"); do
  for which in new old; do
    bin=$build/tools/ringrpc-load
    [[ $which == old ]] && bin=$old
    /usr/bin/time -f "%U %S" -o "$work/$which.$r.time" taskset -c "${LOAD_CPU:-1}" "$bin" "${loadargs[@]}" \
      --warmup 0.5s --json "$work/$which.$r.json" "ringrpc://127.0.0.1:$port/echo" >/dev/null 2>&1 ||
      { echo "load_cpu_ab: $which ringrpc-load failed" >&2; exit 1; }
  done
done

python3 - "$work" "$rounds" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
def us_per_call(which, r):
    u, s = map(float, open(f"{work}/{which}.{r}.time").read().split()[-2:])
    return (u + s) / max(json.load(open(f"{work}/{which}.{r}.json"))["calls_ok"], 1) * 1e6
ratios = []
print(f"{'round':>5} {'new us/call':>12} {'old us/call':>12} {'new/old':>8}")
for r in range(1, rounds + 1):
    n, o = us_per_call("new", r), us_per_call("old", r)
    ratios.append(n / o)
    print(f"{r:>5} {n:>12.3f} {o:>12.3f} {n / o:>8.3f}")
print(f"ringrpc-load CPU per call, new/old: median {statistics.median(ratios):.3f} "
      f"(min {min(ratios):.3f}, max {max(ratios):.3f})")
PY
