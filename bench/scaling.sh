#!/usr/bin/env bash
# Does ringrpc-server's throughput grow with cores? Server on one half of N CPUs, ringrpc-load
# (one thread per CPU) on the other half; the server's shard count (readers, and as many pool
# threads) steps 1, 2, ... half, and at step s the server is pinned to the first s CPUs of its
# half, so "per server core" is calls/s over the cores it was given. The raw io_uring echo loop
# (bench/raw_echo_loop.cpp, one thread, first server CPU) is measured in each round as the
# one-core reference.
#
#   bench/scaling.sh            # N = CPUs in this process's affinity mask (1+1 on a 2-CPU box)
#   bench/scaling.sh 16         # the first 16 of them: server on 8, load on 8
#   QUICK=1 bench/scaling.sh
#
# Environment (all optional):
#   DURATION [5]   WARMUP [1]   ROUNDS [1]   DEPTH [16]   SIZE [64]
#   CONNECTIONS    [64 per load thread]
#   DISPATCH       [direct] the built-in echo's policy (all = through the default pool)
#   PIN            [shards] pin the server to s CPUs at step s; "half" = always its whole half
#   BUILD_DIR      [build/bench]   OUT_JSON  also write the table as JSON here
#   KEEP_WORK=1    keep the directory of raw ringrpc-load JSONs and CPU samples
#   QUICK=1        DURATION=1 WARMUP=0.3 unless set
#
# Only 127.0.0.1 is used; every process runs under `timeout` and is stopped by its PID.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
cd "$(ringrpc_root)"

if [[ ${QUICK:-0} == 1 ]]; then
  : "${DURATION:=1}" "${WARMUP:=0.3}"
fi
duration=${DURATION:-5}
warmup=${WARMUP:-1}
rounds=${ROUNDS:-1}
depth=${DEPTH:-16}
size=${SIZE:-64}
dispatch=${DISPATCH:-direct}
pin=${PIN:-shards}
build_dir=${BUILD_DIR:-build/bench}
out_json=${OUT_JSON:-}

raw_bin=$(raw_loop_bin "$build_dir")
server_bin=$build_dir/tools/ringrpc-server
load_bin=$build_dir/tools/ringrpc-load
bench_need_built scaling.sh "$build_dir" "$raw_bin" "$server_bin" "$load_bin"

# The CPUs we may use, in order; N of them, split in two halves.
read -r -a allowed < <(python3 -c "import os; print(*sorted(os.sched_getaffinity(0)))")
n=${1:-${#allowed[@]}}
if ((n < 2 || n > ${#allowed[@]})); then
  echo "scaling.sh: need 2 <= N <= ${#allowed[@]} (CPUs in the affinity mask), got $n" >&2
  exit 2
fi
half=$((n / 2))
server_cpus=("${allowed[@]:0:half}")
load_cpus=("${allowed[@]:half:n-half}")
load_threads=${#load_cpus[@]}
connections=${CONNECTIONS:-$((64 * load_threads))}
join() { local IFS=,; echo "$*"; }
load_list=$(join "${load_cpus[@]}")

clk_tck=$(getconf CLK_TCK)
bench_work_dir scaling

server_lifetime=$(python3 -c "import math; print(math.ceil($duration + 2 * $warmup + 60))")
load_limit=$(python3 -c "import math; print(math.ceil($duration + $warmup + 20))")

# start_pinned CPU-LIST CMD...: sets pinned_pid (the server, not `timeout`) and port.
start_pinned() {
  local cpus=$1
  shift
  if ! start_pinned_server "$work/server" "$server_lifetime" "$cpus" "$@"; then
    echo "scaling.sh: server did not start" >&2
    exit 1
  fi
  port=$listen_port
}

# run_step LABEL SHARDS CPUS URL ROUND: a warm-up run, then the measured run (no warm-up of its
# own) bracketed by reads of the server's CPU time; appends a line to results.
run_step() {
  local label=$1 shards=$2 cpus=$3 url=$4 round=$5
  local json=$work/$label.$round.json
  local -a load=(timeout "$load_limit" taskset -c "$load_list" "$load_bin" -t "$load_threads"
    -c "$connections" -P "$depth" -s "$size" --warmup 0s)
  if awk "BEGIN { exit !($warmup > 0) }"; then
    "${load[@]}" --duration "${warmup}s" "$url" >/dev/null 2>"$work/load.err" || load_failed "$label"
  fi
  local t0 c0 t1 c1 l0 l1
  c0=$(cpu_ticks "$pinned_pid")
  children_cpu_s
  l0=$children_s
  t0=$EPOCHREALTIME
  "${load[@]}" --duration "${duration}s" --json "$json" "$url" >/dev/null 2>"$work/load.err" || load_failed "$label"
  t1=$EPOCHREALTIME
  c1=$(cpu_ticks "$pinned_pid")
  children_cpu_s
  l1=$children_s
  echo "$round $label $shards $cpus $json $t0 $c0 $t1 $c1 $l0 $l1" >>"$work/results"
}
load_failed() {
  echo "scaling.sh: ringrpc-load failed ($1): $(tail -3 "$work/load.err")" >&2
  exit 1
}

echo "server CPUs: $(join "${server_cpus[@]}") (pin: $pin)  load CPUs: $load_list ($load_threads thread(s), $connections connections, depth $depth)" >&2
for ((r = 1; r <= rounds; r++)); do
  echo "round $r/$rounds: raw loop" >&2
  start_pinned "${server_cpus[0]}" "$raw_bin" --port 0
  run_step raw 1 "${server_cpus[0]}" "echo://127.0.0.1:$port" "$r"
  stop_pinned_server
  for ((s = 1; s <= half; s++)); do
    cpus=$(join "${server_cpus[@]:0:s}")
    [[ $pin == half ]] && cpus=$(join "${server_cpus[@]}")
    echo "round $r/$rounds: $s shard(s) on CPU $cpus" >&2
    start_pinned "$cpus" "$server_bin" --port 0 --readers "$s" --handlers "$s" --log-level error \
      --dispatch="$dispatch"
    run_step "shards$s" "$s" "$cpus" "ringrpc://127.0.0.1:$port/echo" "$r"
    stop_pinned_server
  done
done

SC_RESULTS=$work/results SC_CLK_TCK=$clk_tck SC_OUT_JSON=$out_json SC_N=$n SC_DISPATCH=$dispatch \
SC_PIN=$pin SC_DEPTH=$depth SC_CONNECTIONS=$connections SC_LOAD_THREADS=$load_threads python3 - <<'PY'
import json, os, statistics, time
e = os.environ
clk = int(e["SC_CLK_TCK"])
rows = {}
for line in open(e["SC_RESULTS"]):
    r, label, shards, cpus, path, t0, c0, t1, c1, l0, l1 = line.split()
    j = json.load(open(path))
    busy = (int(c1) - int(c0)) / clk / j["measured_s"]
    load_busy = (float(l1) - float(l0)) / (float(t1) - float(t0))  # start-up included
    rows.setdefault(label, []).append({"shards": int(shards), "cpus": cpus, "calls_per_sec": j["calls_per_sec"],
                                       "busy_cores": busy, "load_busy_cores": load_busy,
                                       "errors": sum(j["errors"].values())})

def med(label, key):
    return statistics.median(x[key] for x in rows[label])

raw = med("raw", "calls_per_sec")
labels = sorted((k for k in rows if k != "raw"), key=lambda k: int(k[6:]))
one = med(labels[0], "calls_per_sec")
print()
print(f"{'server':<14}{'CPUs':>8}{'calls/s':>13}{'per core':>12}{'busy cores':>12}{'vs 1 shard':>12}{'per core vs raw':>17}{'load busy':>11}")
print(f"{'raw loop':<14}{rows['raw'][0]['cpus']:>8}{raw:>13,.0f}{raw:>12,.0f}{med('raw', 'busy_cores'):>12.2f}{'':>12}{1.0:>17.2f}"
      f"{med('raw', 'load_busy_cores'):>11.2f}")
table = []
for k in labels:
    s = rows[k][0]["shards"]
    cps = med(k, "calls_per_sec")
    ncpu = len(rows[k][0]["cpus"].split(","))
    per_core = cps / ncpu
    table.append({"shards": s, "cpus": rows[k][0]["cpus"], "calls_per_sec": cps, "per_core": per_core,
                  "busy_cores": med(k, "busy_cores"), "load_busy_cores": med(k, "load_busy_cores"),
                  "vs_one_shard": cps / one, "per_core_vs_raw": per_core / raw})
    t = table[-1]
    print(f"{str(s) + ' shard(s)':<14}{ncpu:>8}{cps:>13,.0f}{per_core:>12,.0f}{t['busy_cores']:>12.2f}"
          f"{t['vs_one_shard']:>12.2f}{t['per_core_vs_raw']:>17.2f}{t['load_busy_cores']:>11.2f}")
errors = sum(x["errors"] for v in rows.values() for x in v)
if errors:
    print(f"warning: {errors} calls failed")
print(f"(dispatch {e['SC_DISPATCH']}, {e['SC_LOAD_THREADS']} load thread(s), {e['SC_CONNECTIONS']} connections x depth "
      f"{e['SC_DEPTH']}; median over {len(rows['raw'])} round(s); busy cores = server utime+stime / measured time;"
      f" load busy = ringrpc-load's CPU time / its run's wall time)")
busy_load = e["SC_LOAD_THREADS"]
if table and table[-1]["busy_cores"] < 0.9 * len(table[-1]["cpus"].split(",")):
    load_cores = int(e["SC_LOAD_THREADS"])
    why = ("ringrpc-load used its cores" if table[-1]["load_busy_cores"] >= 0.9 * load_cores else
           "nor did ringrpc-load use its own: other processes on these CPUs limited the run")
    print(f"note: the server did not use all its CPUs at the last step; {why}")
if e["SC_OUT_JSON"]:
    doc = {"benchmark": "scaling", "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "cores": int(e["SC_N"]), "dispatch": e["SC_DISPATCH"], "pin": e["SC_PIN"],
           "load_threads": int(busy_load), "connections": int(e["SC_CONNECTIONS"]), "depth": int(e["SC_DEPTH"]),
           "raw_calls_per_sec": raw, "steps": table}
    with open(e["SC_OUT_JSON"], "w") as f:
        json.dump(doc, f, indent=2)
    print(f"wrote {e['SC_OUT_JSON']}")
PY
