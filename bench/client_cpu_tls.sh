#!/usr/bin/env bash
# Client CPU per request over TLS: wrk https:// beside ringrpc-load https:// against the same
# nginx (ssl, one worker, certificates made here with openssl req), in alternating rounds as in
# bench/client_cpu.sh. Each load process runs under /usr/bin/time; user+sys seconds over calls
# completed is its CPU per call. The goal (issue 14): ringrpc-load at most 1/1.2 = 0.83 of wrk's.
#
#   bench/client_cpu_tls.sh
#   CPU_ROUNDS=5 CPU_DURATION=10 bench/client_cpu_tls.sh
#
# Both tools keep their connections (nginx keepalive_requests is unlimited), so the handshakes
# are a few per run and the cost measured is the records: OpenSSL sealing and opening each
# request and reply. Neither verifies the server (wrk never does; ringrpc-load gets -k).
#
# Environment: CPU_ROUNDS [3], CPU_DURATION seconds per run [5], CPU_CONNECTIONS [64],
# CPU_BUILD_DIR [build/release], CPU_SERVER_CPU / CPU_LOAD_CPU [0 / 1].
# Only 127.0.0.1; nginx is stopped by PID on exit.
set -euo pipefail
# shellcheck source=bench/client_cpu_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/client_cpu_lib.sh"

cpu_bench_knobs

cpu_bench_need "client_cpu_tls (Debian: nginx-light wrk openssl time; build ringrpc-load)" \
  "$load_bin" "$nginx_bin" wrk openssl /usr/bin/time taskset python3
cpu_bench_setup client-cpu-tls

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=localhost \
  -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" -keyout "$tmp/server.key" -out "$tmp/server.pem" 2>/dev/null

budget=$((rounds * (2 * duration + 120) + 60))
port=$(free_port)
start_ok_nginx "$budget" "$port" ssl "ssl_certificate $tmp/server.pem; ssl_certificate_key $tmp/server.key;"
echo "nginx (ssl) on 127.0.0.1:$port; server ${server_pin[*]:-unpinned}, load ${load_pin[*]:-unpinned}"

limit=$((duration + 120))
for ((round = 1; round <= rounds; round++)); do
  order=(wrk ours)
  if ((round % 2 == 0)); then order=(ours wrk); fi
  for who in "${order[@]}"; do
    if [[ $who == wrk ]]; then
      measure "$limit" wrk wrk -t1 "-c$connections" "-d${duration}s" "https://127.0.0.1:$port/"
      calls=$(awk '/requests in/ { print $1 }' "$tmp/wrk.out")
      rate=$(awk '/Requests\/sec/ { print $2 }' "$tmp/wrk.out")
      if grep -q 'Non-2xx\|Socket errors' "$tmp/wrk.out"; then
        echo "wrk reported errors:" >&2; cat "$tmp/wrk.out" >&2
      fi
      row nginx "$round" wrk "${calls:-0}" "$cpu" "${rate:-0}"
    else
      measure "$limit" rl "$load_bin" -t 1 -c "$connections" -d "${duration}s" --warmup 0 -k --json "$tmp/rl.json" \
        "https://127.0.0.1:$port/"
      calls=$(json_field "$tmp/rl.json" calls_ok)
      errors=$(python3 -c 'import json, sys; print(sum(json.load(open(sys.argv[1]))["errors"].values()))' "$tmp/rl.json" 2>/dev/null || echo "?")
      [[ $errors == 0 ]] || { echo "ringrpc-load reported $errors error(s):" >&2; cat "$tmp/rl.err" >&2; }
      row nginx "$round" ringrpc-load "$calls" "$cpu" "$(json_field "$tmp/rl.json" calls_per_sec)"
    fi
  done
done

echo
echo "ringrpc-load CPU per call / wrk's over TLS, per round (goal <= 0.83):"
cpu_bench_summary rates
