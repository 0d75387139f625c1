# shellcheck shell=bash
# $load comes from the caller, which also reads $rc and $nginx and $redis (need_nginx_and_redis):
# shellcheck disable=SC2154,SC2034
# What only the shell tests share; it sources scripts/lib.sh, which has the rest (free_port,
# wait_port, start_server, wait_listening, start_nginx DIR PORT...). Source it from a bash
# test in tests/DIR/: . "$(dirname "$0")/../lib.sh"
#
#   skip_unless_installed WHAT PROGRAM...
#                          exits 77 ("WHAT not installed: skipped") unless python3 and each
#                          PROGRAM (a name on PATH or a path) can run
#   need_nginx_and_redis   sets $nginx and $redis (their Debian paths when not on PATH); exits 77
#                          (skipped) unless both, and python3, are installed
#   test_init NAME         a fresh $work directory, $pids and $failures, and the traps that
#                          stop the processes in $pids and remove $work on exit
#   one_server_init NAME   for a `set -e` test that starts at most one server: a fresh $work, and
#                          the trap that stops that server (the last PID given to track_pid, kept
#                          in $pid) and removes $work on exit; such a test's fail exits at once
#   fail TEXT / ok TEXT    report one check (fail counts it in $failures)
#   stop_pid PID           TERM, then KILL after 3 s; reaps it
#   wait_exit PID TENTHS   waits until PID has exited, at most TENTHS tenths of a second;
#                          false if it still runs then (it is not signalled nor reaped)
#   run_load NAME ARGS...  runs $load ARGS under a ${load_timeout:-30} s timeout, its output in
#                          $work/NAME.out and .err, its exit status in $rc
#   interrupt_load PID SECONDS
#                          SIGINT to the ringrpc-load run PID (started in the background) after
#                          SECONDS; fails (and KILLs it) when it still runs 5 s later; waits for
#                          it and sets $rc to its exit status
#   json_field FILE EXPR   prints the Python expression EXPR over the JSON document `j` in FILE
#                          (nothing when FILE is not JSON or EXPR fails)
#   expect_diagnosis NAME PATTERN URL
#                          a ringrpc-load run at URL (a server of another protocol) exits 2
#                          within 8 s with a line matching PATTERN (grep -E) and no summary
#   expect_run NAME EXPR WANT TEXT
#                          the last run_load NAME exited 0 and json_field of EXPR over its
#                          --json file, $work/NAME.json, printed WANT: ok TEXT, else fail
#   make_cert NAME CN [CA] NAME.pem and NAME.key (EC P-256, 2 days, SAN localhost and
#                          127.0.0.1), self-signed or signed by CA.pem/CA.key; in the current dir
#
# Tests add the PID of every process they start to $pids; cleanup stops only those.

# shellcheck source=scripts/lib.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/scripts/lib.sh"

# sanitized BIN: whether BIN was built with a sanitizer, whose runtime reserves terabytes of
# address space and dies under a `prlimit --as` cap. g++ links the runtime as a shared library
# (libasan, libtsan, libubsan); clang links it into the program: both leave its entry points'
# names in the binary.
sanitized() {
  grep -Eqa '__(asan|tsan|ubsan)_' "$1"
}

skip_unless_installed() {
  local what=$1 p
  shift
  for p in "$@" python3; do
    if ! command -v "$p" >/dev/null; then
      echo "$what not installed: skipped"
      exit 77
    fi
  done
}

need_nginx_and_redis() {
  nginx=$(command -v nginx || echo /usr/sbin/nginx)
  redis=$(command -v redis-server || echo /usr/bin/redis-server)
  skip_unless_installed "nginx, redis-server or python3 (Debian: nginx-light, redis-server)" "$nginx" "$redis"
}

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

wait_exit() {
  local i=0
  while running "$1" && ((i < $2)); do
    sleep 0.1
    i=$((i + 1))
  done
  ! running "$1"
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

one_server_init() {
  work=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX") || exit 1
  pid=
  # shellcheck disable=SC2317  # start_server calls it
  track_pid() { pid=$1; }
  trap one_server_cleanup EXIT
}
# set -e holds in an EXIT trap: every command here must succeed or be allowed to fail.
one_server_cleanup() {
  if [ -n "$pid" ]; then kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}

make_cert() {
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=$2" \
    -keyout "$1.key" -out "$1.pem" ${3:+-CA "$3.pem" -CAkey "$3.key"} \
    -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" 2>/dev/null
}

json_field() {
  python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2" 2>/dev/null
}

expect_diagnosis() {
  local start took
  start=$(date +%s)
  run_load "$1" -c 2 -d 20s "$3"
  took=$(($(date +%s) - start))
  if [ "$rc" -ne 2 ]; then
    fail "$3: exit $rc, expected 2 with a diagnosis"; cat "$work/$1.err" "$work/$1.out" >&2
  elif [ $took -gt 8 ]; then
    fail "$3: the diagnosis took $took s"
  elif ! grep -Eq "^ringrpc-load: .*$2" "$work/$1.err"; then
    fail "$3: no line /$2/:"; cat "$work/$1.err" >&2
  elif grep -q 'calls ok' "$work/$1.out"; then
    fail "$3: a summary of a meaningless run was printed"
  else
    ok "$3 -> $(grep '^ringrpc-load: ' "$work/$1.err" | tail -1)"
  fi
}

expect_run() {
  local got
  got=$(json_field "$work/$1.json" "$2")
  if [ "$rc" != 0 ] || [ "$got" != "$3" ]; then
    fail "$4: exit $rc, $2 = '$got', expected $3"; cat "$work/$1.err" >&2
  else
    ok "$4"
  fi
}

run_load() {
  name=$1
  shift
  timeout "${load_timeout:-30}" "$load" "$@" >"$work/$name.out" 2>"$work/$name.err"
  rc=$?
}

interrupt_load() {
  sleep "$2"
  kill -INT "$1"
  if ! wait_exit "$1" 50; then
    kill -KILL "$1"
    fail "ringrpc-load still runs 5 s after SIGINT"
  fi
  wait "$1"
  rc=$?
}
