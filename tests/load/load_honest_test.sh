#!/usr/bin/env bash
# ringrpc-load's numbers must not mislead, against a ringrpc-server on one core:
# * a method the server does not have stops the run at once (exit 5) naming unknown_method;
# * --rate-steps 2k,3000k: the first step is kept_up in the JSON, the second is not, and the
#   summary says why ("could not keep up: ...");
# * requested, issued and answered rates apart; per-second buckets with their width; the
#   config's duration_s is the steps' total;
# * wrk's and k6's habits: -d N is N seconds, -z is --duration, --latency is accepted with a
#   note, --fail-if takes comma-separated conditions; bytes/s sent and received.
# Usage: load_honest_test.sh PATH/TO/ringrpc-load PATH/TO/ringrpc-server
# Exit 77 (skipped) when the server cannot start because io_uring is unavailable.
set -u

load=${1:?usage: $0 ringrpc-load ringrpc-server}
server=${2:?usage: $0 ringrpc-load ringrpc-server}

# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
load_timeout=30
test_init load_honest
cd "$work" || exit 1

# One core for the server when taskset is there (util-linux); its one reader and one handler
# are what "a one-core server" means otherwise.
pin=
if command -v taskset >/dev/null 2>&1 && taskset -c 0 true 2>/dev/null; then pin="taskset -c 0"; fi
# shellcheck disable=SC2086  # $pin is words or nothing
start_server server $pin "$server" --port 0 --readers 1 --handlers 1 || exit $?
pid=$server_pid port=$listen_port

json() {  # json FILE PYTHON-EXPR: prints the value (Python's repr), or nothing on any error
  python3 -c 'import json, sys
print(eval(sys.argv[2], {"j": json.load(open(sys.argv[1]))}))' "$1" "$2" 2>/dev/null
}

# --- a wrong method: stopped at once, named, exit 5 ---------------------------------------------
start=$(date +%s)
run_load nosuch "ringrpc://127.0.0.1:$port/no.such"
took=$(($(date +%s) - start))
if [ $rc -ne 5 ]; then
  fail "ringrpc://.../no.such exited $rc, expected 5"
  cat nosuch.err >&2
elif ! grep -q '^ringrpc-load: .*unknown_method' nosuch.err || ! grep -q "no.such" nosuch.err; then
  fail "ringrpc://.../no.such did not name unknown_method and the method: $(cat nosuch.err)"
elif [ "$took" -gt 5 ]; then
  # A bound that catches running the whole default 10 s + 1 s warm-up, not a speed.
  fail "ringrpc://.../no.such took $took s to stop (the run is 11 s; 5 s at most expected)"
elif grep -q 'calls ok' nosuch.out; then
  fail "ringrpc://.../no.such printed a summary of errors"
else
  ok "no.such: exit 5 after ${took} s: $(tail -n 1 nosuch.err)"
fi
# A method that exists but fails some calls is not stopped: sleep with a bad payload answers
# bad_request, echo answers ok; one ok answer is enough.
run_load mixed -c 2 -d 1 --warmup 0 --mix 'echo:1,no.such:1' "ringrpc://127.0.0.1:$port/echo"
if [ $rc -ne 3 ] || ! grep -q 'unknown_method' mixed.out; then
  fail "a mix with a working method stopped or did not count unknown_method (exit $rc): $(cat mixed.err)"
else
  ok "echo + no.such mixed: runs on, counts unknown_method, exit 3"
fi

# --- kept_up: 2k/s is easy for one core, 3M/s impossible --------------------------------------
# The first step can miss only when this shared machine keeps the load generator or the
# one-core server off the CPU for over a millisecond at a time, often enough to send over 1 %
# of the calls late (client_behind_schedule or target_too_slow), while every call is still
# sent and answered. A few tries tell that from a wrong verdict; a miss in every try is noted,
# not failed, when it was only lateness.
kept=
late_only=yes
for attempt in 1 2 3 4 5; do
  run_load steps -c 8 -P 8 --rate-steps 2k,3000k --step-time 1s --warmup 500ms --json steps.json \
    "ringrpc://127.0.0.1:$port/echo"
  first=$(json steps.json 'j["steps"][0]["kept_up"]')
  second=$(json steps.json 'j["steps"][1]["kept_up"]')
  reason1=$(json steps.json 'j["steps"][0].get("reason")')
  if [ "$second" != False ]; then
    fail "--rate-steps 2k,3000k: step 2 kept_up '$second', expected False (exit $rc)"
    cat steps.out steps.err >&2
    break
  fi
  if [ "$first" = True ]; then
    kept=$attempt
    break
  fi
  [ "$(json steps.json '(lambda s: s["issued"] == s["scheduled"] == 2000 and s["answered"] >= 1900 and s["late_client"] + s["late_held"] > 20)(j["steps"][0])')" = True ] || late_only=no
  echo "attempt $attempt: step 1 kept_up '$first' ($reason1): $(json steps.json 'j["steps"][0]')"
done
if [ -n "$kept" ]; then
  ok "--rate-steps 2k,3000k: step 1 kept up, step 2 did not (attempt $kept)"
elif [ "$second" = False ] && [ "$late_only" = yes ]; then
  echo "NOTE (not failed): step 1 missed 5 times, each time only by sends over 1 ms late on this busy machine" >&2
elif [ "$second" = False ]; then
  fail "--rate-steps 2k,3000k: step 1 never kept up, and not only by late sends"
fi
if [ -s steps.json ]; then
  if [ "$(json steps.json 'j["kept_up"]')" != False ]; then fail "the run's kept_up is not False with step 2 missed"; fi
  if [ "$(json steps.json 'j["steps"][1]["reason"] in ("target_too_slow", "client_behind_schedule")')" != True ]; then
    fail "step 2 has no reason: $(json steps.json 'j["steps"][1]')"
  fi
  if ! grep -Eq '^  2 .*could not keep up: (target too slow|client behind schedule)$' steps.out; then
    fail "the summary's step 2 row does not say it could not keep up, and why:"
    cat steps.out >&2
  fi
  if ! grep -q '^  COULD NOT KEEP UP: ' steps.out; then fail "the summary does not say the run could not keep up"; fi
  for row in 'requested rate' 'issued rate' 'answered rate'; do
    if ! grep -q "^  $row " steps.out; then fail "the summary has no '$row' row"; fi
  done
  # The steps as scheduled: 1 s each, back to back, and the config's duration is their total.
  if [ "$(json steps.json '[(s["start_s"], s["duration_s"]) for s in j["steps"]]')" != "[(0.0, 1.0), (1.0, 1.0)]" ] ||
    [ "$(json steps.json 'j["config"]["duration_s"]')" != 2.0 ]; then
    fail "steps' start_s/duration_s or config.duration_s wrong: $(json steps.json '[(s["start_s"], s["duration_s"]) for s in j["steps"]], j["config"]')"
  fi
  if [ "$(json steps.json 'all(s["scheduled"] >= s["issued"] >= s["answered"] for s in j["steps"]) and j["steps"][0]["scheduled"] == 2000')" != True ]; then
    fail "step counts inconsistent: $(json steps.json 'j["steps"]')"
  else
    ok "steps: scheduled >= issued >= answered, 2000 scheduled in the 2k step, rates and reason in the summary"
  fi
fi

# --- -d N is N seconds (wrk), -z is --duration (ghz) -------------------------------------------
for flag in -d -z; do
  run_load "dur$flag" -c 1 "$flag" 1 --warmup 0 --json "dur$flag.json" "ringrpc://127.0.0.1:$port/echo"
  measured=$(json "dur$flag.json" 'j["measured_s"]')
  if [ $rc -ne 0 ] || [ "$(json "dur$flag.json" '(j["config"]["depth"], j["config"]["duration_s"])')" != "(1, 1.0)" ]; then
    fail "$flag 1: exit $rc, config $(json "dur$flag.json" 'j["config"]')"
  elif ! python3 -c "import sys; sys.exit(not 0.9 <= float('$measured') <= 2.0)"; then
    fail "$flag 1 measured $measured s, expected about 1"
  elif grep -q warning "dur$flag.err"; then
    fail "$flag 1 warned: $(cat "dur$flag.err")"
  else
    ok "$flag 1: one second ($measured s measured), depth 1"
  fi
done

# --- --latency (wrk): accepted, with a note; comma-separated --fail-if; bytes/s ---------------
run_load habits -c 1 -d 1 --warmup 0 --latency --fail-if 'p99>1ns,errors>0' --json habits.json \
  "ringrpc://127.0.0.1:$port/echo"
if [ $rc -ne 4 ]; then
  fail "--latency --fail-if 'p99>1ns,errors>0' exited $rc, expected 4"
  cat habits.err >&2
elif ! grep -q '^ringrpc-load: note: --latency' habits.err; then
  fail "--latency gave no note: $(cat habits.err)"
elif ! grep -Eq 'p99>1ns +.* FAILED' habits.out || ! grep -Eq 'errors>0 +.* passed' habits.out; then
  fail "comma-separated --fail-if: not two verdicts"
  cat habits.out >&2
else
  ok "--latency noted; --fail-if 'p99>1ns,errors>0': two verdicts, exit 4"
fi
if ! grep -Eq '^  sent +[0-9.]+ [KMG]?i?B/s$' habits.out || ! grep -Eq '^  received +[0-9.]+ [KMG]?i?B/s$' habits.out; then
  fail "no bytes/s rows in the summary:"
  cat habits.out >&2
elif [ "$(json habits.json 'j["bytes"]["sent"] > 0 and j["bytes"]["received"] > 0 and j["bytes"]["received_per_sec"] > 0')" != True ]; then
  fail "JSON bytes: $(json habits.json 'j.get("bytes")')"
elif [ "$(json habits.json 'all(s["width_s"] > 0 for s in j["per_second"]) and len(j["per_second"]) >= 1')" != True ]; then
  fail "per_second buckets without width_s: $(json habits.json 'j["per_second"]')"
else
  ok "bytes/s sent and received in the summary and JSON; per-second buckets carry width_s"
fi

# --- an interrupted run: the last second is partial everywhere, the title says how long it ran --
"$load" -c 2 -R 1k -d 30s --warmup 0 --json int.json --hdr-log int.hlog --plot int.svg \
  "ringrpc://127.0.0.1:$port/echo" >int.out 2>int.err &
lpid=$!
pids="$pids $lpid"
sleep 1.6
kill -INT "$lpid"
wait_exit "$lpid" 100
wait "$lpid"
check=$(json int.json '(lambda last, m: 0 < last["width_s"] < 1 and abs(last["t_s"] - m) < 1e-6 and abs(j["steps"][0]["duration_s"] - m) < 1e-6 and j["config"]["duration_s"] == 30.0)(j["per_second"][-1], j["measured_s"])')
measured=$(json int.json 'round(j["measured_s"], 2)')
last_width=$(tail -n 1 int.hlog | cut -d, -f2)
if [ "$check" != True ]; then
  fail "SIGINT: the JSON's last bucket, step or duration does not match the measured time: $(json int.json '(j["measured_s"], j["per_second"][-1], j["steps"], j["config"]["duration_s"])')"
elif ! python3 -c "import sys; sys.exit(not 0 < float('$last_width') < 1)"; then
  fail "SIGINT: the --hdr-log's last interval is $last_width s wide, not a part of a second"
elif ! grep -q 'class="partial"' int.svg; then
  fail "SIGINT: the plot does not mark the partial last second"
elif ! grep 'class="title"' int.svg | grep -q "$(python3 -c "print('%.3g s' % float('$measured'))")<"; then
  fail "SIGINT: the plot's title does not give the measured $measured s: $(grep 'class="title"' int.svg)"
else
  ok "SIGINT after 1.6 s: last bucket $last_width s wide in the JSON, the log and the plot; title ${measured} s"
fi

if [ $failures -ne 0 ]; then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "all checks passed"
exit 0
