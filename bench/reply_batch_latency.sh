#!/usr/bin/env bash
# Latency independent of batching: ringrpc-load's median against a server that holds every
# answer the same fixed time, with --reply-batch 1 (the loop wakes for every reply) and
# --reply-batch 8 (it waits for 8), in alternating rounds. With the kernel's receive stamps
# (--latency-clock kernel, the default) the two medians agree within 5 %; the same rounds with
# --latency-clock user (the loop's clock after each wake-up) show what batching does without.
#
#   bench/reply_batch_latency.sh
#   LAT_ROUNDS=5 LAT_DELAY_US=5000 bench/reply_batch_latency.sh
#   LAT_WRK=1 bench/reply_batch_latency.sh      # also: wrk --latency vs ringrpc-load on nginx
#
# The server is ringrpc-server's built-in `sleep` method (the payload is the microseconds to
# hold the answer) with as many handler threads as calls in flight, so every call is held
# LAT_DELAY_US and none waits for a thread. --reply-batch-window 1s makes the batch 8 at any
# rate (by default a batch is only the replies of 32 us, so a slow server would never batch).
#
# Environment: LAT_ROUNDS [3], LAT_DURATION seconds [3], LAT_CONNECTIONS [64],
# LAT_DELAY_US [2000], LAT_BUILD_DIR [build/release], LAT_WRK [unset],
# LAT_WRK_CONNECTIONS [64]. Only 127.0.0.1; servers are stopped by PID on exit.
set -euo pipefail
# shellcheck source=bench/client_cpu_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/client_cpu_lib.sh"

rounds=${LAT_ROUNDS:-3}
duration=${LAT_DURATION:-3}
connections=${LAT_CONNECTIONS:-64}
delay_us=${LAT_DELAY_US:-2000}
build_dir=${LAT_BUILD_DIR:-build/release}
load_bin=$build_dir/tools/ringrpc-load
server_bin=$build_dir/tools/ringrpc-server
server_pin=() load_pin=()

cpu_bench_need "reply_batch_latency (build ringrpc-load and ringrpc-server)" "$load_bin" "$server_bin" python3
cpu_bench_setup reply-batch-latency
budget=$((rounds * 4 * (duration + 30) + 120))

start_server "$tmp/server" timeout -k 5 "$budget" "$server_bin" --port 0 --readers 1 --handlers "$connections" ||
  { echo "reply_batch_latency: ringrpc-server did not start" >&2; exit 1; }
port=$listen_port
printf '%s' "$delay_us" >"$tmp/delay"
echo "ringrpc-server on 127.0.0.1:$port, every answer held ${delay_us} us (sleep); -c $connections, ${duration} s rounds"

p50() { python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); print(j["latency_us"]["p50"], j["calls_per_sec"], j["latency_clock"])' "$1"; }

: >"$tmp/p50"
for ((round = 1; round <= rounds; round++)); do
  batches=(1 8)
  if ((round % 2 == 0)); then batches=(8 1); fi
  for clock in kernel user; do
    for batch in "${batches[@]}"; do
      timeout -k 5 $((duration + 30)) "$load_bin" -t 1 -c "$connections" -d "${duration}s" --warmup 1s \
        --reply-batch "$batch" --reply-batch-window 1s --latency-clock "$clock" --json "$tmp/run.json" \
        --payload-file "$tmp/delay" "ringrpc://127.0.0.1:$port/sleep" >"$tmp/run.out" 2>&1 || { cat "$tmp/run.out" >&2; exit 1; }
      read -r us rate got <<<"$(p50 "$tmp/run.json")"
      printf 'round %d  clock %-6s (%s)  --reply-batch %d  p50 %10.1f us  %8.0f calls/s\n' \
        "$round" "$clock" "$got" "$batch" "$us" "$rate"
      echo "$clock $round $batch $us" >>"$tmp/p50"
    done
  done
done

echo
python3 - "$tmp/p50" <<'PY'
import collections, statistics, sys
by = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    clock, rnd, batch, us = line.split()
    by[(clock, rnd)][batch] = float(us)
for clock in ("kernel", "user"):
    ratios = [v["8"] / v["1"] for (c, _), v in sorted(by.items()) if c == clock and "1" in v and "8" in v]
    if not ratios:
        continue
    med = statistics.median(ratios)
    print("  %-6s clock: p50 with --reply-batch 8 / with 1, per round %s  median %.3f %s" % (
        clock, " ".join("%.3f" % r for r in ratios), med, "within 5%" if abs(med - 1) <= 0.05 else "NOT within 5%"))
PY

[[ -n ${LAT_WRK:-} ]] || exit 0
# The same nginx measured by wrk --latency and by ringrpc-load (defaults: --reply-batch 4,
# kernel clock), alternating, one worker, no pinning.
cpu_bench_need "reply_batch_latency LAT_WRK (Debian: nginx-light wrk)" wrk
wrk_connections=${LAT_WRK_CONNECTIONS:-64}
nginx_port=$(free_port)
start_ok_nginx "$budget" "$nginx_port" "" ""
echo
echo "nginx on 127.0.0.1:$nginx_port; -c $wrk_connections, ${duration} s each"
wrk_us() {  # wrk's "50%  388.00us" line, in us
  awk '$1 == "50%" { v = $2; u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v);
       print (u == "ms" ? v * 1000 : u == "s" ? v * 1e6 : v) }' "$1"
}
for ((round = 1; round <= rounds; round++)); do
  order=(wrk ours)
  if ((round % 2 == 0)); then order=(ours wrk); fi
  for who in "${order[@]}"; do
    if [[ $who == wrk ]]; then
      timeout -k 5 $((duration + 30)) wrk --latency -t1 "-c$wrk_connections" "-d${duration}s" \
        "http://127.0.0.1:$nginx_port/" >"$tmp/wrk.out" 2>&1 || true
      rate=$(awk '/^Requests\/sec/ { print $2 }' "$tmp/wrk.out")
      printf 'round %d  wrk --latency                p50 %10.1f us  %8.0f calls/s\n' "$round" "$(wrk_us "$tmp/wrk.out")" "${rate:-0}"
    else
      for clock in kernel user; do
        timeout -k 5 $((duration + 30)) "$load_bin" -t 1 -c "$wrk_connections" -d "${duration}s" --warmup 0 \
          --latency-clock "$clock" --json "$tmp/rl.json" "http://127.0.0.1:$nginx_port/" >"$tmp/rl.out" 2>&1 || true
        read -r us rate got <<<"$(p50 "$tmp/rl.json")"
        printf 'round %d  ringrpc-load (%-6s clock)   p50 %10.1f us  %8.0f calls/s\n' "$round" "$got" "$us" "$rate"
      done
    fi
  done
done
