# shellcheck shell=bash
# server_pin and load_pin come from the caller; cpu, wall, tmp and pids are read by it.
# shellcheck disable=SC2154,SC2034
# What bench/client_cpu.sh, client_cpu_h2.sh, client_cpu_tls.sh and reply_batch_latency.sh
# share: scripts/lib.sh and the repository root as the working directory, CPU pinning, a scratch
# directory whose servers are stopped by PID on exit, nginx with one worker (scripts/lib.sh's
# start_nginx), running one load process under /usr/bin/time, the per-round rows and their
# median/min/max ratios. Sourced after `set -euo pipefail`; the caller sets server_pin and
# load_pin (taskset arrays, maybe empty), or has cpu_bench_pins set them.

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
cd "$(ringrpc_root)" || exit
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)

# cpu_bench_pins SERVER_CPU LOAD_CPU: server_pin and load_pin, taskset to each CPU; both empty
# on a machine with one CPU.
cpu_bench_pins() {
  server_pin=(taskset -c "$1") load_pin=(taskset -c "$2")
  if (($(nproc) < 2)); then server_pin=() load_pin=(); fi
}

# cpu_bench_knobs: the environment bench/client_cpu.sh and client_cpu_tls.sh share: rounds
# (CPU_ROUNDS [3]), duration (CPU_DURATION [5] s per run), connections (CPU_CONNECTIONS [64]),
# build_dir (CPU_BUILD_DIR [build/release]) with its load_bin, and the pins (CPU_SERVER_CPU /
# CPU_LOAD_CPU [0 / 1]).
cpu_bench_knobs() {
  rounds=${CPU_ROUNDS:-3} duration=${CPU_DURATION:-5} connections=${CPU_CONNECTIONS:-64}
  build_dir=${CPU_BUILD_DIR:-build/release}
  load_bin=$build_dir/tools/ringrpc-load
  cpu_bench_pins "${CPU_SERVER_CPU:-0}" "${CPU_LOAD_CPU:-1}"
}

# cpu_bench_setup NAME: makes $tmp and the exit trap that stops every PID in pids.
cpu_bench_setup() {
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
  chmod 755 "$tmp"
  pids=()
  : >"$tmp/rows"
  trap cpu_bench_cleanup EXIT
}
cpu_bench_cleanup() {
  local p
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}

# cpu_bench_need WHO TOOL...: exits 2 naming the first tool missing; WHO says what to install.
cpu_bench_need() {
  local who=$1 tool
  shift
  for tool in "$@"; do
    if [[ ! -x "$tool" ]] && ! command -v "$tool" >/dev/null 2>&1; then
      echo "$who: $tool is missing" >&2
      exit 2
    fi
  done
}

# free_port, wait_port, start_server and start_nginx are scripts/lib.sh's (sourced first); what
# they start goes into the array pids.
track_pid() { pids+=("$1"); }

# start_ok_nginx BUDGET PORT LISTEN_OPTS HTTP_EXTRA: one pinned nginx worker answering 200 "ok"
# on 127.0.0.1:PORT (LISTEN_OPTS e.g. "http2"), stopped after BUDGET seconds at the latest.
start_ok_nginx() {
  local budget=$1 port=$2 listen_opts=$3 extra=$4
  nginx=$nginx_bin nginx_connections=4096
  nginx_wrap=(timeout -k 5 "$budget" "${server_pin[@]}")
  start_nginx "$tmp/nginx" "$port" <<CONF
  access_log off;
  keepalive_requests 1000000000;
  $extra
  server { listen 127.0.0.1:$port $listen_opts; location / { return 200 "ok"; } }
CONF
}

# measure LIMIT NAME CMD...: runs CMD pinned under /usr/bin/time for at most LIMIT seconds; sets
# cpu (user+sys seconds) and wall (seconds), and leaves its output in $tmp/NAME.out/.err.
measure() {
  local limit=$1 name=$2
  shift 2
  timeout -k 5 "$limit" /usr/bin/time -f '%U %S %e' -o "$tmp/$name.time" "${load_pin[@]}" "$@" \
    >"$tmp/$name.out" 2>"$tmp/$name.err" || true
  cpu=$(awk 'END { printf "%.3f", $1 + $2 }' "$tmp/$name.time")
  wall=$(awk 'END { print $3 }' "$tmp/$name.time")
}

json_field() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2" 2>/dev/null || echo 0; }

# row PAIR ROUND TOOL CALLS CPU [RATE]: prints one line and appends it to $tmp/rows.
row() {
  local us rate=${6:-0}
  us=$(awk -v c="$5" -v n="$4" 'BEGIN { if (n > 0) printf "%.3f", c * 1e6 / n; else print "-" }')
  printf '%-6s %5s  %-16s %12s calls %8s s cpu %9s us/call' "$1" "$2" "$3" "$4" "$5" "$us"
  if [[ $# -ge 6 ]]; then printf ' %10.0f calls/s' "$rate"; fi
  printf '\n'
  echo "$1 $3 $2 $us $rate" >>"$tmp/rows"
}

# cpu_bench_summary [rates]: per pair and other tool, ringrpc-load's CPU per call over the
# other's in each round, then median (min, max) against the 1/1.2 goal; "rates" adds the
# calls/s ratio against the within-5 % goal. Tools named "baseline" (an older ringrpc-load) and
# "floor" (bench/raw_http_client) have no goal.
cpu_bench_summary() {
  python3 - "$tmp/rows" "${1:-}" <<'PY'
import collections, statistics, sys
per = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    pair, tool, rnd, us, rate = line.split()
    if us != "-":
        per[(pair, rnd)][tool] = (float(us), float(rate))
cpu, rate = collections.defaultdict(list), collections.defaultdict(list)
for (pair, rnd), tools in sorted(per.items(), key=lambda kv: (kv[0][0], int(kv[0][1]))):
    if "ringrpc-load" not in tools:
        continue
    ours = tools["ringrpc-load"]
    for other, theirs in tools.items():
        if other == "ringrpc-load" or theirs[0] <= 0:
            continue
        cpu[(pair, other)].append(ours[0] / theirs[0])
        if theirs[1] > 0:
            rate[(pair, other)].append(ours[1] / theirs[1])
for (pair, other), rs in sorted(cpu.items()):
    med = statistics.median(rs)
    goal = "" if other in ("baseline", "floor") else ("goal met" if med <= 1 / 1.2 else "goal NOT met")
    print("  %-6s vs %-16s CPU/call rounds %s  median %.3f (min %.3f, max %.3f; %.2fx less) %s" % (
        pair, other, " ".join("%.3f" % r for r in rs), med, min(rs), max(rs), 1 / med, goal))
    if sys.argv[2] == "rates" and rate[(pair, other)]:
        r = rate[(pair, other)]
        m = statistics.median(r)
        print("  %-6s vs %-16s calls/s  median %.3f (min %.3f, max %.3f) %s" % (
            pair, other, m, min(r), max(r), "within 5%" if abs(m - 1) <= 0.05 else "NOT within 5%"))
PY
}
