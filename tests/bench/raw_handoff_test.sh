#!/usr/bin/env bash
# ringrpc-raw-echo --handoff (bench/raw_handoff.hpp), the floor bench/vs_raw_loop.sh measures
# the pool path against: with either worker (syscalls, ring) every byte comes back. ringrpc-load
# checks each echo against what it sent: 64 B calls at depth 16 on 32 connections (many echoes
# per hand-off), then 256 KiB calls at depth 4 on 8 connections (sends larger than a socket
# buffer, so the worker's sends wait and resume). Then SIGTERM must stop it with status 0 (the
# worker thread joined). Asserts counts and exit codes, never speed.
# Usage: raw_handoff_test.sh RAW_ECHO LOAD     (meson test)
set -euo pipefail
raw=$1 load=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/raw_handoff_test.XXXXXX")
pid=''
cleanup() {
  if [[ -n $pid ]]; then kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; [[ -s $work/err ]] && sed 's/^/  server: /' "$work/err" >&2; exit 1; }
# wait_for, from scripts/lib.sh:
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/../../scripts/lib.sh"

# run_load NAME ARGS...: a bounded ringrpc-load run that must answer every call, none failing.
run_load() {
  local name=$1
  shift
  timeout 60 "$load" "echo://127.0.0.1:$port" --json "$work/$name.json" "$@" >"$work/$name.out" 2>&1 ||
    fail "$mode: ringrpc-load $* exited $?: $(tail -3 "$work/$name.out")"
  python3 - "$work/$name.json" "$mode $name" <<'PY' || fail "$mode: $name: see above"
import json, sys
r = json.load(open(sys.argv[1]))
bad = sum(r["errors"].values())
if bad or r["calls_ok"] < 100:
    sys.exit(f"{sys.argv[2]}: {r['calls_ok']} calls answered, {bad} failed: {r['errors']}")
PY
}

for mode in syscalls ring; do
  "$raw" --port 0 --handoff "$mode" --exit-after 60 >"$work/out" 2>"$work/err" &
  pid=$!
  wait_for "$work/out" "^listening on " 100 || fail "$mode: no 'listening on' line"
  port=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$work/out")
  [[ -n $port ]] || fail "$mode: no port in $(cat "$work/out")"
  # The set-up line names the worker: send(2)+futex(2), or its own ring (with or without the
  # kernel's futex opcodes).
  case $mode in
    syscalls) grep -q 'handoff_worker=send_futex_syscalls' "$work/err" || fail "$mode: set-up line" ;;
    ring) grep -qE 'handoff_worker=ring_(futex_wait|sends_futex_syscall)' "$work/err" || fail "$mode: set-up line" ;;
  esac
  run_load small -c 32 -P 16 -s 64 -n 5000
  run_load large -c 8 -P 4 -s 256k -n 100
  kill -TERM "$pid"
  rc=0
  wait "$pid" || rc=$?
  pid=''
  [[ $rc == 0 ]] || fail "$mode: SIGTERM left exit status $rc, not 0"
  echo "$mode: every echo came back; stopped cleanly"
done
