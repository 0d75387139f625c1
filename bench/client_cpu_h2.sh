#!/usr/bin/env bash
# Client CPU per call over HTTP/2: ringrpc-load beside h2load (Debian nghttp2-client) against the
# same servers:
#
#   gRPC echo server (libgrpc++, tests/load/grpc_echo_server.cpp)   Echo.Say {"text":"hello"}
#        h2load -n N -c C -m M -d msg.bin -H content-type/te  vs  ringrpc-load -n N -c C -P M grpc://...
#   nginx (1 worker, listen http2, return 200)
#        h2load -n N -c C -m M                                vs  ringrpc-load -n N -c C -P M h2c://...
#
# Each load process runs under /usr/bin/time; its user+sys seconds divided by the calls it
# completed is its CPU per call, and calls / its wall time is the rate the server sustained.
# Rounds alternate which tool goes first, so a drift of the machine is shared; the table shows
# every round, then the median ratio with min and max. Goals (issue 16): ringrpc-load at most
# 1/1.2 = 0.83 of h2load's CPU per call, and the server-side rate within 5 %.
#
#   flock /tmp/ringrpc-bench.lock bench/client_cpu_h2.sh
#   H2_ROUNDS=5 H2_CALLS=400000 flock /tmp/ringrpc-bench.lock bench/client_cpu_h2.sh
#
# Needs build/release with tests (for tests/grpc_echo_server). Environment: H2_ROUNDS [5],
# H2_CALLS per gRPC run [100000], H2_NGINX_CALLS [400000], H2_CONNECTIONS [8], H2_DEPTH [16],
# H2_GRPC_THREADS [2], H2_BUILD_DIR [build/release], H2_SERVER_CPU / H2_LOAD_CPU [0 / 1].
# Only 127.0.0.1; servers are stopped by PID on exit.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
cd "$(ringrpc_root)"

rounds=${H2_ROUNDS:-5}
grpc_calls=${H2_CALLS:-100000}
nginx_calls=${H2_NGINX_CALLS:-400000}
connections=${H2_CONNECTIONS:-8}
depth=${H2_DEPTH:-16}
grpc_threads=${H2_GRPC_THREADS:-2}
build_dir=${H2_BUILD_DIR:-build/release}
server_pin=(taskset -c "${H2_SERVER_CPU:-0}")
load_pin=(taskset -c "${H2_LOAD_CPU:-1}")
load_bin=$build_dir/tools/ringrpc-load
grpc_bin=$build_dir/tests/grpc_echo_server
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)

for tool in "$load_bin" "$grpc_bin" "$nginx_bin" h2load /usr/bin/time taskset python3; do
  if [[ ! -x "$tool" ]] && ! command -v "$tool" >/dev/null 2>&1; then
    echo "client_cpu_h2: $tool is missing (Debian: nghttp2-client nginx-light time; build $build_dir with tests)" >&2
    exit 2
  fi
done
if (($(nproc) < 2)); then server_pin=() load_pin=(); fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/client-cpu-h2.XXXXXX")
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

budget=$((rounds * 600 + 60))
"${server_pin[@]}" "$grpc_bin" "$grpc_threads" >"$tmp/grpc.out" 2>"$tmp/grpc.err" &
pids+=($!)
grpc_port=
for _ in $(seq 100); do
  grpc_port=$(sed -n 's/^listening on 127.0.0.1:\([0-9][0-9]*\)$/\1/p' "$tmp/grpc.out")
  [[ -n $grpc_port ]] && break
  sleep 0.1
done
[[ -n $grpc_port ]] || { echo "client_cpu_h2: the gRPC server did not start" >&2; cat "$tmp/grpc.err" >&2; exit 1; }

nginx_port=$(free_port)
mkdir -p "$tmp/nginx"
cat >"$tmp/nginx/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $tmp/nginx/nginx.pid;
error_log $tmp/nginx/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000000;
  http2_max_concurrent_streams 256;
  server { listen 127.0.0.1:$nginx_port http2; location / { return 200 "ok"; } }
}
CONF
timeout -k 5 "$budget" "${server_pin[@]}" "$nginx_bin" -p "$tmp/nginx" -e "$tmp/nginx/error.log" \
  -c "$tmp/nginx/nginx.conf" >"$tmp/nginx/stdout" 2>&1 &
pids+=($!)
wait_port "$nginx_port" || { echo "client_cpu_h2: nginx did not start" >&2; cat "$tmp/nginx/error.log" >&2; exit 1; }
echo "gRPC server on 127.0.0.1:$grpc_port ($grpc_threads threads), nginx h2c on 127.0.0.1:$nginx_port;" \
  "servers ${server_pin[*]:-unpinned}, load ${load_pin[*]:-unpinned}; -c $connections, depth $depth"

# {"text":"hello"} as protobuf, with gRPC's 5-byte prefix, for h2load's -d.
printf '\000\000\000\000\007\n\005hello' >"$tmp/msg.bin"
grpc_url="127.0.0.1:$grpc_port/ringtest.Echo/Say"

# measure NAME CMD...: runs CMD under /usr/bin/time; sets cpu (user+sys s) and wall (s).
measure() {
  local name=$1
  shift
  timeout -k 5 600 /usr/bin/time -f '%U %S %e' -o "$tmp/$name.time" "${load_pin[@]}" "$@" \
    >"$tmp/$name.out" 2>"$tmp/$name.err" || true
  cpu=$(awk 'END { printf "%.3f", $1 + $2 }' "$tmp/$name.time")
}
json_field() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2" 2>/dev/null || echo 0; }
# h2load's own count of succeeded requests and its req/s; a gRPC error would still be a 200, so
# the server's count of failures is checked apart (it has none: every request is the same).
h2load_calls() { awk '/^requests:/ { for (i = 1; i <= NF; ++i) if ($(i + 1) ~ /^succeeded/) print $i }' "$1"; }
h2load_rate() { awk '/^finished in/ { gsub(",", "", $4); print $4 }' "$1"; }

# row PAIR ROUND TOOL CALLS CPU RATE
row() {
  local us
  us=$(awk -v c="$5" -v n="$4" 'BEGIN { if (n > 0) printf "%.3f", c * 1e6 / n; else print "-" }')
  printf '%-6s %5s  %-12s %10s calls %8s s cpu %9s us/call %10.0f calls/s\n' "$1" "$2" "$3" "$4" "$5" "$us" "$6"
  echo "$1 $3 $2 $us $6" >>"$tmp/rows"
}

for ((round = 1; round <= rounds; round++)); do
  order=(theirs ours)
  if ((round % 2 == 0)); then order=(ours theirs); fi
  for who in "${order[@]}"; do
    if [[ $who == theirs ]]; then
      measure h2l-grpc h2load -t 1 -c "$connections" -m "$depth" -n "$grpc_calls" -d "$tmp/msg.bin" \
        -H 'content-type: application/grpc' -H 'te: trailers' "http://$grpc_url"
      row grpc "$round" h2load "$(h2load_calls "$tmp/h2l-grpc.out")" "$cpu" "$(h2load_rate "$tmp/h2l-grpc.out")"
    else
      measure rl-grpc "$load_bin" -t 1 -c "$connections" -P "$depth" -n "$grpc_calls" --warmup 0 \
        --proto tests/load/echo.proto --data '{"text":"hello"}' --json "$tmp/rl-grpc.json" "grpc://$grpc_url"
      row grpc "$round" ringrpc-load "$(json_field "$tmp/rl-grpc.json" calls_ok)" "$cpu" \
        "$(json_field "$tmp/rl-grpc.json" calls_per_sec)"
    fi
  done
  for who in "${order[@]}"; do
    if [[ $who == theirs ]]; then
      measure h2l-h2c h2load -t 1 -c "$connections" -m "$depth" -n "$nginx_calls" "http://127.0.0.1:$nginx_port/"
      row nginx "$round" h2load "$(h2load_calls "$tmp/h2l-h2c.out")" "$cpu" "$(h2load_rate "$tmp/h2l-h2c.out")"
    else
      measure rl-h2c "$load_bin" -t 1 -c "$connections" -P "$depth" -n "$nginx_calls" --warmup 0 \
        --json "$tmp/rl-h2c.json" "h2c://127.0.0.1:$nginx_port/"
      row nginx "$round" ringrpc-load "$(json_field "$tmp/rl-h2c.json" calls_ok)" "$cpu" \
        "$(json_field "$tmp/rl-h2c.json" calls_per_sec)"
    fi
  done
done

echo
echo "ringrpc-load / h2load per round: CPU per call (goal <= 0.83) and calls/s (goal within 0.95..1.05):"
python3 - "$tmp/rows" <<'PY'
import collections, statistics, sys
per = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    pair, tool, rnd, us, rate = line.split()
    if us != "-":
        per[(pair, rnd)][tool] = (float(us), float(rate))
cpu, rate = collections.defaultdict(list), collections.defaultdict(list)
for (pair, rnd), tools in sorted(per.items()):
    if "ringrpc-load" in tools and "h2load" in tools and tools["h2load"][0] > 0 and tools["h2load"][1] > 0:
        cpu[pair].append(tools["ringrpc-load"][0] / tools["h2load"][0])
        rate[pair].append(tools["ringrpc-load"][1] / tools["h2load"][1])
for pair in sorted(cpu):
    c, r = statistics.median(cpu[pair]), statistics.median(rate[pair])
    print("  %-6s CPU/call median %.3f (min %.3f, max %.3f; %.2fx less) %s" % (
        pair, c, min(cpu[pair]), max(cpu[pair]), 1 / c, "goal met" if c <= 1 / 1.2 else "goal NOT met"))
    print("  %-6s calls/s  median %.3f (min %.3f, max %.3f) %s" % (
        pair, r, min(rate[pair]), max(rate[pair]), "within 5%" if abs(r - 1) <= 0.05 else "NOT within 5%"))
PY
