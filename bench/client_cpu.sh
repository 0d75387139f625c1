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
# same rounds against nginx, so a change's effect is a ratio from one run, not two.
#
# Environment: CPU_ROUNDS [3], CPU_DURATION seconds per wrk run [5], CPU_CONNECTIONS [64],
# CPU_REDIS_DEPTH [16], CPU_REDIS_CALLS [2000000], CPU_BUILD_DIR [build/release],
# CPU_SERVER_CPU / CPU_LOAD_CPU [0 / 1], CPU_PAIRS ["nginx redis"], CPU_BASELINE_LOAD [none].
# Only 127.0.0.1; servers are stopped by PID on exit.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
cd "$(ringrpc_root)"

rounds=${CPU_ROUNDS:-3}
duration=${CPU_DURATION:-5}
connections=${CPU_CONNECTIONS:-64}
redis_depth=${CPU_REDIS_DEPTH:-16}
redis_calls=${CPU_REDIS_CALLS:-2000000}
build_dir=${CPU_BUILD_DIR:-build/release}
pairs=" ${CPU_PAIRS:-nginx redis} "
baseline_load=${CPU_BASELINE_LOAD:-}
server_pin=(taskset -c "${CPU_SERVER_CPU:-0}")
load_pin=(taskset -c "${CPU_LOAD_CPU:-1}")
load_bin=$build_dir/tools/ringrpc-load
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)

for tool in "$load_bin" "$nginx_bin" redis-server redis-benchmark wrk /usr/bin/time taskset python3; do
  if [[ ! -x "$tool" ]] && ! command -v "$tool" >/dev/null 2>&1; then
    echo "client_cpu: $tool is missing (Debian: nginx-light redis-server redis-tools wrk time; build ringrpc-load)" >&2
    exit 2
  fi
done
if (($(nproc) < 2)); then server_pin=() load_pin=(); fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/client-cpu.XXXXXX")
chmod 755 "$tmp"
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_port() {
  python3 -c 'import socket, sys, time
for _ in range(50):
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), 0.2).close(); sys.exit(0)
    except OSError:
        time.sleep(0.1)
sys.exit(1)' "$1"
}

budget=$((rounds * (2 * duration + 120) + 60))
nginx_port=$(free_port)
mkdir -p "$tmp/nginx"
cat >"$tmp/nginx/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $tmp/nginx/nginx.pid;
error_log $tmp/nginx/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000000;
  client_body_temp_path $tmp/nginx/body;
  server { listen 127.0.0.1:$nginx_port; location / { return 200 "ok"; } }
}
EOF
timeout -k 5 "$budget" "${server_pin[@]}" "$nginx_bin" -p "$tmp/nginx" -e "$tmp/nginx/error.log" \
  -c "$tmp/nginx/nginx.conf" >"$tmp/nginx/stdout" 2>&1 &
pids+=($!)
redis_port=$(free_port)
timeout -k 5 "$budget" "${server_pin[@]}" redis-server --port "$redis_port" --bind 127.0.0.1 --save '' \
  --appendonly no --dir "$tmp" --logfile "$tmp/redis.log" >/dev/null 2>&1 &
pids+=($!)
wait_port "$nginx_port" || { echo "client_cpu: nginx did not start" >&2; cat "$tmp/nginx/error.log" >&2; exit 1; }
wait_port "$redis_port" || { echo "client_cpu: redis-server did not start" >&2; exit 1; }
echo "nginx on 127.0.0.1:$nginx_port, redis on 127.0.0.1:$redis_port; servers ${server_pin[*]:-unpinned}, load ${load_pin[*]:-unpinned}"

# measure NAME CMD...: runs CMD under /usr/bin/time; sets cpu (user+sys seconds) and leaves
# its output in $tmp/NAME.out.
measure() {
  local name=$1
  shift
  timeout -k 5 $((duration + 120)) /usr/bin/time -f '%U %S' -o "$tmp/$name.time" "${load_pin[@]}" "$@" \
    >"$tmp/$name.out" 2>"$tmp/$name.err" || true
  cpu=$(awk 'END { printf "%.3f", $1 + $2 }' "$tmp/$name.time")
}

json_calls() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["calls_ok"])' "$1" 2>/dev/null || echo 0; }

# row PAIR ROUND TOOL CALLS CPU: prints one line and appends "PAIR TOOL ROUND us_per_call" to rows.
row() {
  local us
  us=$(awk -v c="$5" -v n="$4" 'BEGIN { if (n > 0) printf "%.3f", c * 1e6 / n; else print "-" }')
  printf '%-6s %5s  %-16s %12s calls %8s s cpu %9s us/call\n' "$1" "$2" "$3" "$4" "$5" "$us"
  echo "$1 $3 $2 $us" >>"$tmp/rows"
}

for ((round = 1; round <= rounds; round++)); do
  order=(theirs ours)
  if ((round % 2 == 0)); then order=(ours theirs); fi
  nginx_order=("${order[@]}")
  if [[ -n $baseline_load ]]; then
    nginx_order=(theirs base ours)
    if ((round % 2 == 0)); then nginx_order=(ours base theirs); fi
  fi
  [[ $pairs == *" nginx "* ]] || nginx_order=()
  for who in "${nginx_order[@]}"; do
    if [[ $who == base ]]; then
      measure rl-base "$baseline_load" -t 1 -c "$connections" -d "${duration}s" --warmup 0 --json "$tmp/rl-base.json" \
        "http://127.0.0.1:$nginx_port/"
      row nginx "$round" baseline "$(json_calls "$tmp/rl-base.json")" "$cpu"
    elif [[ $who == theirs ]]; then
      measure wrk wrk -t1 "-c$connections" "-d${duration}s" "http://127.0.0.1:$nginx_port/"
      calls=$(awk '/requests in/ { print $1 }' "$tmp/wrk.out")
      row nginx "$round" wrk "${calls:-0}" "$cpu"
    else
      measure rl-http "$load_bin" -t 1 -c "$connections" -d "${duration}s" --warmup 0 --json "$tmp/rl-http.json" \
        "http://127.0.0.1:$nginx_port/"
      row nginx "$round" ringrpc-load "$(json_calls "$tmp/rl-http.json")" "$cpu"
    fi
  done
  redis_order=("${order[@]}")
  [[ $pairs == *" redis "* ]] || redis_order=()
  for who in "${redis_order[@]}"; do
    if [[ $who == theirs ]]; then
      measure rb redis-benchmark -h 127.0.0.1 -p "$redis_port" -c "$connections" -P "$redis_depth" \
        -n "$redis_calls" -t ping_mbulk -q
      calls=$redis_calls
      if ! grep -q 'requests per second' "$tmp/rb.out"; then calls=0; fi
      row redis "$round" redis-benchmark "$calls" "$cpu"
    else
      measure rl-redis "$load_bin" -t 1 -c "$connections" -P "$redis_depth" -n "$redis_calls" --warmup 0 \
        --json "$tmp/rl-redis.json" "redis://127.0.0.1:$redis_port"
      row redis "$round" ringrpc-load "$(json_calls "$tmp/rl-redis.json")" "$cpu"
    fi
  done
done

echo
echo "ringrpc-load CPU per call / the other tool's, per round (goal <= 0.83):"
python3 - "$tmp/rows" <<'PY'
import collections, statistics, sys
per = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    pair, tool, rnd, us = line.split()
    if us != "-":
        per[(pair, rnd)][tool] = float(us)
ratios = collections.defaultdict(list)
for (pair, rnd), tools in sorted(per.items()):
    for other in (t for t in tools if t != "ringrpc-load"):
        if "ringrpc-load" in tools and tools[other] > 0:
            ratios[(pair, other)].append(tools["ringrpc-load"] / tools[other])
for (pair, other), rs in sorted(ratios.items()):
    med = statistics.median(rs)
    goal = "" if other == "baseline" else ("goal met" if med <= 1 / 1.2 else "goal NOT met")
    print("  %-6s vs %-16s rounds %s  median %.3f (min %.3f, max %.3f; %.2fx less CPU per call) %s" % (
        pair, other, " ".join("%.3f" % r for r in rs), med, min(rs), max(rs), 1 / med, goal))
PY
