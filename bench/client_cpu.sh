#!/usr/bin/env bash
# Client CPU per request: how much user+sys CPU a load generator spends per completed call,
# against the same server, ringrpc-load beside the tool people use there:
#
#   nginx (1 worker, return 200)   wrk -t1 -c C -d Ns             vs  ringrpc-load -t 1 -c C -d Ns
#   redis (PING)                   redis-benchmark -c C -P D -n N vs  ringrpc-load -c C -P D -n N
#
# Each load process runs under /usr/bin/time; its user+sys seconds divided by the calls it
# completed is its CPU per call. Rounds alternate which tool goes first, so a drift of the
# machine is shared; the table shows every round and the median ratio. The goal (issue 16):
# ringrpc-load at most 1/1.2 = 0.83 of the other tool's CPU per call.
#
#   bench/client_cpu.sh
#   CPU_ROUNDS=5 CPU_DURATION=10 bench/client_cpu.sh
#   CPU_PAIRS=nginx CPU_BASELINE_LOAD=/tmp/ringrpc-load.before bench/client_cpu.sh
#
# CPU_BASELINE_LOAD names a second ringrpc-load binary (say, before a change) measured in the
# same rounds against nginx, so a change's effect is a ratio from one run, not two. CPU_FLOOR=1
# adds bench/raw_http_client (build with -Dbenchmarks=true): a bare io_uring client waking per 4
# replies as ringrpc-load does, the least CPU per request any client pays on this host.
#
# Environment: CPU_ROUNDS [3], CPU_DURATION seconds per wrk run [5], CPU_CONNECTIONS [64],
# CPU_REDIS_DEPTH [16], CPU_REDIS_CALLS [2000000], CPU_BUILD_DIR [build/release],
# CPU_SERVER_CPU / CPU_LOAD_CPU [0 / 1], CPU_PAIRS ["nginx redis"], CPU_BASELINE_LOAD [none],
# CPU_FLOOR [unset].
# Only 127.0.0.1; servers are stopped by PID on exit.
set -euo pipefail
# shellcheck source=bench/client_cpu_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/client_cpu_lib.sh"

cpu_bench_knobs
redis_depth=${CPU_REDIS_DEPTH:-16}
redis_calls=${CPU_REDIS_CALLS:-2000000}
pairs=" ${CPU_PAIRS:-nginx redis} "
baseline_load=${CPU_BASELINE_LOAD:-}
floor_client=
if [[ -n ${CPU_FLOOR:-} ]]; then
  floor_client=$build_dir/bench/raw_http_client
  [[ -x $floor_client ]] || { echo "client_cpu: CPU_FLOOR needs $floor_client (-Dbenchmarks=true)" >&2; exit 2; }
fi

cpu_bench_need "client_cpu (Debian: nginx-light redis-server redis-tools wrk time; build ringrpc-load)" \
  "$load_bin" "$nginx_bin" redis-server redis-benchmark wrk /usr/bin/time taskset python3
cpu_bench_setup client-cpu

budget=$((rounds * (2 * duration + 120) + 60))
nginx_port=$(free_port)
start_ok_nginx "$budget" "$nginx_port" "" ""
redis_port=$(free_port)
timeout -k 5 "$budget" "${server_pin[@]}" redis-server --port "$redis_port" --bind 127.0.0.1 --save '' \
  --appendonly no --dir "$tmp" --logfile "$tmp/redis.log" >/dev/null 2>&1 &
pids+=($!)
wait_port 127.0.0.1 "$redis_port" || { echo "client_cpu: redis-server did not start" >&2; exit 1; }
echo "nginx on 127.0.0.1:$nginx_port, redis on 127.0.0.1:$redis_port; servers ${server_pin[*]:-unpinned}, load ${load_pin[*]:-unpinned}"

limit=$((duration + 120))
json_calls() { json_field "$1" calls_ok; }

for ((round = 1; round <= rounds; round++)); do
  order=(theirs ours)
  if ((round % 2 == 0)); then order=(ours theirs); fi
  nginx_order=(theirs)
  [[ -z $baseline_load ]] || nginx_order+=(base)
  [[ -z $floor_client ]] || nginx_order+=(floor)
  nginx_order+=(ours)
  if ((round % 2 == 0)); then
    reversed=()
    for ((i = ${#nginx_order[@]} - 1; i >= 0; i--)); do reversed+=("${nginx_order[i]}"); done
    nginx_order=("${reversed[@]}")
  fi
  [[ $pairs == *" nginx "* ]] || nginx_order=()
  for who in "${nginx_order[@]}"; do
    if [[ $who == base ]]; then
      measure "$limit" rl-base "$baseline_load" -t 1 -c "$connections" -d "${duration}s" --warmup 0 --json "$tmp/rl-base.json" \
        "http://127.0.0.1:$nginx_port/"
      row nginx "$round" baseline "$(json_calls "$tmp/rl-base.json")" "$cpu"
    elif [[ $who == floor ]]; then
      measure "$limit" floor "$floor_client" 127.0.0.1 "$nginx_port" --connections "$connections" \
        --seconds "$duration" --wait-nr 4
      row nginx "$round" floor "$(awk '/^requests/ { print $2 }' "$tmp/floor.out")" "$cpu"
    elif [[ $who == theirs ]]; then
      measure "$limit" wrk wrk -t1 "-c$connections" "-d${duration}s" "http://127.0.0.1:$nginx_port/"
      calls=$(awk '/requests in/ { print $1 }' "$tmp/wrk.out")
      row nginx "$round" wrk "${calls:-0}" "$cpu"
    else
      measure "$limit" rl-http "$load_bin" -t 1 -c "$connections" -d "${duration}s" --warmup 0 --json "$tmp/rl-http.json" \
        "http://127.0.0.1:$nginx_port/"
      row nginx "$round" ringrpc-load "$(json_calls "$tmp/rl-http.json")" "$cpu"
    fi
  done
  redis_order=("${order[@]}")
  [[ $pairs == *" redis "* ]] || redis_order=()
  for who in "${redis_order[@]}"; do
    if [[ $who == theirs ]]; then
      measure "$limit" rb redis-benchmark -h 127.0.0.1 -p "$redis_port" -c "$connections" -P "$redis_depth" \
        -n "$redis_calls" -t ping_mbulk -q
      calls=$redis_calls
      if ! grep -q 'requests per second' "$tmp/rb.out"; then calls=0; fi
      row redis "$round" redis-benchmark "$calls" "$cpu"
    else
      measure "$limit" rl-redis "$load_bin" -t 1 -c "$connections" -P "$redis_depth" -n "$redis_calls" --warmup 0 \
        --json "$tmp/rl-redis.json" "redis://127.0.0.1:$redis_port"
      row redis "$round" ringrpc-load "$(json_calls "$tmp/rl-redis.json")" "$cpu"
    fi
  done
done

echo
echo "ringrpc-load CPU per call / the other tool's, per round (goal <= 0.83):"
cpu_bench_summary cpu
