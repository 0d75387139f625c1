#!/usr/bin/env bash
# ringrpc-load against targets it could not reach, and what the target spent:
#   - a ringrpc-server that wants a bearer token, with -H 'authorization: Bearer ...' and with
#     RINGRPC_TOKEN (before, -H was refused for ringrpc:// and every call was unauthenticated);
#   - an HTTP server whose chunked body never ends, under a memory cap: the calls fail as
#     reply_too_large once a body passes --max-body (before, up to 64 MiB per connection);
#   - --server-pid and --server-metrics: the server's CPU per call and cores in JSON and summary.
# Usage: load_reach_test.sh PATH/TO/ringrpc-load PATH/TO/ringrpc-server
# Exit 77 (skipped) when the server cannot start because io_uring is unavailable.
set -u

load=${1:?usage: $0 ringrpc-load ringrpc-server}
server=${2:?usage: $0 ringrpc-load ringrpc-server}

# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
test_init load_reach
unset RINGRPC_TOKEN
command -v python3 >/dev/null || { echo "python3 not found: skipped"; exit 77; }

token=load-reach-test-0123456789abcdef
printf 'tester %s\n' "$token" >"$work/tokens"
chmod 600 "$work/tokens"
start_server "$work/server" "$server" --port 0 --readers 1 --handlers 2 --tokens-file "$work/tokens" \
  --admin-port 0 || exit $?
spid=$server_pid port=$listen_port
wait_for "$work/server.out" '^admin on http://127\.0\.0\.1:[0-9]+/$' ||
  { echo "ringrpc-server printed no 'admin on' line within 5 s" >&2; exit 1; }
admin=$(sed -n 's|^admin on http://127\.0\.0\.1:\([0-9][0-9]*\)/$|\1|p' "$work/server.out")
cd "$work" || exit 1
url="ringrpc://127.0.0.1:$port/echo"

# expect_clean NAME: the run NAME exited 0 with calls answered and no error.
expect_clean() {
  ok_calls=$(json_field "$1.json" 'j["calls_ok"]')
  errors=$(json_field "$1.json" 'j["errors"]')
  if [ "$rc" -ne 0 ] || [ "${ok_calls:-0}" -eq 0 ] || [ "$errors" != "{}" ]; then
    fail "$1: exit $rc, calls_ok ${ok_calls:-none}, errors ${errors:-none}"
    cat "$1.err" >&2
  else
    ok "$1: $ok_calls calls ok, no error"
  fi
}

# --- a token-protected ringrpc-server ------------------------------------------------------
run_load header --duration 1s --warmup 0 -c 2 -H "Authorization: Bearer $token" --json header.json "$url"
expect_clean header
if grep -q "$token" header.out header.err header.json; then
  fail "the token given with -H is written out with the results"
else
  ok "the summary and JSON show -H authorization without its value"
fi

export RINGRPC_TOKEN="$token"  # from here to the run without a token
run_load envtoken --duration 1s --warmup 0 -c 2 --json envtoken.json "$url"
expect_clean envtoken

# -H's authorization wins over RINGRPC_TOKEN, as the one given on the command line.
run_load wrongheader --duration 500ms --warmup 0 -c 1 -H 'authorization: Bearer wrong-token-xyz' \
  --json wrongheader.json "$url"
if grep -q unauthenticated wrongheader.out wrongheader.err wrongheader.json 2>/dev/null; then
  ok "-H authorization replaces RINGRPC_TOKEN's (the wrong one was sent: unauthenticated)"
else
  fail "-H with a wrong token beside a right RINGRPC_TOKEN was not answered unauthenticated"
  cat wrongheader.err >&2
fi

# --- the server's CPU in the report ----------------------------------------------------------
# expect_cost NAME: the run's JSON has positive server CPU figures, the summary a server cpu row.
expect_cost() {
  cores=$(json_field "$1.json" 'j["server_cost"]["cores"] > 0 and j["server_cost"]["cpu_us_per_call"] > 0 and len(j["server_cost"]["per_second_cores"]) > 0')
  if [ "$rc" -ne 0 ] || [ "$cores" != True ]; then
    fail "$1: exit $rc, server_cost $(json_field "$1.json" 'j.get("server_cost")')"
    cat "$1.err" >&2
  elif ! grep -q 'server cpu' "$1.out"; then
    fail "$1: the summary has no 'server cpu' row"
  else
    ok "$1: server $(json_field "$1.json" 'round(j["server_cost"]["cores"], 2)') cores, $(json_field "$1.json" 'round(j["server_cost"]["cpu_us_per_call"], 1)') us/call"
  fi
}
run_load pid --duration 2s --warmup 500ms -c 2 --server-pid "$spid" --json pid.json "$url"
expect_cost pid
run_load metrics --duration 2s --warmup 500ms -c 2 \
  --server-metrics "http://127.0.0.1:$admin/metrics" --json metrics.json "$url"
expect_cost metrics

# Without the token, last (failed authentications count against this address's budget).
unset RINGRPC_TOKEN
run_load notoken --duration 500ms --warmup 0 -c 1 --json notoken.json "$url"
if grep -q unauthenticated notoken.out notoken.err notoken.json 2>/dev/null; then
  ok "without a token the server answers unauthenticated (it does want one)"
else
  fail "the server did not refuse calls without a token: the token runs above prove nothing"
fi

# --- an endless chunked body -------------------------------------------------------------------
cat >endless.py <<'EOF'
import socket, threading, time
# Every request is answered with a chunked body that never ends; the server lives 20 s at most.
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(16)
print(s.getsockname()[1], flush=True)
chunk = (b"1000\r\n" + b"x" * 0x1000 + b"\r\n") * 16
def serve(c):
    try:
        c.recv(4096)
        c.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        end = time.time() + 20
        while time.time() < end:
            c.sendall(chunk)
    except OSError:
        pass
    c.close()
def accept():
    while True:
        threading.Thread(target=serve, args=(s.accept()[0],), daemon=True).start()
threading.Thread(target=accept, daemon=True).start()
time.sleep(20)
EOF
python3 endless.py >endless.port &
pids="$pids $!"
wait_for endless.port '[0-9]'
hport=$(cat endless.port)
# 128 MiB of address space: enough for the run with 1 MiB bodies, not for 64 MiB per connection.
# Not under sanitizers: their runtimes reserve terabytes of address space and die under such a
# cap (the release stage has it; there the 1 s run and --max-body bound the memory anyway).
cap=
if command -v prlimit >/dev/null && ! sanitized "$load"; then
  cap="prlimit --as=134217728"
fi
rc=0
$cap timeout 30 "$load" --duration 1s --warmup 0 -c 4 --json body.json "http://127.0.0.1:$hport/" >body.out 2>body.err || rc=$?
too_large=$(json_field body.json 'j["errors"].get("reply_too_large", 0)')
if [ "${too_large:-0}" -gt 0 ] && [ "$(json_field body.json 'list(j["errors"])')" = "['reply_too_large']" ]; then
  ok "an endless chunked body: $too_large calls failed as reply_too_large, nothing else${cap:+, under a 128 MiB cap}"
else
  fail "an endless chunked body: exit $rc, errors $(json_field body.json 'j["errors"]')"
  cat body.err >&2
fi
run_load smallbody --duration 500ms --warmup 0 -c 1 --max-body 10k --json smallbody.json "http://127.0.0.1:$hport/"
if [ "$(json_field smallbody.json 'j["errors"].get("reply_too_large", 0) > 0')" = True ]; then
  ok "--max-body 10k: reply_too_large"
else
  fail "--max-body 10k: errors $(json_field smallbody.json 'j["errors"]')"
fi

[ "$failures" -eq 0 ] || exit 1
echo "all load_reach checks passed"
