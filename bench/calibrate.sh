#!/usr/bin/env bash
# Calibrates ringrpc-load against the load generators people use today, on the same servers:
#
#   nginx  (HTTP, 1 worker)      wrk -t1 -c C                  vs  ringrpc-load http://...
#   redis  (PING)                redis-benchmark -c C -P D     vs  ringrpc-load redis://...
#   ringrpc-server (echo)        (no incumbent)                    ringrpc-load ringrpc://.../echo
#
# Every server is pinned to CPU 0 and every load generator to CPU 1, so a tool that needs more
# CPU per call shows up as fewer calls/s. Same connections and pipelining depth for each pair;
# wrk has no pipelining of its own, so for depth > 1 it gets a small Lua script that sends D
# requests per write (wrk then times each batch of D, not each request).
#
#   bench/calibrate.sh
#   CAL_DURATION=10 CAL_CONNECTIONS=128 CAL_DEPTHS="1 8 32" bench/calibrate.sh
#
# Environment (all optional):
#   CAL_DURATION     measured seconds per run                          [5]
#   CAL_WARMUP       ringrpc-load warm-up seconds (wrk and redis-benchmark have none; redis gets
#                    a short probe run first, which also warms it)      [1]
#   CAL_CONNECTIONS  connections of every run                          [64]
#   CAL_DEPTHS       pipelining depths                                 ["1 16"]
#   CAL_ROUNDS       rounds of every pair; the table shows each tool's median round   [1]
#   CAL_BUILD_DIR    where ringrpc-load/ringrpc-server are             [build/release; built if absent]
#   CAL_SERVER_CPU / CAL_LOAD_CPU   CPUs for servers / load generators [0 / 1]
#   CAL_KEEP         directory to copy every raw output into (wrk/redis-benchmark text, JSON)
#
# Only 127.0.0.1 is used. Every command runs under `timeout`; the servers are stopped by PID on
# exit (and each server also has its own `timeout`, so nothing outlives a killed script).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
cd "$(ringrpc_root)"

duration=${CAL_DURATION:-5}
warmup=${CAL_WARMUP:-1}
connections=${CAL_CONNECTIONS:-64}
read -r -a depths <<<"${CAL_DEPTHS:-1 16}"
rounds=${CAL_ROUNDS:-1}
build_dir=${CAL_BUILD_DIR:-build/release}
server_cpu=${CAL_SERVER_CPU:-0}
load_cpu=${CAL_LOAD_CPU:-1}

for v in duration warmup connections rounds; do
  [[ "${!v}" =~ ^[0-9]+$ ]] || { echo "calibrate: CAL_${v^^} must be a whole number, got '${!v}'" >&2; exit 2; }
done
((duration >= 1 && connections >= 1 && rounds >= 1)) || { echo "calibrate: duration, connections and rounds must be >= 1" >&2; exit 2; }
for d in "${depths[@]}"; do
  [[ "$d" =~ ^[1-9][0-9]*$ ]] || { echo "calibrate: bad depth '$d' in CAL_DEPTHS" >&2; exit 2; }
done

# ---------------------------------------------------------------------------------------------
# Dependencies and binaries

log_header "dependencies"
cal_packages=(nginx-light redis-server redis-tools wrk)
missing=()
for pkg in "${cal_packages[@]}"; do
  if [[ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)" != "install ok installed" ]]; then
    missing+=("$pkg")
  fi
done
if ((${#missing[@]} > 0)); then
  echo "installing: ${missing[*]}"
  sudo=()
  if ((EUID != 0)); then
    command -v sudo >/dev/null || { echo "calibrate: not root and no sudo; install ${missing[*]}" >&2; exit 1; }
    sudo=(sudo)
  fi
  timeout 600 "${sudo[@]}" apt-get update
  timeout 900 "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends "${missing[@]}"
else
  echo "nginx-light, redis-server, redis-tools and wrk are installed"
fi
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
for tool in "$nginx_bin" redis-server redis-benchmark wrk taskset timeout; do
  command -v "$tool" >/dev/null || { echo "calibrate: '$tool' not found" >&2; exit 1; }
done

load_bin=$build_dir/tools/ringrpc-load
server_bin=$build_dir/tools/ringrpc-server
if [[ ! -x "$load_bin" || ! -x "$server_bin" ]]; then
  if [[ "$build_dir" == build/release ]]; then
    log_header "build (release)"
    # shellcheck disable=SC2119
    build_release
  else
    echo "calibrate: $load_bin or $server_bin missing (CAL_BUILD_DIR=$build_dir)" >&2
    exit 1
  fi
fi

cpus=$(nproc)
if ((cpus < 2)); then
  echo "calibrate: only $cpus CPU: server and load generator share it; ratios still compare tools" >&2
  server_cpu=0 load_cpu=0
fi
server_pin=(taskset -c "$server_cpu")
load_pin=(taskset -c "$load_cpu")

# ---------------------------------------------------------------------------------------------
# Temp dir, servers, cleanup

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ringrpc-cal.XXXXXX")
chmod 755 "$tmp"  # nginx's worker may run as another user
pids=()
cleanup() {
  local pid
  for pid in "${pids[@]}"; do
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid" 2>/dev/null || true
    fi
  done
  for pid in "${pids[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Upper bound on the whole run, for the servers' own timeouts.
per_run=$((duration + warmup + 20))
budget=$((rounds * ${#depths[@]} * 5 * per_run + 120))

# free_port, wait_port, start_nginx and start_server are scripts/lib.sh's; what they start is
# added to the array pids.
track_pid() { pids+=("$1"); }

start_nginx_peer() {
  nginx_port=$(free_port)
  nginx=$nginx_bin nginx_connections=4096
  nginx_wrap=(timeout -k 5 "$budget" "${server_pin[@]}")
  # nginx closes a keep-alive connection after 1000 requests by default; both tools would then
  # spend part of the run reconnecting. Calibration is about the tools, so keep connections open.
  start_nginx "$tmp/nginx" "$nginx_port" <<EOF
  access_log off;
  keepalive_requests 1000000000;
  proxy_temp_path $tmp/nginx/proxy;
  fastcgi_temp_path $tmp/nginx/fastcgi;
  uwsgi_temp_path $tmp/nginx/uwsgi;
  scgi_temp_path $tmp/nginx/scgi;
  server {
    listen 127.0.0.1:$nginx_port;
    location / { return 200 "ok"; }
  }
EOF
  echo "nginx pid ${pids[-1]} on 127.0.0.1:$nginx_port (${server_pin[*]})"
}

start_redis() {
  local dir=$tmp/redis pid
  mkdir -p "$dir"
  redis_port=$(free_port)
  timeout -k 5 "$budget" "${server_pin[@]}" redis-server --port "$redis_port" --bind 127.0.0.1 \
    --save '' --appendonly no --dir "$dir" --logfile "$dir/redis.log" >"$dir/stdout" 2>&1 &
  pid=$!
  track_pid "$pid"
  if wait_port 127.0.0.1 "$redis_port"; then
    echo "redis-server pid $pid on 127.0.0.1:$redis_port (${server_pin[*]})"
    return 0
  fi
  cat "$dir/stdout" "$dir/redis.log" >&2 2>/dev/null || true
  echo "calibrate: redis-server did not start" >&2
  return 1
}

start_ringrpc() {
  if ! start_server "$tmp/ringrpc-server" timeout -k 5 "$budget" "${server_pin[@]}" "$server_bin" \
    --host 127.0.0.1 --port 0; then
    echo "calibrate: ringrpc-server did not start" >&2
    return 1
  fi
  ringrpc_addr=$listen_address
  echo "ringrpc-server pid $server_pid on $ringrpc_addr (${server_pin[*]})"
}

# ---------------------------------------------------------------------------------------------
# Running and parsing each tool. Each run_* sets: rate p50 p99 (µs; "-" when not measured) note.

# µs from "378.00us" / "0.89ms" / "1.02s" (wrk's units).
to_us() {
  awk -v v="$1" 'BEGIN {
    n = v + 0
    if (v ~ /us$/) printf "%.1f", n
    else if (v ~ /ms$/) printf "%.1f", n * 1000
    else if (v ~ /m$/) printf "%.1f", n * 60e6
    else if (v ~ /s$/) printf "%.1f", n * 1e6
    else printf "-"
  }'
}

keep() {  # keep FILE NAME: copy a raw output to $CAL_KEEP
  [[ -n "${CAL_KEEP:-}" ]] || return 0
  mkdir -p "$CAL_KEEP"
  cp "$1" "$CAL_KEEP/$2"
}

# wrk has no pipelining; this script writes `depth` requests at once (the usual pipeline.lua).
cat >"$tmp/pipeline.lua" <<'EOF'
init = function(args)
  local depth = tonumber(args[1]) or 1
  local r = {}
  for i = 1, depth do r[i] = wrk.format() end
  req = table.concat(r)
end
request = function() return req end
EOF

run_wrk() {  # run_wrk DEPTH
  local depth=$1 out=$tmp/wrk-d$1.txt
  local args=(-t1 "-c$connections" "-d${duration}s" --latency)
  if ((depth > 1)); then args+=(-s "$tmp/pipeline.lua"); fi
  args+=("http://127.0.0.1:$nginx_port/")
  if ((depth > 1)); then args+=(-- "$depth"); fi
  timeout -k 5 $((duration + 30)) "${load_pin[@]}" wrk "${args[@]}" >"$out" 2>&1 || true
  keep "$out" "wrk-d$depth.txt"
  rate=$(awk '/^Requests\/sec:/ {printf "%.0f", $2}' "$out")
  p50=$(to_us "$(awk '$1 == "50%" {print $2}' "$out")")
  p99=$(to_us "$(awk '$1 == "99%" {print $2}' "$out")")
  note=""
  if ((depth > 1)); then note="wrk times each batch of $depth"; fi
  if grep -q 'Socket errors' "$out"; then note="${note:+$note; }wrk: $(grep 'Socket errors' "$out" | sed 's/^ *//')"; fi
  if grep -q 'Non-2xx' "$out"; then note="${note:+$note; }wrk: $(grep 'Non-2xx' "$out" | sed 's/^ *//')"; fi
  if [[ -z "$rate" ]]; then rate="-"; note="wrk failed: $(head -c 200 "$out" | tr '\n' ' ')"; fi
  # wrk prints "0.00us" for a percentile it has too few samples for (seen with pipelining).
  if [[ "$p99" == 0.0 ]]; then p99="-"; note="${note:+$note; }wrk printed 0 for p99"; fi
  if [[ "$p50" == 0.0 ]]; then p50="-"; fi
  : "${p50:=-}" "${p99:=-}"
}

# redis-benchmark -q/--csv output -> rate p50 p99 (µs).
parse_redis_benchmark() {
  local out=$1 line
  line=$(grep '^"PING_MBULK"' "$out" | tail -1 || true)
  if [[ -n "$line" ]]; then
    # "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
    rate=$(awk -F'","|"' '{printf "%.0f", $3}' <<<"$line")
    p50=$(awk -F'","|"' '{printf "%.1f", $6 * 1000}' <<<"$line")
    p99=$(awk -F'","|"' '{printf "%.1f", $8 * 1000}' <<<"$line")
    return 0
  fi
  # Older redis-benchmark without --csv percentiles: the -q line "PING_MBULK: 50968.40 requests
  # per second[, p50=0.639 msec]".
  line=$(tr '\r' '\n' <"$out" | grep 'requests per second' | tail -1 || true)
  rate=$(sed -n 's/.*: \([0-9.]*\) requests per second.*/\1/p' <<<"$line" | awk '{printf "%.0f", $1}')
  p50=$(sed -n 's/.*p50=\([0-9.]*\) msec.*/\1/p' <<<"$line" | awk '{printf "%.1f", $1 * 1000}')
  p99=""
  [[ -n "$rate" ]]
}

run_redis_benchmark() {  # run_redis_benchmark DEPTH
  local depth=$1 out=$tmp/redis-benchmark-d$1.txt n
  local base=(redis-benchmark -h 127.0.0.1 -p "$redis_port" -c "$connections" -P "$depth" -t ping_mbulk)
  # A short probe sizes -n so the measured run lasts about $duration seconds; it also warms redis.
  timeout -k 5 60 "${load_pin[@]}" "${base[@]}" -n $((20000 * depth)) --csv >"$out" 2>&1 || true
  if ! parse_redis_benchmark "$out"; then
    timeout -k 5 60 "${load_pin[@]}" "${base[@]}" -n $((20000 * depth)) -q >"$out" 2>&1 || true
    parse_redis_benchmark "$out" || true
  fi
  n=$(awk -v r="${rate:-0}" -v d="$duration" -v p="$depth" 'BEGIN {
    n = int(r * d); if (n < 10000 * p) n = 10000 * p; print n }')
  timeout -k 5 $((duration * 4 + 60)) "${load_pin[@]}" "${base[@]}" -n "$n" --csv >"$out" 2>&1 || true
  if ! parse_redis_benchmark "$out"; then
    timeout -k 5 $((duration * 4 + 60)) "${load_pin[@]}" "${base[@]}" -n "$n" -q >"$out" 2>&1 || true
    parse_redis_benchmark "$out" || true
  fi
  keep "$out" "redis-benchmark-d$depth.txt"
  [[ -n "$rate" ]] || { rate="-"; note="redis-benchmark failed: $(head -c 200 "$out" | tr '\n' ' ')"; return 0; }
  [[ -n "$p50" ]] || p50="-"
  [[ -n "$p99" ]] || p99="-"
  note="-n $n, no warm-up"
}

# The value of "key" inside the "latency_us" object of a ringrpc-load JSON file.
json_number() {  # json_number FILE TOP_KEY [LATENCY_KEY]
  local file=$1 key=$2 sub=${3:-}
  if command -v python3 >/dev/null 2>&1; then
    python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
v = d[sys.argv[2]]
if len(sys.argv) > 3 and sys.argv[3]:
    v = v[sys.argv[3]]
print(v)' "$file" "$key" "$sub" 2>/dev/null || true
  elif [[ -z "$sub" ]]; then
    sed -n "s/^  \"$key\": \\([-0-9.eE+]*\\),\\{0,1\\}\$/\\1/p" "$file" | head -1
  else
    # nlohmann's dump(2): the object's members are on their own lines, 4 spaces in.
    sed -n "/^  \"$key\": {/,/^  }/p" "$file" | sed -n "s/^    \"$sub\": \\([-0-9.eE+]*\\),\\{0,1\\}\$/\\1/p" | head -1
  fi
}

run_ringrpc_load() {  # run_ringrpc_load DEPTH URL NAME
  local depth=$1 url=$2 name=$3 json=$tmp/$3-d$1.json log=$tmp/$3-d$1.txt rc=0 errors
  timeout -k 5 $((duration + warmup + 30)) "${load_pin[@]}" "$load_bin" -t 1 -c "$connections" -P "$depth" \
    --duration "${duration}s" --warmup "${warmup}s" --json "$json" "$url" >"$log" 2>&1 || rc=$?
  keep "$log" "ringrpc-load-$name-d$depth.txt"
  note=""
  if [[ ! -s "$json" ]]; then
    rate="-" p50="-" p99="-"
    note="ringrpc-load exit $rc: $(grep -v '^\[' "$log" | head -c 200 | tr '\n' ' ')"
    return 0
  fi
  keep "$json" "ringrpc-load-$name-d$depth.json"
  rate=$(json_number "$json" calls_per_sec | awk '{printf "%.0f", $1}')
  p50=$(json_number "$json" latency_us p50 | awk '{printf "%.1f", $1}')
  p99=$(json_number "$json" latency_us p99 | awk '{printf "%.1f", $1}')
  errors=$(awk '/^  errors / {print $2}' "$log" | head -1)
  if ((rc != 0)); then
    note="exit $rc"
    if [[ -n "$errors" && "$errors" != 0 ]]; then
      note="$note, $errors errors: $(sed -n '/^  errors /,/^$/p' "$log" | sed '1d;/^$/d' | awk '{printf "%s=%s ", $1, $2}')"
    fi
  fi
  : "${rate:=-}" "${p50:=-}" "${p99:=-}"
}

# ---------------------------------------------------------------------------------------------
# The runs. Each round runs every pair once, incumbent first; with CAL_ROUNDS > 1 the table
# shows, per tool, the round with the median calls/s (and its latencies), plus every round's rate.

results=$tmp/results  # one line per run: key, rate, p50, p99, note (\x1f-separated)
: >"$results"
record() {  # record KEY: appends the last run_* result
  local IFS=$'\x1f'
  printf '%s\n' "$*" >>"$results"
}

log_header "servers"
start_nginx_peer
start_redis
start_ringrpc

log_header "runs ($rounds round(s), ${duration} s each, $connections connections, depths ${depths[*]})"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for ((round = 1; round <= rounds; ++round)); do
  for d in "${depths[@]}"; do
    echo "round $round: nginx depth $d: wrk, ringrpc-load"
    run_wrk "$d"
    record "nginx/$d/wrk" "$rate" "$p50" "$p99" "$note"
    run_ringrpc_load "$d" "http://127.0.0.1:$nginx_port/" nginx
    record "nginx/$d/load" "$rate" "$p50" "$p99" "$note"
  done
  for d in "${depths[@]}"; do
    echo "round $round: redis depth $d: redis-benchmark, ringrpc-load"
    run_redis_benchmark "$d"
    record "redis/$d/redis-benchmark" "$rate" "$p50" "$p99" "$note"
    run_ringrpc_load "$d" "redis://127.0.0.1:$redis_port" redis
    record "redis/$d/load" "$rate" "$p50" "$p99" "$note"
  done
  for d in "${depths[@]}"; do
    echo "round $round: ringrpc-server depth $d: ringrpc-load"
    run_ringrpc_load "$d" "ringrpc://$ringrpc_addr/echo" ringrpc
    record "ringrpc-echo/$d/load" "$rate" "$p50" "$p99" "$note"
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# ---------------------------------------------------------------------------------------------
# The table

ratio() {
  awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", b / a; else printf "-" }'
}

# median KEY: sets m_rate m_p50 m_p99 m_note (the median round by rate) and m_all (every rate).
median() {
  local lines
  m_rate="-" m_p50="-" m_p99="-" m_note="" m_all=""
  mapfile -t lines < <(awk -F$'\x1f' -v k="$1" '$1 == k' "$results" | sort -t$'\x1f' -k2,2g)
  ((${#lines[@]} > 0)) || return 0
  IFS=$'\x1f' read -r _ m_rate m_p50 m_p99 m_note <<<"${lines[$(((${#lines[@]} - 1) / 2))]}"
  m_all=$(awk -F$'\x1f' -v k="$1" '$1 == k {printf "%s%s", (n++ ? "/" : ""), $2}' "$results")
}

log_header "calibration"
printf 'ringrpc-load %s vs %s, %s, redis-benchmark %s, on %s\n' \
  "$build_dir" "$(wrk --version 2>&1 | head -1 | awk '{print "wrk " $2}')" \
  "$("$nginx_bin" -v 2>&1 | sed 's/.*version: //')" \
  "$(redis-benchmark --version 2>/dev/null | awk '{print $2}')" \
  "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, kernel $(uname -r)"
printf 'servers on CPU %s, load generators on CPU %s; %s connections; %s s measured per run;\n' \
  "$server_cpu" "$load_cpu" "$connections" "$duration"
printf 'ringrpc-load excludes a %s s warm-up; latency in µs; ratio = ringrpc-load / incumbent calls/s\n' "$warmup"
printf 'load average before/after: %s / %s\n\n' "$load_before" "$load_after"
line() { printf '%-12s %5s %-15s %11s %11s %6s %9s %9s %9s %9s\n' "$@"; }
line target depth incumbent "inc call/s" "load call/s" ratio "inc p50" "inc p99" "load p50" "load p99"
line ------------ ----- --------------- ----------- ----------- ------ --------- --------- --------- ---------
notes=()
for pair in nginx:wrk redis:redis-benchmark ringrpc-echo:-; do
  t=${pair%%:*} inc=${pair#*:}
  for d in "${depths[@]}"; do
    if [[ "$inc" != - ]]; then
      median "$t/$d/$inc"
      ir=$m_rate i50=$m_p50 i99=$m_p99 inote=$m_note iall=$m_all
    else
      ir=- i50=- i99=- inote="" iall=""
    fi
    median "$t/$d/load"
    line "$t" "$d" "$inc" "$ir" "$m_rate" "$(ratio "$ir" "$m_rate")" "$i50" "$i99" "$m_p50" "$m_p99"
    note=""
    [[ -n "$inote" ]] && note="$inc: $inote"
    [[ -n "$m_note" ]] && note="${note:+$note; }ringrpc-load: $m_note"
    if ((rounds > 1)); then
      note="${note:+$note; }rounds: ${iall:+$inc $iall, }ringrpc-load $m_all"
    fi
    [[ -n "$note" ]] && notes+=("$t depth $d: $note")
  done
done
if ((${#notes[@]} > 0)); then
  echo
  printf '  note: %s\n' "${notes[@]}"
fi
