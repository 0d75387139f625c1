#!/usr/bin/env bash
# Server CPU per proxied call (issue 29): bench/proxy_server on one core answers "echo" by
# forwarding it to a downstream ringrpc-server's echo, and is compared with the same program
# answering echo itself on its shard (`direct`, one call's I/O). Four proxies: a coroutine
# handler on its shard calling a downstream of the server (on the shard's own ring), the same
# handler calling through a client (its own I/O thread), the same coroutine on the default pool
# with the client, and a plain pool handler making a blocking client call. Beside them, gRPC's own: tests/grpc_echo_server answering
# Echo.Say itself (--callback-only) and as a callback-API proxy to a second one (--proxy-to),
# loaded over grpc:// with a 64-character text. ringrpc-load and the downstreams share the other
# core. Modes alternate within each round; each run's proxy CPU per call comes from
# --server-pid, and the proxy's threads' CPU from /proc/PID/task over the whole run (warm-up
# included).
#
#   bench/proxy.sh
#   PROXY_ROUNDS=5 PROXY_DURATION=4s PROXY_RATE=10k PROXY_CONNECTIONS=16 bench/proxy.sh
#
# Environment: PROXY_BUILD_DIR (or BUILD_DIR) [build/release, with -Dbenchmarks=true],
# PROXY_ROUNDS [5], PROXY_DURATION [4s], PROXY_RATE [10k calls/s, open loop],
# PROXY_CONNECTIONS [16], PROXY_SERVER_CPU / PROXY_LOAD_CPU [0 / 1], PROXY_MODES
# [direct downstream shard pool-coro pool-sync grpc-echo grpc-proxy; the gRPC ones when the build has
# tests/grpc_echo_server]. Only 127.0.0.1; every server is stopped by PID on exit.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${PROXY_BUILD_DIR:-${BUILD_DIR:-build/release}}
rounds=${PROXY_ROUNDS:-5}
duration=${PROXY_DURATION:-4s}
rate=${PROXY_RATE:-10k}
conns=${PROXY_CONNECTIONS:-16}
grpc_bin=$build/tests/grpc_echo_server
default_modes="direct downstream shard pool-coro pool-sync"
[[ -x $grpc_bin ]] && default_modes+=" grpc-echo grpc-proxy"
read -r -a modes <<<"${PROXY_MODES:-$default_modes}"
server_cpu=${PROXY_SERVER_CPU:-0}
load_cpu=${PROXY_LOAD_CPU:-1}
[[ -x $build/bench/proxy_server ]] ||
  { echo "proxy.sh: $build/bench/proxy_server is missing (configure with -Dbenchmarks=true)" >&2; exit 1; }
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do if [[ -n $p ]]; then kill "$p" 2>/dev/null || true; fi; done
  rm -rf "$work"
}
trap cleanup EXIT

# start_and_wait LOG CMD...: starts CMD in the background, waits for its "listening on" line;
# sets `started_pid` and `started_port`.
start_and_wait() {
  local log=$1
  shift
  "$@" >"$log" 2>&1 &
  started_pid=$!
  pids+=("$started_pid")
  for _ in $(seq 100); do grep -q "listening on" "$log" && break; sleep 0.1; done
  started_port=$(sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$log" | head -1)
  [[ -n $started_port ]] || { echo "proxy.sh: $* did not start:" >&2; cat "$log" >&2; exit 1; }
}

# Per-thread CPU ticks of PID, one "name ticks" line per thread.
thread_ticks() {
  local t
  for t in /proc/"$1"/task/*; do
    # comm may hold spaces and parentheses: the fields after its closing parenthesis.
    awk -v comm="$(cat "$t/comm" 2>/dev/null)" '{ sub(/^.*\) /, ""); print comm "\t" ($12 + $13) }' "$t/stat" 2>/dev/null || true
  done
}

start_and_wait "$work/downstream.out" taskset -c "$load_cpu" "$build/tools/ringrpc-server" --port 0 --log-level error
downstream_port=$started_port
grpc_downstream_port=
if [[ " ${modes[*]} " == *" grpc-proxy "* ]]; then
  start_and_wait "$work/grpc_downstream.out" taskset -c "$load_cpu" "$grpc_bin" --callback-only
  grpc_downstream_port=$started_port
fi
text=$(printf '%064d' 0)

for r in $(seq "$rounds"); do
  for mode in "${modes[@]}"; do
    case $mode in
      grpc-echo) start_and_wait "$work/$mode.$r.server" taskset -c "$server_cpu" "$grpc_bin" --callback-only ;;
      grpc-proxy) start_and_wait "$work/$mode.$r.server" taskset -c "$server_cpu" "$grpc_bin" --proxy-to "$grpc_downstream_port" ;;
      *) start_and_wait "$work/$mode.$r.server" taskset -c "$server_cpu" "$build/bench/proxy_server" --mode "$mode" \
           --downstream "$downstream_port" --handlers "$conns" ;;
    esac
    if [[ $mode == grpc-* ]]; then
      target=(--proto tests/load/echo.proto --data "{\"text\": \"$text\"}" "grpc://127.0.0.1:$started_port/ringtest.Echo/Say")
    else
      target=(-s 64 "ringrpc://127.0.0.1:$started_port/echo")
    fi
    proxy_pid=$started_pid
    thread_ticks "$proxy_pid" >"$work/$mode.$r.before"
    taskset -c "$load_cpu" timeout 120 "$build/tools/ringrpc-load" -c "$conns" -R "$rate" -d "$duration" \
      --warmup 0.5s --server-pid "$proxy_pid" --json "$work/$mode.$r.json" "${target[@]}" >"$work/$mode.$r.log" 2>&1 ||
      { echo "proxy.sh: ringrpc-load failed ($mode):" >&2; cat "$work/$mode.$r.log" >&2; exit 1; }
    thread_ticks "$proxy_pid" >"$work/$mode.$r.after"
    kill "$proxy_pid"
    wait "$proxy_pid" 2>/dev/null || true
    pids=("${pids[@]/$proxy_pid/}")  # reaped: never signalled again
  done
done

python3 - "$work" "$rounds" "${modes[@]}" <<'PY'
import collections, json, statistics, sys
work, rounds, modes = sys.argv[1], int(sys.argv[2]), sys.argv[3:]

def ticks(path):
    out = collections.Counter()
    for line in open(path):
        name, t = line.rstrip("\n").split("\t")
        # Pool workers and client threads are numbered: group them by kind.
        out[name.rstrip("0123456789/")] += int(t)
    return out

cost = {m: [] for m in modes}
rate = {m: [] for m in modes}
threads = {m: collections.Counter() for m in modes}
calls = {m: 0 for m in modes}
for r in range(1, rounds + 1):
    for m in modes:
        j = json.load(open(f"{work}/{m}.{r}.json"))
        if "cpu_us_per_call" not in j.get("server_cost", {}):
            sys.exit(f"proxy.sh: round {r} of {m} has no server CPU per call: {j.get('server_cost')}")
        cost[m].append(j["server_cost"]["cpu_us_per_call"])
        rate[m].append(j["calls_ok"] / j["measured_s"])
        calls[m] += j["calls_ok"]
        threads[m] += ticks(f"{work}/{m}.{r}.after")
        threads[m] -= ticks(f"{work}/{m}.{r}.before")
def ratio(m, against):
    if m not in cost or against not in cost:
        return ""
    r = [c / b for c, b in zip(cost[m], cost[against])]
    return f"{statistics.median(r):.2f}x [{min(r):.2f}-{max(r):.2f}]"

print("server CPU per call, and ratios per round: median [min-max]")
print(f"{'mode':>10}  {'calls/s':>9}  {'us/call':>8}  {'/ direct':>18}  {'/ shard':>18}  {'/ grpc-echo':>18}")
for m in modes:
    print(f"{m:>10}  {statistics.median(rate[m]):>9.0f}  {statistics.median(cost[m]):>8.2f}  "
          f"{ratio(m, 'direct'):>18}  {ratio(m, 'shard'):>18}  {ratio(m, 'grpc-echo'):>18}")
print("\nproxy threads' share of the proxy's CPU over the runs (warm-up included):")
for m in modes:
    total = sum(threads[m].values()) or 1
    parts = ", ".join(f"{name} {100 * t / total:.0f}%" for name, t in threads[m].most_common() if t > 0)
    print(f"{m:>10}: {parts}")
PY
