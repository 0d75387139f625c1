#!/usr/bin/env bash
# ringrpc-load --stream against ringrpc-server's built-in echo_stream (issue 34): the closed loop
# (-c streams, -P messages in flight on each), the open loop (-R messages/s in total), what it
# refuses before connecting, and a stream the server refuses (a unary method, an unknown one, a
# server stream opened as bidi) stopped with the server's own words. Counts only, never timings:
# the machine is shared.
# Usage: load_stream_test.sh PATH/TO/ringrpc-load PATH/TO/ringrpc-server
# Exit 77 (skipped) when the server cannot start because io_uring is unavailable.
set -u

load=${1:?usage: $0 ringrpc-load ringrpc-server}
server=${2:?usage: $0 ringrpc-load ringrpc-server}

# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
test_init load_stream
unset RINGRPC_TOKEN
command -v python3 >/dev/null || { echo "python3 not found: skipped"; exit 77; }

# expect_usage NAME PATTERN ARGS...: exit 2 with PATTERN (grep -E) on stderr, before connecting.
expect_usage() {
  local name=$1 pattern=$2
  shift 2
  run_load "$name" "$@"
  if [ "$rc" -ne 2 ] || ! grep -Eq -- "$pattern" "$work/$name.err"; then
    fail "$*: exit $rc, expected 2 and /$pattern/:"; cat "$work/$name.err" >&2
  else
    ok "$* -> 2: $(head -n 1 "$work/$name.err")"
  fi
}

expect_usage scheme "--stream goes with ringrpc:// and grpc:// targets" --stream http://127.0.0.1:1/
expect_usage percall "cannot go with --new-conn-per-call" --stream --new-conn-per-call ringrpc://127.0.0.1:1/echo_stream
expect_usage mix "cannot go with --mix" --stream --mix a,b ringrpc://127.0.0.1:1/echo_stream
expect_usage typed "cannot go with --method" --stream --method A.b ringrpc://127.0.0.1:1/A.b

start_server "$work/server" "$server" --port 0 --readers 1 --handlers 2 || exit $?
port=$listen_port
cd "$work" || exit 1
url="ringrpc://127.0.0.1:$port/echo_stream"

# --- closed loop: 8 streams, 16 messages in flight on each (the server's window is 16) --------
run_load closed --stream -c 8 -P 16 --duration 3s --json closed.json "$url"
got=$(json_field closed.json '(j["calls_ok"] > 0, j["errors"], j["streams_opened"], j["streams_failed"], j["stream_failures"], type(j["stream_credit_waits"]).__name__, j["config"]["stream"], j["config"]["depth"])')
if [ "$rc" -ne 0 ] || [ "$got" != "(True, {}, 8, 0, {}, 'int', True, 16)" ]; then
  fail "closed loop: exit $rc, (calls_ok > 0, errors, streams_opened, streams_failed, stream_failures, credit waits type, stream, depth) = $got"
  cat closed.err closed.out >&2
else
  ok "closed loop: $(json_field closed.json 'j["calls_ok"]') messages echoed on 8 streams, none failed"
fi
for key in latency_us spectrum per_second; do
  [ -n "$(json_field closed.json "j['$key']")" ] || fail "closed.json has no \"$key\""
done
[ "$(json_field closed.json 'j["latency_us"]["p50"] <= j["latency_us"]["p99"] <= j["latency_us"]["max"]')" = True ] ||
  fail "closed.json's latency_us is not ordered"
if ! grep -q 'streams opened  *8$' closed.out || ! grep -q 'streams failed  *0$' closed.out ||
  ! grep -q 'credit waits  *[0-9]' closed.out; then
  fail "the summary does not show the streams:"; cat closed.out >&2
fi

# More in flight than the server's window of 16: the rest wait for its credit, nothing breaks.
run_load deep --stream -c 2 -P 64 --duration 1s --warmup 0 --json deep.json "$url"
expect_run deep '(j["calls_ok"] > 0, j["errors"], j["streams_failed"], j["stream_credit_waits"] >= 2 * 48)' \
  "(True, {}, 0, True)" "-P 64 on a window of 16: messages wait for credit (counted), no error"

# -n counts messages; --verify checks each echo; templates render per message.
run_load count --stream -c 2 -P 4 -n 1000 --verify --json count.json "$url"
expect_run count '(j["calls_ok"], j["errors"], j["streams_opened"], j["streams_failed"], j["config"]["count"], j["config"]["verify"])' \
  "(1000, {}, 2, 0, 1000, True)" "-n 1000 --verify: 1000 messages echoed exact"
run_load tpl --stream -c 2 -P 4 --duration 1s --warmup 0 --template 'm{seq}-{random:100}' --json tpl.json "$url"
expect_run tpl '(j["calls_ok"] > 0, j["errors"])' "(True, {})" "--template renders each message"

# --- open loop: 2,000 messages/s in total over 4 streams, every one sent and answered ----------
run_load open --stream -c 4 -P 8 -R 2000 --duration 2s --json open.json "$url"
# Only the schedule is exact: on a loaded machine the client may fall behind it at the end, and a
# reply to a message due in the last moment may come after the window closed. What holds is
# answered <= issued <= scheduled.
got=$(json_field open.json '[(s["scheduled"], s["scheduled"] >= s["issued"] >= 0.98 * s["scheduled"], s["issued"] >= s["answered"] >= 0.9 * s["scheduled"], j["errors"], j["streams_opened"], j["streams_failed"], j["config"]["loop"]) for s in j["steps"][:1]][0]')
if [ "$rc" -ne 0 ] || [ "$got" != "(4000, True, True, {}, 4, 0, 'open')" ]; then
  fail "open loop: exit $rc, (scheduled, issued >= 98 %, answered >= 90 %, errors, streams_opened, streams_failed, loop) = $got"
  cat open.err open.out >&2
else
  ok "open loop -R 2000 for 2 s: 4000 scheduled, $(json_field open.json 'j["steps"][0]["issued"]') issued, $(json_field open.json 'j["steps"][0]["answered"]') answered, on 4 streams"
fi
[ -n "$(json_field open.json 'j["service_latency_us"]["p99"]')" ] || fail "open.json has no service_latency_us"

# --- streams the server refuses: stopped early (5) with the server's message ------------------
for case in "echo|is not a stream; call it with Request" "nosuch|no method named 'nosuch'" \
  "generate|is a server stream"; do
  method=${case%%|*} words=${case#*|}
  run_load "refused_$method" --stream -c 2 -P 4 --duration 5s "ringrpc://127.0.0.1:$port/$method"
  if [ "$rc" -ne 5 ] || ! grep -q "the server refused the stream: .*$words" "refused_$method.err"; then
    fail "--stream to '$method': exit $rc, expected 5 and the server's \"$words\":"; cat "refused_$method.err" >&2
  else
    ok "--stream to '$method' -> 5: $(grep 'refused' "refused_$method.err")"
  fi
done

# --- a server killed mid-run: its streams are lost connections (not "no_end"), exit 3 --------
# A second server, killed after 1 s and started again on its port: the client's reconnections
# count each lost stream as it replaces it. Should the port not be free again at once, the
# streams are counted lost at the run's end instead; both are "connection_lost".
start_server "$work/victim" "$server" --port 0 --readers 1 --handlers 1 || exit $?
victim=$server_pid vport=$listen_port
timeout 30 "$load" --stream -c 2 -P 4 --duration 3s --warmup 0 --json killed.json \
  "ringrpc://127.0.0.1:$vport/echo_stream" >killed.out 2>killed.err &
loadpid=$!
sleep 1
kill -KILL "$victim"
wait "$victim" 2>/dev/null
start_server "$work/revived" "$server" --port "$vport" --readers 1 --handlers 1 || echo "the port was not free again: no restart"
wait "$loadpid"
rc=$?
got=$(json_field killed.json '(j["streams_failed"], j["stream_failures"], j["streams_opened"] >= j["streams_failed"])')
if [ "$rc" -ne 3 ] || [ "$got" != "(2, {'connection_lost': 2}, True)" ]; then
  fail "server killed mid-run: exit $rc, (streams_failed, stream_failures, opened >= failed) = $got, expected 3 and 2 lost:"
  cat killed.err killed.out >&2
else
  ok "server killed mid-run -> 3: streams_opened $(json_field killed.json 'j["streams_opened"]'), 2 failed as connection_lost"
fi

# The server is still well after all that.
run_load after --stream -c 1 -P 1 --duration 500ms --warmup 0 --json after.json "$url"
expect_run after '(j["calls_ok"] > 0, j["streams_opened"])' "(True, 1)" "the server still streams afterwards"

[ "$failures" -eq 0 ] || exit 1
echo "all load_stream checks passed"
