# shellcheck shell=bash
# Helpers shared by scripts/test, scripts/demo, the bench scripts and the shell tests (through
# tests/lib.sh). Source it; it does not run anything itself. Bash.
#
#   install_missing_packages     apt-installs whatever in scripts/packages.txt is not installed
#   meson_setup DIR [OPTS...]    configures DIR with OPTS, or re-applies OPTS if already configured
#   build_release [TARGET...]    configures (if needed) and builds build/release: the named
#                                ninja targets only, or everything
#
# Processes: every one these helpers start goes through track_pid PID, which appends it to the
# string $pids; a caller keeping $pids as an array (or elsewhere) redefines track_pid.
#
#   running PID                  PID has not exited (zombies count as exited)
#   free_port [6]                a loopback port nobody listens on (IPv6 ::1 with 6)
#   wait_port HOST PORT [TENTHS] until something accepts there (default 5 s)
#   start_server NAME CMD...     runs CMD (a ringrpc-server or any program that prints
#                                "listening on HOST:PORT") in the background, its output in
#                                NAME.out and NAME.err, then wait_listening
#   wait_listening PID OUT [ERR] [TENTHS]   until OUT has the "listening on HOST:PORT" line
#                                (default 10 s): sets listen_address (HOST:PORT) and
#                                listen_port; 1 with ERR shown when PID exits first or time runs
#                                out, 77 when ERR says io_uring is unavailable (a test skips)
#   wait_for FILE PATTERN [TENTHS]  until PATTERN (grep -E) is in FILE (default 5 s)
#   start_nginx DIR PORT...      nginx (${nginx:-nginx}, under the words of ${nginx_wrap[@]},
#                                e.g. timeout and taskset) with one worker and prefix DIR (logs
#                                in DIR/logs), config DIR.conf, output DIR.out, the body of its
#                                http { } block read from stdin, ${nginx_connections:-256}
#                                connections; waits for every PORT on 127.0.0.1, exits 1 with
#                                nginx's logs if one never answers
#
# Paths are relative to the repository root; callers cd there first (ringrpc_root gives it).

RINGRPC_SCRIPTS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
RINGRPC_ROOT="$(cd "$RINGRPC_SCRIPTS_DIR/.." && pwd)"
: "${RINGRPC_JOBS:=2}"   # parallel compile jobs / test processes

ringrpc_root() { printf '%s\n' "$RINGRPC_ROOT"; }

log_header() {
  printf '\n==================== %s ====================\n' "$*"
}

# Package names from scripts/packages.txt, comments and blank lines removed.
required_packages() {
  sed -e 's/#.*//' -e 's/[[:space:]]\+$//' -e 's/^[[:space:]]\+//' \
    "$RINGRPC_SCRIPTS_DIR/packages.txt" | grep -v '^$'
}

# Installs the packages of scripts/packages.txt that are not installed yet. Runs apt-get only
# when something is missing, so a second run costs nothing and needs no network.
install_missing_packages() {
  local pkg missing=()
  while IFS= read -r pkg; do
    if [[ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)" != "install ok installed" ]]; then
      missing+=("$pkg")
    fi
  done < <(required_packages)
  if ((${#missing[@]} == 0)); then
    echo "All $(required_packages | wc -l) required Debian packages are installed."
    return 0
  fi
  echo "Installing missing Debian packages: ${missing[*]}"
  local sudo=()
  if ((EUID != 0)); then
    if command -v sudo >/dev/null 2>&1; then
      sudo=(sudo)
    else
      echo "error: not root and no sudo; install as root: apt-get install ${missing[*]}" >&2
      return 1
    fi
  fi
  "${sudo[@]}" apt-get update
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends "${missing[@]}"
}

# meson_setup DIR [meson options...]
# A fresh (or half-configured) DIR gets `meson setup`; an existing one gets `meson configure`
# with the same options, so re-runs are incremental. Use -Dname=value forms only.
meson_setup() {
  local dir=$1
  shift
  if [[ -f "$dir/meson-private/coredata.dat" && -f "$dir/build.ninja" ]]; then
    meson configure "$dir" "$@"
  else
    rm -rf "$dir"
    meson setup "$dir" "$@"
  fi
}

# Options of the release build; scripts/test adds -Dwerror=true. The prefix is a scratch
# directory beside it, which the prefix_install test installs the build into (a prefix that is
# not /usr, as the README's recipe for one; nothing outside build/ is written).
RINGRPC_RELEASE_OPTS=(-Dbuildtype=release "-Dprefix=$RINGRPC_ROOT/build/release-prefix")

# Configures build/release if needed and builds the named targets (e.g. tools/ringrpc-server),
# or everything when none is named.
build_release() {
  (cd "$RINGRPC_ROOT" &&
    meson_setup build/release "${RINGRPC_RELEASE_OPTS[@]}" &&
    ninja -C build/release -j"$RINGRPC_JOBS" "$@")
}

# --- processes: ports, servers, peers ----------------------------------------------------------

track_pid() { pids="${pids:-} $1"; }

# running PID: PID exists and has not exited (an exited child nobody reaped yet is a zombie).
running() {
  # The state field alone decides: bash reaps its exited children on its own, so a zombie can
  # vanish between a `kill -0` and a read of /proc; a missing entry means gone, not running.
  local state
  state=$(sed -n 's/.*) \(.\).*/\1/p' "/proc/$1/stat" 2>/dev/null)
  [[ -n $state && $state != [ZX] ]]
}

# A port the kernel just handed out and took back; nginx and redis cannot listen on port 0.
# shellcheck disable=SC2120  # most callers want IPv4 and give no argument
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

wait_listening() {
  local pid=$1 out=$2 err=${3:-} tenths=${4:-100} i=0 line
  # shellcheck disable=SC2034  # the callers read them
  listen_address='' listen_port=''
  while ((i < tenths)); do
    line=$(sed -n 's/^listening on //p' "$out" 2>/dev/null | head -n 1)
    if [[ -n "$line" ]]; then
      # shellcheck disable=SC2034  # the callers read them
      listen_address=$line listen_port=${line##*:}
      return 0
    fi
    if ! running "$pid"; then
      echo "$(basename "$out" .out) (pid $pid) exited before listening:" >&2
      if [[ -n "$err" ]]; then
        cat "$err" >&2
        if grep -qi 'io_uring' "$err"; then return 77; fi
      fi
      return 1
    fi
    sleep 0.1
    i=$((i + 1))
  done
  echo "$(basename "$out" .out) (pid $pid) printed no 'listening on HOST:PORT' line in $((tenths / 10)) s" >&2
  [[ -z "$err" ]] || cat "$err" >&2
  return 1
}

# wait_for FILE PATTERN [TENTHS]: until PATTERN (grep -E) is in FILE (default 5 s).
wait_for() {
  local i=0
  while ((i < ${3:-50})); do
    if grep -Eq -- "$2" "$1" 2>/dev/null; then return 0; fi
    sleep 0.1
    i=$((i + 1))
  done
  return 1
}

start_server() {
  local name=$1
  shift
  : >"$name.out"
  "$@" >"$name.out" 2>"$name.err" </dev/null &
  server_pid=$!
  track_pid "$server_pid"
  wait_listening "$server_pid" "$name.out" "$name.err"
}

# --- bench: a pinned server whose CPU time is read -------------------------------------------

# start_pinned_server NAME LIFETIME CPUS CMD...: runs CMD pinned to CPUS under `timeout LIFETIME`
# (start_server: NAME.out/.err, listen_port) and sets pinned_pid to the server itself, whose
# /proc/PID/stat the CPU reads need: timeout forks it (taskset execs it in place), so it is
# timeout's one child. server_pid stays timeout's PID, the one to wait for.
start_pinned_server() {
  local name=$1 lifetime=$2 cpus=$3
  shift 3
  pinned_pid=
  start_server "$name" timeout "$lifetime" taskset -c "$cpus" "$@" || return 1
  pinned_pid=$(awk '{print $1}' "/proc/$server_pid/task/$server_pid/children" 2>/dev/null || true)
  [[ -n $pinned_pid ]] || pinned_pid=$(pgrep -P "$server_pid" | head -1 || true)
  [[ -n $pinned_pid ]] || { echo "cannot find the PID of the server under timeout $server_pid" >&2; return 1; }
}

# stop_pinned_server: SIGTERM (ringrpc-server drains), up to 10 s, then SIGKILL, the same PID.
stop_pinned_server() {
  [[ -n ${pinned_pid:-} ]] || return 0
  kill -TERM "$pinned_pid" 2>/dev/null || true
  for _ in $(seq 100); do
    running "$pinned_pid" || break
    sleep 0.1
  done
  kill -KILL "$pinned_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  pinned_pid='' server_pid=''
}

# bench_need_built WHO BUILD_DIR BIN...: exits 2 naming the first BIN that is not built, with the
# command that builds BUILD_DIR's benchmarks.
bench_need_built() {
  local who=$1 dir=$2 b
  shift 2
  for b in "$@"; do
    if [[ ! -x $b ]]; then
      echo "$who: $b is missing; build it first:" >&2
      echo "  source scripts/lib.sh && meson_setup $dir -Dbenchmarks=true -Dtests=false && ninja -C $dir" >&2
      exit 2
    fi
  done
}

# pinned_bench_knobs WHO: the environment bench/vs_raw_loop.sh and bench/interceptor_cost.sh
# share, with the same defaults: duration (DURATION [5] s), warmup (WARMUP [1] s), connections
# (CONNECTIONS [64]), size (SIZE [64]), depth (DEPTH [16]), rate (RATE [20k]), server_cpu /
# load_cpu (SERVER_CPU / LOAD_CPU [0 / 1]), build_dir (BUILD_DIR [build/bench]) and out_json
# (OUT_JSON). Exits 2 when both CPUs are one: the load would take the CPU time it measures.
pinned_bench_knobs() {
  # shellcheck disable=SC2034  # the callers read them
  duration=${DURATION:-5} warmup=${WARMUP:-1} connections=${CONNECTIONS:-64} size=${SIZE:-64}
  # shellcheck disable=SC2034
  depth=${DEPTH:-16} rate=${RATE:-20k} build_dir=${BUILD_DIR:-build/bench} out_json=${OUT_JSON:-}
  server_cpu=${SERVER_CPU:-0} load_cpu=${LOAD_CPU:-1}
  if [[ $server_cpu == "$load_cpu" ]]; then
    echo "$1: SERVER_CPU and LOAD_CPU are both $server_cpu; give them different CPUs" >&2
    exit 2
  fi
}

# bench_work_dir NAME: sets work to a fresh directory NAME.XXXXXX under TMPDIR; on exit the
# pinned server is stopped and work removed (kept, and named, with KEEP_WORK=1). INT and TERM
# exit 130, so the same cleanup runs.
bench_work_dir() {
  work=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
  pinned_pid='' server_pid=''
  trap bench_cleanup EXIT
  trap 'exit 130' INT TERM
}
bench_cleanup() {
  stop_pinned_server
  if [[ ${KEEP_WORK:-0} == 1 ]]; then
    echo "raw results kept in $work" >&2
  else
    rm -rf "$work"
  fi
}

# raw_loop_bin BUILD_DIR: the raw io_uring echo loop of a build: bench/raw_echo_loop in a build
# with benchmarks, else the same program as every build with tools installs it
# (tools/ringrpc-raw-echo), so that the bench scripts run from a plain release build too.
raw_loop_bin() {
  if [[ -x $1/bench/raw_echo_loop ]]; then
    printf '%s\n' "$1/bench/raw_echo_loop"
  else
    printf '%s\n' "$1/tools/ringrpc-raw-echo"
  fi
}

# cpu_ticks PID: utime+stime of the whole process (all threads), in clock ticks.
cpu_ticks() {
  local stat rest
  stat=$(<"/proc/$1/stat")
  rest=${stat##*) }  # the command name may hold spaces; the fields after it are fixed
  local -a f
  read -r -a f <<<"$rest"
  echo $((f[11] + f[12]))
}

# children_cpu_s: sets children_s to the user+sys seconds of this shell's finished children
# (ringrpc-load among them). `times` must run in this shell, not in a pipe or $(...), whose
# subshell has children of its own: hence the file in the caller's $work.
children_cpu_s() {
  local -a tm
  times >"${work:?}/times"
  read -r -a tm < <(tail -1 "$work/times" | tr 'ms' '  ')
  # shellcheck disable=SC2034  # the callers read it
  children_s=$(awk -v um="${tm[0]}" -v us="${tm[1]}" -v sm="${tm[2]}" -v ss="${tm[3]}" \
    'BEGIN { printf "%.3f", um * 60 + us + sm * 60 + ss }')
}

start_nginx() {
  local dir=$1 port
  shift
  mkdir -p "$dir/logs"
  {
    cat <<CONF
worker_processes 1;
daemon off;
pid $dir/nginx.pid;
error_log $dir/logs/error.log;
events { worker_connections ${nginx_connections:-256}; }
http {
  client_body_temp_path $dir/body;
CONF
    cat
    echo "}"
  } >"$dir.conf"
  local wrap=()
  if [[ -n "${nginx_wrap+set}" ]]; then wrap=("${nginx_wrap[@]}"); fi
  "${wrap[@]}" "${nginx:-nginx}" -p "$dir" -e "$dir/logs/error.log" -c "$dir.conf" >"$dir.out" 2>&1 &
  track_pid $!
  for port in "$@"; do
    if ! wait_port 127.0.0.1 "$port"; then
      echo "nginx did not start:" >&2
      cat "$dir.out" "$dir/logs/error.log" >&2
      exit 1
    fi
  done
}
