# shellcheck shell=sh
# $load and $nginx come from the caller, which also reads $rc:
# shellcheck disable=SC2154,SC2034
# Helpers the shell tests share. Source it (POSIX sh): . "$(dirname "$0")/../lib.sh"
#
#   test_init NAME         a fresh $work directory, $pids and $failures, and the traps that
#                          stop the processes in $pids and remove $work on exit
#   fail TEXT / ok TEXT    report one check (fail counts it in $failures)
#   free_port [6]          a loopback port nobody listens on (IPv6 ::1 with 6)
#   wait_port HOST PORT [TENTHS]   until something accepts there (default 5 s)
#   stop_pid PID           TERM, then KILL after 3 s; reaps it
#   run_load NAME ARGS...  runs $load ARGS under a ${load_timeout:-30} s timeout, its output in
#                          $work/NAME.out and .err, its exit status in $rc
#   make_cert NAME CN [CA] NAME.pem and NAME.key (EC P-256, 2 days, SAN localhost and
#                          127.0.0.1), self-signed or signed by CA.pem/CA.key; in the current dir
#   start_nginx PORT...    nginx ($nginx) with one worker under $work/nginx, the body of its
#                          http { } block read from stdin, config in $work/nginx.conf; waits
#                          for every PORT on 127.0.0.1, exits 1 with nginx's logs if one fails
#
# Tests add the PID of every process they start to $pids; cleanup stops only those.

test_init() {
  work=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX") || exit 1
  pids=
  failures=0
  trap cleanup EXIT
  trap 'exit 1' INT TERM HUP
}

stop_pid() {
  kill -TERM "$1" 2>/dev/null
  for _ in $(seq 30); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$1" 2>/dev/null
  wait "$1" 2>/dev/null
}

cleanup() {
  # Only the processes this script started, by their PIDs. TERM all first (nginx's master then
  # stops its worker; a KILLed master leaves the worker orphaned), KILL what is left after 3 s.
  for p in $pids; do kill -TERM "$p" 2>/dev/null; done
  for _ in $(seq 30); do
    alive=0
    for p in $pids; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ "$alive" = 1 ] || break
    sleep 0.1
  done
  for p in $pids; do kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  rm -rf "$work"
}

fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}
ok() { echo "ok: $*"; }

# A port the kernel just handed out and took back; nginx and redis cannot listen on port 0.
free_port() {
  python3 -c 'import socket, sys
s = socket.socket(socket.AF_INET6 if sys.argv[1] == "6" else socket.AF_INET)
s.bind(("::1" if sys.argv[1] == "6" else "127.0.0.1", 0)); print(s.getsockname()[1])' "${1:-4}"
}

wait_port() {
  python3 -c 'import socket, sys, time
for _ in range(int(sys.argv[3])):
    try:
        socket.create_connection((sys.argv[1], int(sys.argv[2])), 0.2).close(); sys.exit(0)
    except OSError:
        time.sleep(0.1)
sys.exit(1)' "$1" "$2" "${3:-50}"
}

make_cert() {
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=$2" \
    -keyout "$1.key" -out "$1.pem" ${3:+-CA "$3.pem" -CAkey "$3.key"} \
    -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" 2>/dev/null
}

run_load() {
  name=$1
  shift
  timeout "${load_timeout:-30}" "$load" "$@" >"$work/$name.out" 2>"$work/$name.err"
  rc=$?
}

start_nginx() {
  mkdir -p "$work/nginx/logs"
  {
    cat <<CONF
worker_processes 1;
daemon off;
pid $work/nginx/nginx.pid;
error_log $work/nginx/logs/error.log;
events { worker_connections 256; }
http {
  client_body_temp_path $work/nginx/body;
CONF
    cat
    echo "}"
  } >"$work/nginx.conf"
  "$nginx" -p "$work/nginx" -c "$work/nginx.conf" >"$work/nginx.out" 2>&1 &
  pids="$pids $!"
  for _port in "$@"; do
    if ! wait_port 127.0.0.1 "$_port"; then
      echo "nginx did not start:" >&2
      cat "$work/nginx.out" "$work/nginx/logs/error.log" >&2
      exit 1
    fi
  done
}
