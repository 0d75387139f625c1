#!/usr/bin/env bash
# Fair share, two scenarios (SCENARIOS="polite slow" by default; either alone works).
#
# polite: eight polite callers beside one greedy one, against a one-handler server.
#   polite  8 connections, open loop at RATE calls/s in total, `sleep` calls of 500 us
#   greedy  1 connection, 256 calls in flight, the same calls, as fast as it is answered
# Each round measures the polite callers' latency alone, then beside the greedy caller, with
# fair share on (the default, fair_share_calls = 2) and off (fair_share_calls = 1000000, which
# is the old single FIFO). Rounds alternate; the table gives the median over rounds of each
# ratio to the same round's "alone" p99, with min and max, and the greedy caller's calls/s.
#
# slow: fair share by cost. 32 fast callers (echo, closed loop, FAST_DEPTH calls in flight
# each, default 1) alone, then beside one slow caller keeping 300 `sleep` calls of 100 ms in
# flight, against a server with SLOW_HANDLERS handlers (default 2) and the default fair share.
# The table gives the fast callers' calls/s and p99 alone and beside (median over rounds, and
# the ratios), and the slow caller's calls/s beside them. Goal: beside, the fast callers keep
# >= 50 % of their calls/s and a p99 within 5x of alone; the slow caller still gets calls done.
#
# Server pinned to CPU 0, the load processes to CPU 1 (when there are two), the greedy/slow one
# at nice 19 so that its ring does not delay the others' own threads. Loopback only, bounded in
# time.
#
#   ROUNDS=3 SECONDS_EACH=8 RATE=400 FAST_DEPTH=1 SLOW_HANDLERS=2 bench/fairness.sh [build/release]
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"

cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${1:-build/release}
server=$build/tools/ringrpc-server
load=$build/tools/ringrpc-load
rounds=${ROUNDS:-3}
secs=${SECONDS_EACH:-8}
rate=${RATE:-400}
scenarios=${SCENARIOS:-polite slow}
fast_depth=${FAST_DEPTH:-1}
slow_handlers=${SLOW_HANDLERS:-2}
for b in "$server" "$load"; do
  [[ -x $b ]] || { echo "fairness.sh: $b is missing; build first (ninja -C $build)" >&2; exit 2; }
done
work=$(mktemp -d "${TMPDIR:-/tmp}/fairness.XXXXXX")
server_pid=
greedy_pid=
cleanup() {
  for p in $greedy_pid $server_pid; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

cpu_server=() cpu_load=()
if (($(nproc) >= 2)); then cpu_server=(taskset -c 0) cpu_load=(taskset -c 1); fi
printf '500' >"$work/us500"
printf '100000' >"$work/us100000"

start_fair() {  # start_fair FAIR_SHARE_CALLS [HANDLERS]: sets server_pid and port
  start_server "$work/server" "${cpu_server[@]}" "$server" --port 0 --readers 1 --handlers "${2:-1}" \
    --log-level error --set "server.fair_share_calls=$1" || { echo "fairness.sh: the server did not start" >&2; exit 1; }
  port=$listen_port
}
stop_server() { kill "$server_pid"; wait "$server_pid" || true; server_pid=; }

polite() {  # polite OUT.json
  "${cpu_load[@]}" "$load" -c 8 -R "$rate" --duration "${secs}s" --warmup 1s --timeout 10s \
    --payload-file "$work/us500" --json "$1" "ringrpc://127.0.0.1:$port/sleep" >/dev/null
}
greedy_start() {  # greedy_start OUT.json
  # Niced: both load processes share one CPU, and the polite callers' own latency must not be
  # the greedy client's time slices.
  "${cpu_load[@]}" nice -n 19 "$load" -c 1 -P 256 -d "$((secs + 3))s" --warmup 0s --timeout 30s \
    --payload-file "$work/us500" --json "$1" "ringrpc://127.0.0.1:$port/sleep" >/dev/null &
  greedy_pid=$!
  sleep 1
}
greedy_wait() { wait "$greedy_pid" || true; greedy_pid=; }

fast() {  # fast OUT.json
  "${cpu_load[@]}" "$load" -c 32 -P "$fast_depth" --duration "${secs}s" --warmup 1s --timeout 10s \
    --json "$1" "ringrpc://127.0.0.1:$port/echo" >/dev/null 2>"$work/fast.err"
}
slow_start() {  # slow_start OUT.json
  "${cpu_load[@]}" nice -n 19 "$load" -c 1 -P 300 -d "$((secs + 3))s" --warmup 0s \
    --payload-file "$work/us100000" --json "$1" "ringrpc://127.0.0.1:$port/sleep" >/dev/null 2>&1 &
  greedy_pid=$!
  sleep 1
}

# report_py WORK ROUNDS ARG...: runs the Python report on stdin after what both reports read:
# work, rounds, load(NAME) (WORK/NAME.json), p(J, "p99") (a latency percentile), errors(J).
report_py() {
  {
    cat <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
def load(name):
    with open(f"{work}/{name}.json") as f:
        return json.load(f)
def p(j, key):
    lat = j["latency_us"]
    return lat.get(key) or lat.get("p" + key.lstrip("p"))
def errors(j):
    e = j["errors"]
    return sum(e.values()) if isinstance(e, dict) else e
PY
    cat
  } | python3 - "$@"
}

run_slow() {
  for r in $(seq "$rounds"); do
    start_fair 2 "$slow_handlers"
    fast "$work/fast-alone-$r.json"
    slow_start "$work/slow-$r.json"
    fast "$work/fast-beside-$r.json"
    greedy_wait
    stop_server
  done
  report_py "$work" "$rounds" "$fast_depth" "$slow_handlers" <<'PY'
depth, handlers = sys.argv[3], sys.argv[4]
rows = {k: [] for k in ("a_cps", "b_cps", "a99", "b99", "cps_x", "p99_x", "slow_cps")}
errs = 0
for r in range(1, rounds + 1):
    a, b, s = load(f"fast-alone-{r}"), load(f"fast-beside-{r}"), load(f"slow-{r}")
    rows["a_cps"].append(a["calls_per_sec"]); rows["b_cps"].append(b["calls_per_sec"])
    rows["a99"].append(p(a, "p99")); rows["b99"].append(p(b, "p99"))
    rows["cps_x"].append(b["calls_per_sec"] / a["calls_per_sec"])
    rows["p99_x"].append(p(b, "p99") / p(a, "p99"))
    rows["slow_cps"].append(s["calls_per_sec"])
    errs += errors(b)
med = statistics.median
print(f"slow: 32 fast echo connections at depth {depth} alone, then beside 1 connection keeping "
      f"300 sleep(100 ms) calls in flight; {handlers} handlers; median of {rounds} rounds")
print(f"{'fast alone c/s':>15}{'beside c/s':>12}{'kept':>7}{'alone p99':>10}{'beside p99':>11}"
      f"{'p99 x':>7}{'slow c/s':>9}{'errors':>7}")
print(f"{med(rows['a_cps']):>15.0f}{med(rows['b_cps']):>12.0f}{med(rows['cps_x']) * 100:>6.0f}%"
      f"{med(rows['a99']):>10.0f}{med(rows['b99']):>11.0f}{med(rows['p99_x']):>7.2f}"
      f"{med(rows['slow_cps']):>9.1f}{errs:>7}")
print(f"per round: kept {' '.join(f'{x * 100:.0f}%' for x in rows['cps_x'])}; "
      f"p99 x {' '.join(f'{x:.2f}' for x in rows['p99_x'])}")
PY
}

run_polite() {
  for r in $(seq "$rounds"); do
    for mode in on off; do
      share=2
      [[ $mode == off ]] && share=1000000
      start_fair "$share"
      polite "$work/alone-$mode-$r.json"
      greedy_start "$work/greedy-$mode-$r.json"
      polite "$work/beside-$mode-$r.json"
      greedy_wait
      stop_server
    done
  done
  report_py "$work" "$rounds" "$rate" <<'EOF'
rate = sys.argv[3]
print(f"polite: 8 connections, {rate} calls/s of 500 us sleep; greedy: 1 connection at depth 256")
print(f"{'fair share':<11}{'alone p99':>10}{'beside p99':>12}{'p99 x':>9}{'min':>9}{'max':>9}"
      f"{'alone p50':>10}{'beside p50':>11}{'greedy c/s':>11}{'errors':>7}")
for mode in ("on", "off"):
    ratios, a99, b99, a50, b50, g, errs = [], [], [], [], [], [], 0
    for r in range(1, rounds + 1):
        alone, beside, greedy = load(f"alone-{mode}-{r}"), load(f"beside-{mode}-{r}"), load(f"greedy-{mode}-{r}")
        a99.append(p(alone, "p99")); b99.append(p(beside, "p99"))
        a50.append(p(alone, "p50")); b50.append(p(beside, "p50"))
        ratios.append(b99[-1] / a99[-1])
        g.append(greedy["calls_per_sec"])
        errs += errors(beside)
    med = statistics.median
    print(f"{mode:<11}{med(a99):>10.0f}{med(b99):>12.0f}{med(ratios):>9.2f}{min(ratios):>9.2f}"
          f"{max(ratios):>9.2f}{med(a50):>10.0f}{med(b50):>11.0f}{med(g):>11.0f}{errs:>7}")
EOF
}

for scenario in $scenarios; do
  case $scenario in
    polite) run_polite ;;
    slow) run_slow ;;
    *) echo "fairness.sh: unknown scenario '$scenario' (polite, slow)" >&2; exit 2 ;;
  esac
done
