#!/usr/bin/env bash
# Echo throughput and latency of ringrpc-server run several ways, with the same driver, as
# ratios to the first variant. Rounds alternate the variants (A B C A B C ...) so drift on a
# shared machine spreads over all of them; each ratio is taken within a round, and the table
# shows the median ratio over rounds (with its spread) and each variant's median round.
#
#   bench/server_variants.sh                       # dispatch policies: direct, all, execution
#   VARIANTS="on:--metrics=true off:--metrics=false --log-level=off" bench/server_variants.sh
#
# Environment (all optional):
#   VARIANTS     space-separated LABEL:FLAGS (FLAGS comma-separated, '=' between flag and value)
#                [direct:--dispatch=direct all:--dispatch=all execution:--dispatch=execution]
#   DURATION     measured seconds per run [5]      CONNECTIONS  [64]      DEPTH  [16]
#   ROUNDS       rounds [3]                        BUILD_DIR    [build/release]
#   SERVER_CPU / LOAD_CPU   CPUs for the server / ringrpc-load [0 / 1]
#
# Only 127.0.0.1 is used; every process runs under `timeout` and is stopped by PID.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
cd "$(ringrpc_root)"

read -r -a variants <<<"${VARIANTS:-direct:--dispatch=direct all:--dispatch=all execution:--dispatch=execution}"
duration=${DURATION:-5}
connections=${CONNECTIONS:-64}
depth=${DEPTH:-16}
rounds=${ROUNDS:-3}
build_dir=${BUILD_DIR:-build/release}
server_cpu=${SERVER_CPU:-0}
load_cpu=${LOAD_CPU:-1}
server_bin=$build_dir/tools/ringrpc-server
load_bin=$build_dir/tools/ringrpc-load
[[ -x $server_bin && -x $load_bin ]] || build_release tools/ringrpc-server tools/ringrpc-load

work=$(mktemp -d)
server_pid=
cleanup() {
  [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# run_variant LABEL FLAGS ROUND: one server, one measured load run; appends "label calls p50 p99".
run_variant() {
  local label=$1 round=$3
  local -a flags=()
  IFS=',' read -r -a flags <<<"$2"
  start_server "$work/server" timeout $((duration + 30)) taskset -c "$server_cpu" "$server_bin" --port 0 "${flags[@]}" ||
    { echo "server did not start" >&2; exit 1; }
  local port=$listen_port
  timeout $((duration + 20)) taskset -c "$load_cpu" "$load_bin" -c "$connections" -P "$depth" \
    --duration "${duration}s" --json "$work/$label.$round.json" "ringrpc://127.0.0.1:$port/echo" >/dev/null 2>&1
  kill -TERM "$server_pid"
  wait "$server_pid" 2>/dev/null || true
  server_pid=
  python3 - "$work/$label.$round.json" "$label" >>"$work/results" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
lat = j["latency_us"]
print(sys.argv[2], j["calls_per_sec"], lat["p50"], lat["p99"])
PY
}

for ((r = 1; r <= rounds; r++)); do
  for v in "${variants[@]}"; do
    run_variant "${v%%:*}" "${v#*:}" "$r"
  done
done

python3 - "$work/results" "${variants[@]%%:*}" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
labels = sys.argv[2:]
by = {lab: [(float(r[1]), float(r[2]), float(r[3])) for r in rows if r[0] == lab] for lab in labels}
n = min(len(v) for v in by.values())
# Ratios are taken within each round (neighbouring runs share the machine's mood), then the
# median over rounds; the throughput column is each variant's median round.
print(f"{'variant':<12}{'calls/s':>12}{'ratio':>8}{'min':>7}{'max':>7}{'p50 us':>9}{'p99 us':>9}{'p99 ratio':>11}")
for lab in labels:
    runs = by[lab]
    med = sorted(runs)[len(runs) // 2]
    ratios = [runs[i][0] / by[labels[0]][i][0] for i in range(n)]
    p99r = [runs[i][2] / by[labels[0]][i][2] for i in range(n)]
    print(f"{lab:<12}{med[0]:>12,.0f}{statistics.median(ratios):>8.3f}{min(ratios):>7.2f}{max(ratios):>7.2f}"
          f"{med[1]:>9.0f}{med[2]:>9.0f}{statistics.median(p99r):>11.2f}")
print(f"({n} rounds; ratio = median over rounds of calls/s relative to {labels[0]} in the same round)")
PY
