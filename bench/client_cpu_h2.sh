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
# shellcheck source=bench/client_cpu_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/client_cpu_lib.sh"

rounds=${H2_ROUNDS:-5}
grpc_calls=${H2_CALLS:-100000}
nginx_calls=${H2_NGINX_CALLS:-400000}
connections=${H2_CONNECTIONS:-8}
depth=${H2_DEPTH:-16}
grpc_threads=${H2_GRPC_THREADS:-2}
build_dir=${H2_BUILD_DIR:-build/release}
cpu_bench_pins "${H2_SERVER_CPU:-0}" "${H2_LOAD_CPU:-1}"
load_bin=$build_dir/tools/ringrpc-load
grpc_bin=$build_dir/tests/grpc_echo_server

cpu_bench_need "client_cpu_h2 (Debian: nghttp2-client nginx-light time; build $build_dir with tests)" \
  "$load_bin" "$grpc_bin" "$nginx_bin" h2load /usr/bin/time taskset python3
cpu_bench_setup client-cpu-h2

budget=$((rounds * 600 + 60))
start_server "$tmp/grpc" "${server_pin[@]}" "$grpc_bin" "$grpc_threads" ||
  { echo "client_cpu_h2: the gRPC server did not start" >&2; exit 1; }
grpc_port=$listen_port

nginx_port=$(free_port)
start_ok_nginx "$budget" "$nginx_port" http2 "http2_max_concurrent_streams 256;"
echo "gRPC server on 127.0.0.1:$grpc_port ($grpc_threads threads), nginx h2c on 127.0.0.1:$nginx_port;" \
  "servers ${server_pin[*]:-unpinned}, load ${load_pin[*]:-unpinned}; -c $connections, depth $depth"

# {"text":"hello"} as protobuf, with gRPC's 5-byte prefix, for h2load's -d.
printf '\000\000\000\000\007\n\005hello' >"$tmp/msg.bin"
grpc_url="127.0.0.1:$grpc_port/ringtest.Echo/Say"

# h2load's own count of succeeded requests and its req/s; a gRPC error would still be a 200, so
# the server's count of failures is checked apart (it has none: every request is the same).
h2load_calls() { awk '/^requests:/ { for (i = 1; i <= NF; ++i) if ($(i + 1) ~ /^succeeded/) print $i }' "$1"; }
h2load_rate() { awk '/^finished in/ { gsub(",", "", $4); print $4 }' "$1"; }

for ((round = 1; round <= rounds; round++)); do
  order=(theirs ours)
  if ((round % 2 == 0)); then order=(ours theirs); fi
  for who in "${order[@]}"; do
    if [[ $who == theirs ]]; then
      measure 600 h2l-grpc h2load -t 1 -c "$connections" -m "$depth" -n "$grpc_calls" -d "$tmp/msg.bin" \
        -H 'content-type: application/grpc' -H 'te: trailers' "http://$grpc_url"
      row grpc "$round" h2load "$(h2load_calls "$tmp/h2l-grpc.out")" "$cpu" "$(h2load_rate "$tmp/h2l-grpc.out")"
    else
      measure 600 rl-grpc "$load_bin" -t 1 -c "$connections" -P "$depth" -n "$grpc_calls" --warmup 0 \
        --proto tests/load/echo.proto --data '{"text":"hello"}' --json "$tmp/rl-grpc.json" "grpc://$grpc_url"
      row grpc "$round" ringrpc-load "$(json_field "$tmp/rl-grpc.json" calls_ok)" "$cpu" \
        "$(json_field "$tmp/rl-grpc.json" calls_per_sec)"
    fi
  done
  for who in "${order[@]}"; do
    if [[ $who == theirs ]]; then
      measure 600 h2l-h2c h2load -t 1 -c "$connections" -m "$depth" -n "$nginx_calls" "http://127.0.0.1:$nginx_port/"
      row nginx "$round" h2load "$(h2load_calls "$tmp/h2l-h2c.out")" "$cpu" "$(h2load_rate "$tmp/h2l-h2c.out")"
    else
      measure 600 rl-h2c "$load_bin" -t 1 -c "$connections" -P "$depth" -n "$nginx_calls" --warmup 0 \
        --json "$tmp/rl-h2c.json" "h2c://127.0.0.1:$nginx_port/"
      row nginx "$round" ringrpc-load "$(json_field "$tmp/rl-h2c.json" calls_ok)" "$cpu" \
        "$(json_field "$tmp/rl-h2c.json" calls_per_sec)"
    fi
  done
done

echo
echo "ringrpc-load / h2load per round: CPU per call (goal <= 0.83) and calls/s (goal within 0.95..1.05):"
cpu_bench_summary rates
