#!/usr/bin/env bash
# ringrpc-call against gen_test_server (gen_test.fbs's services): list, describe, call, with the
# schema from reflection and from --schema, and every documented exit status (docs/services.md):
# 0 ok, 1 server error status, 2 usage/schema/JSON, 3 connection/timeout; a server's control
# bytes never reach the terminal raw; describe works for every name list shows (ringrpc-server's
# untyped methods too); peers that are not ringrpc servers (fakes speaking HTTP, Redis, nothing;
# a real redis-server when installed) are named within seconds. Then ringrpc-load --method,
# which converts its JSON the same way.
# Usage: call_cli_test.sh ringrpc-call gen_test_server ringrpc-load gen_test.fbs ringrpc-server
# Exit 77 (skipped) when the server cannot start because io_uring is unavailable.
set -u

call=${1:?usage: $0 ringrpc-call gen_test_server ringrpc-load gen_test.fbs ringrpc-server}
server=${2:?}
load=${3:?}
schema=${4:?}
stock_server=${5:?}

# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
load_timeout=60  # some runs here take longer
test_init call_cli

# run NAME ARGS...: ringrpc-call (bounded) with stdout/stderr in $work/NAME.{out,err}, status in $rc.
run() {
  name=$1
  shift
  timeout 30 "$call" "$@" <"${stdin:-/dev/null}" >"$work/$name.out" 2>"$work/$name.err"
  rc=$?
}

# expect NAME STATUS STREAM PATTERN ARGS...: exit STATUS and PATTERN (grep -E) in out or err.
expect() {
  name=$1
  want=$2
  stream=$3
  pattern=$4
  shift 4
  run "$name" "$@"
  if [ $rc -ne "$want" ]; then
    fail "ringrpc-call $* exited $rc, expected $want"
    cat "$work/$name.out" "$work/$name.err" >&2
  elif ! grep -Eq -- "$pattern" "$work/$name.$stream"; then
    fail "ringrpc-call $*: $stream does not match /$pattern/:"
    cat "$work/$name.$stream" >&2
  else
    ok "ringrpc-call $* -> $rc"
  fi
}

# --- usage, before any server ----------------------------------------------------------------
run help --help
if [ $rc -ne 0 ] || ! grep -q 'Exit status' "$work/help.out"; then fail "--help exited $rc or lacks the exit statuses"; fi
expect noargs 2 err 'required'
expect badaddr 2 err "address '127.0.0.1' is not HOST:PORT" 127.0.0.1 list
expect badport 2 err 'port is not in 1..65535' 127.0.0.1:99999 list
expect badcmd 2 err "unknown command 'frobnicate'" 127.0.0.1:1 frobnicate
expect noname 2 err 'call needs a name' 127.0.0.1:1 call
expect notmethod 2 err "'Echo' is not Service.Method" 127.0.0.1:1 call Echo --schema "$schema"
expect badtimeout 2 err 'duration' 127.0.0.1:1 list --timeout 10q
expect noschema 2 err 'cannot read schema' 127.0.0.1:1 list --schema "$work/missing.fbs"
printf 'table T { x: nosuchtype; }\n' >"$work/broken.fbs"
expect badschema 2 err 'does not parse.*nosuchtype' 127.0.0.1:1 list --schema "$work/broken.fbs"
expect refused 3 err 'Connection refused' 127.0.0.1:1 list
# Addresses: ringrpc:// is HOST:PORT; another scheme or a path is refused with what to give.
expect httpscheme 2 err "'http://' is not a scheme of ringrpc-call; .*ringrpc://HOST:PORT" http://127.0.0.1:1 list
expect rediscan 2 err "'redis://' is not a scheme.*ringrpc-load can load redis:// servers" redis://127.0.0.1:1 list
expect pathgiven 2 err 'has no path; the method is an argument: ringrpc-call ringrpc://127.0.0.1:1 call echo' \
  ringrpc://127.0.0.1:1/echo list
expect ringrpcscheme 3 err 'connect 127.0.0.1:1' ringrpc://127.0.0.1:1 list

# --- a local schema needs no server for list and describe ------------------------------------
expect locallist 0 out '^TestService\.Echo +ringrpc\.test\.EchoRequest -> ringrpc\.test\.EchoReply  // Echoes every field\.$' \
  127.0.0.1:1 list --schema "$schema"
expect localdescribe 0 out '^struct ringrpc\.test\.Point \{$' 127.0.0.1:1 describe TestService.Echo --schema "$schema"

# --- against a server with reflection --------------------------------------------------------
start_server "$work/server.reflecting" "$server" || exit $?
sport=$listen_port
addr=127.0.0.1:$sport
echo "gen_test_server listening on port $sport"

expect list 0 out '^Counter\.Next +ringrpc\.test\.Empty -> ringrpc\.test\.EchoReply$' "$addr" list
if [ "$(wc -l <"$work/list.out")" -ne 8 ]; then fail "list printed $(wc -l <"$work/list.out") lines, expected 8"; fi
# The method doc strings reflection carries.
grep -Eq '^TestService\.Sleep +ringrpc\.test\.SleepRequest -> ringrpc\.test\.EchoReply  // Sleeps, then answers\.$' \
  "$work/list.out" || fail "list shows no doc string for TestService.Sleep"
# describe knows every name list shows.
for n in $(cut -d' ' -f1 "$work/list.out"); do
  expect "describe_$n" 0 out "^  [A-Za-z]+\\(" "$addr" describe "$n"
done

expect describe 0 out 'Echo\(ringrpc\.test\.EchoRequest\): ringrpc\.test\.EchoReply;  // TestService\.Echo, id 0x[0-9a-f]{8}' \
  "$addr" describe TestService.Echo
for want in '^table ringrpc\.test\.EchoRequest \{$' '^  color: ringrpc\.test\.Color = Green;$' \
  '^enum ringrpc\.test\.Color : ubyte \{ Red = 0, Green = 1, Blue = 2 \}$' '^  /// Echoes every field\.$'; do
  grep -Eq -- "$want" "$work/describe.out" || fail "describe TestService.Echo lacks /$want/"
done
expect describetype 0 out '^struct ringrpc\.test\.Point \{$' "$addr" describe ringrpc.test.Point
expect describeservice 0 out '^  Next\(ringrpc\.test\.Empty\)' "$addr" describe Counter
expect describenone 2 err "declares nothing named 'Nope'" "$addr" describe Nope

expect call 0 out '^  "text": "hi",$' "$addr" call TestService.Echo \
  -d '{"text": "hi", "number": 5, "point": {"x": 1, "y": 2.5}, "color": "Blue", "values": [1.5]}'
for want in '"number": 5' '"y": 2.5' '"color": "Blue"' '"calls": 1'; do
  grep -q -- "$want" "$work/call.out" || fail "the reply lacks $want"
done
expect compact 0 out '^\{"text": "hi","color": "Green","calls": 1\}$' "$addr" call TestService.Echo --compact -d '{text: "hi"}'
expect defaults 0 out '"number": 0' "$addr" call TestService.Echo --compact --emit-defaults -d '{"text": "hi"}'
printf '{"text": "from a file"}' >"$work/req.json"
expect datafile 0 out '"from a file"' "$addr" call TestService.Echo --compact -d @"$work/req.json"
stdin="$work/req.json"
expect datastdin 0 out '"from a file"' "$addr" call TestService.Echo --compact -d @-
stdin=
expect qualified 0 out '"calls": 1' "$addr" call ringrpc.test.TestService.Echo
expect emptydata 0 out '"color": "Green"' "$addr" call TestService.Echo

# Errors: the server's (1), the schema's and the JSON's (2), the transport's (3).
expect servererror 1 err '^ringrpc-call: TestService\.Fail failed: bad_request: boom$' \
  "$addr" call TestService.Fail -d '{"code": 2, "message": "boom"}'
# A hostile message: set the title (OSC ... BEL), clear the screen (CSI 2J, and C1 CSI as UTF-8),
# return to the line start to draw a fake prompt. Escaped, not sent to the terminal.
expect hostile 1 err 'bad_request: a\\x1b\]0;owned\\x07b\\x1b\[2J\\xc2\\x9b2J\\rfake\$ \\x7f' \
  "$addr" call TestService.Fail -d '{"code": 2, "message": "a\u001b]0;owned\u0007b\u001b[2J\u009b2J\rfake$ \u007f"}'
if od -An -c "$work/hostile.err" | grep -Eq '033|\\a|\\r|177|302 233'; then
  fail "control bytes of the server's message reached stderr raw: $(od -An -c "$work/hostile.err")"
fi
# The same bytes in a typed reply: still JSON, as escapes.
expect hostilejson 0 out '"text": "\\u001b\]0;owned\\u0007 \\u009b \\u007f"' "$addr" call TestService.Echo \
  -d '{"text": "\u001b]0;owned\u0007 \u009b \u007f"}'
if od -An -c "$work/hostilejson.out" | grep -Eq '033|\\a|177|302 233'; then
  fail "control bytes of a reply reached stdout raw: $(od -An -c "$work/hostilejson.out")"
fi
expect unimplemented 1 err 'unknown_method: TestService\.Unimplemented is not implemented' \
  "$addr" call TestService.Unimplemented
expect unknownmethod 2 err "unknown method 'TestService\.Nope'; TestService has Echo, Fail, Sleep, Unimplemented" \
  "$addr" call TestService.Nope
expect unknownservice 2 err "the server serves no service named 'Nope'" "$addr" call Nope.Echo
expect badjson 2 err 'the JSON is not a valid ringrpc\.test\.EchoRequest' "$addr" call TestService.Echo -d '{"text":'
expect wrongfield 2 err 'unknown field: nme' "$addr" call TestService.Echo -d '{"nme": "x"}'
expect wrongtype 2 err 'not a valid ringrpc\.test\.EchoRequest' "$addr" call TestService.Echo -d '{"number": "many"}'
expect timeout 3 err 'TestService\.Sleep timed out after 200 ms' "$addr" call TestService.Sleep -d '{"ms": 3000}' --timeout 200ms

# --schema instead of reflection, .fbs and the .bfbs reflection serves.
expect schemacall 0 out '"calls": 1' "$addr" call TestService.Echo --schema "$schema" -d '{"text": "x"}'

# Typed streams (gen_test.fbs's Streamer): the kind in list and describe, JSON per message.
grep -Eq '^Streamer\.Generate +ringrpc\.test\.StreamRequest -> stream ringrpc\.test\.StreamReply  //' "$work/list.out" ||
  fail "list does not show Streamer.Generate as a server stream"
grep -Eq '^Streamer\.Echo +stream ringrpc\.test\.StreamRequest -> stream ringrpc\.test\.StreamReply  //' "$work/list.out" ||
  fail "list does not show Streamer.Echo as a bidi stream"
expect describestream 0 out '^  Collect\(ringrpc\.test\.StreamRequest\): ringrpc\.test\.StreamReply \(streaming: "client"\);  // Streamer\.Collect' \
  "$addr" describe Streamer.Collect
expect typedgenerate 0 out '^\{"index": 2,"text": "hi"\}$' "$addr" call Streamer.Generate -d '{"count": 3, "text": "hi"}'
[ "$(cat "$work/typedgenerate.out")" = "$(printf '{"text": "hi"}\n{"index": 1,"text": "hi"}\n{"index": 2,"text": "hi"}')" ] ||
  fail "call Streamer.Generate printed '$(cat "$work/typedgenerate.out")', expected three JSON lines"
printf '{"text": "one"}\n{"text": "two"}\n{text: "three"}\n' >"$work/typed.in"
stdin="$work/typed.in" expect typedecho 0 out '^\{"index": 2,"text": "three"\}$' "$addr" call Streamer.Echo --stdin
[ "$(wc -l <"$work/typedecho.out")" = 3 ] || fail "call Streamer.Echo --stdin printed $(wc -l <"$work/typedecho.out") lines, expected 3"
stdin="$work/typed.in" expect typedcollect 0 out '^\{"index": 3,"text": "three"\}$' "$addr" call Streamer.Collect --stdin
expect typedechodata 0 out '^\{"text": "x"\}$' "$addr" call Streamer.Echo -d '{"text": "x"}'
printf '{"text": "one"}\n{"text":\n' >"$work/badtyped.in"
stdin="$work/badtyped.in" expect typedbadline 2 err 'not a valid ringrpc\.test\.StreamRequest' "$addr" call Streamer.Echo --stdin
stdin="$work/typed.in" expect typedserverstdin 2 err "'Streamer\.Generate' is a server stream" \
  "$addr" call Streamer.Generate --stdin
stdin="$work/typed.in" expect typedunarystdin 2 err "is a unary call" "$addr" call TestService.Echo --stdin
# Blank lines are skipped on a typed stream; a client stream that ends with no answer prints nothing.
printf '{"text": "one"}\n\n  \n{"text": "two"}\n' >"$work/blank.in"
stdin="$work/blank.in" expect typedblank 0 out '^\{"index": 2,"text": "two"\}$' "$addr" call Streamer.Collect --stdin
stdin=/dev/null run typednoanswer "$addr" call Streamer.Collect --stdin
[ $rc -eq 0 ] && [ ! -s "$work/typednoanswer.out" ] ||
  fail "call Streamer.Collect with no message: exit $rc, printed '$(cat "$work/typednoanswer.out")'; expected 0 and nothing"
# A schema without the streaming kinds: the server's refusal names the kind, and the stream opens.
sed 's/ (streaming: "[a-z]*")//' "$schema" >"$work/nokinds.fbs"
expect typedrefusal 0 out '^\{"index": 1,"text": "k"\}$' \
  "$addr" call Streamer.Generate --schema "$work/nokinds.fbs" -I "$(dirname "$schema")" -d '{"count": 2, "text": "k"}'
expect typedschema 0 out '^\{"index": 1,"text": ""\}$' "$addr" call Streamer.Generate --schema "$schema" -d '{"count": 2}'
stdin=

# --- a server without reflection -------------------------------------------------------------
start_server "$work/server.bare" "$server" --no-reflection || exit $?
sport=$listen_port
bare=$sport
expect noreflection 2 err 'the server has no reflection endpoint .*; give the schema with --schema FILE' \
  127.0.0.1:"$bare" list
expect noreflectioncall 2 err 'no reflection endpoint' 127.0.0.1:"$bare" call TestService.Echo
expect bareschema 0 out '"text": "x"' 127.0.0.1:"$bare" call TestService.Echo --compact --schema "$schema" -d '{"text": "x"}'

# --- ringrpc-server: untyped methods, listed with their doc strings and described -------------
stock=
if start_server "$work/stock" "$stock_server" --port 0; then stock=$listen_port; fi
if [ -z "$stock" ]; then
  fail "ringrpc-server did not start"
else
  expect stocklist 0 out '^echo +bytes -> bytes  // replies with the payload$' 127.0.0.1:"$stock" list
  for n in $(cut -d' ' -f1 "$work/stocklist.out"); do
    expect "stockdescribe_$n" 0 out "^$n\\(bytes\\): bytes( \\(streaming: \"[a-z]+\"\\))?;  // untyped" \
      127.0.0.1:"$stock" describe "$n"
  done
  grep -q '^/// replies with the payload$' "$work/stockdescribe_echo.out" || fail "describe echo shows no doc string"
  grep -q '^generate(bytes): bytes (streaming: "server");' "$work/stockdescribe_generate.out" ||
    fail "describe generate does not show its kind"

  # Streams (docs/services.md, "Streams from the command line"): a message a line, both ways.
  grep -Eq '^generate +bytes -> stream bytes  //' "$work/stocklist.out" || fail "list does not show generate as a server stream"
  grep -Eq '^echo_stream +stream bytes -> stream bytes  //' "$work/stocklist.out" ||
    fail "list does not show echo_stream as a bidi stream"
  expect generate 0 out '^x{16}$' 127.0.0.1:"$stock" call generate -d '1000 16'
  lines=$(grep -c '^x\{16\}$' "$work/generate.out")
  [ "$lines" = 1000 ] && [ "$(wc -l <"$work/generate.out")" = 1000 ] ||
    fail "call generate -d '1000 16' printed $(wc -l <"$work/generate.out") lines ($lines of 16 x), expected 1000"
  printf 'one\ntwo\r\nthree\n' >"$work/lines.in"
  stdin="$work/lines.in" expect echostream 0 out '^one$' 127.0.0.1:"$stock" call echo_stream --stdin
  [ "$(cat "$work/echostream.out")" = "$(printf 'one\ntwo\nthree')" ] ||
    fail "echo_stream --stdin printed '$(cat "$work/echostream.out")', expected one, two, three on their lines"
  expect echostreamdata 0 out '^hi$' 127.0.0.1:"$stock" call echo_stream -d hi
  printf '\001ab\n' >"$work/binary.in"
  stdin="$work/binary.in" expect echostreambinary 0 out '^016162$' 127.0.0.1:"$stock" call echo_stream --stdin
  expect generatehex 0 out '^787878$' 127.0.0.1:"$stock" call generate -d 322033 --hex  # '2 3'
  stdin="$work/lines.in" expect stdinunary 1 err "method 'echo' is not a stream" 127.0.0.1:"$stock" call echo --stdin
  expect stdinanddata 2 err '--stdin and -d exclude each other' 127.0.0.1:"$stock" call echo_stream --stdin -d x
  expect streamtimeout 3 err 'deadline|timed out|timeout' 127.0.0.1:"$stock" call generate -d '100000000 1' --timeout 300ms
  stdin="$work/lines.in" expect stdinserverstream 2 err "'generate' is a server stream: its client sends one request" \
    127.0.0.1:"$stock" call generate --stdin
  # The stream's end (its deadline) while standard input stays open and says nothing: ringrpc-call
  # ends with the stream instead of waiting for a line (timeout's 124 would mean it hung).
  mkfifo "$work/silent"
  sleep 30 >"$work/silent" 2>/dev/null &  # holds the fifo open, writing nothing
  silent_pid=$!
  timeout 20 "$call" 127.0.0.1:"$stock" call echo_stream --stdin --timeout 500ms \
    <"$work/silent" >"$work/quietstdin.out" 2>"$work/quietstdin.err"
  rc=$?
  kill "$silent_pid" 2>/dev/null
  if [ $rc -ne 3 ]; then
    fail "echo_stream --stdin --timeout 500ms with a silent standard input exited $rc, expected 3"
    cat "$work/quietstdin.err" >&2
  else
    ok "a stream's end stops the reading of a silent standard input"
  fi
fi

# --- peers that are not ringrpc servers: named from what they answer, within seconds ---------
# A generous --timeout: a diagnosis that waited for it would run into run's 30 s bound.
fake_peers() {
  python3 - "$@" <<'PY'
import socket, sys, threading, time
# http: answers anything with a 400; redis: like redis-server, silent until a line without a NUL
# byte, then an error or +PONG; silent: reads and never answers; close: hangs up at once. Ends by
# itself after 60 s.
def serve(listener, kind):
    while True:
        conn, _ = listener.accept()
        if kind == "close":
            conn.close()
            continue
        threading.Thread(target=talk, args=(conn, kind), daemon=True).start()
def talk(conn, kind):
    buf = b""
    while True:
        data = conn.recv(4096)
        if not data:
            return
        buf += data
        if kind == "http":
            conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            conn.close()
            return
        if kind == "redis":
            line = buf.split(b"\0")[0]
            if b"\n" in line:
                conn.sendall(b"+PONG\r\n" if line.strip() == b"PING" else b"-ERR unknown command\r\n")
                buf = b""
ports = []
for kind in sys.argv[1:]:
    l = socket.socket()
    l.bind(("127.0.0.1", 0))
    l.listen(8)
    ports.append(str(l.getsockname()[1]))
    threading.Thread(target=serve, args=(l, kind), daemon=True).start()
print(" ".join(ports), flush=True)
time.sleep(60)
PY
}
fake_peers http redis silent close >"$work/fakes.out" 2>"$work/fakes.err" &
pids="$pids $!"
wait_for "$work/fakes.out" '[0-9]'
read -r fhttp fredis fsilent fclose <"$work/fakes.out" || fail "the fake peers did not start: $(cat "$work/fakes.err")"
expect fakehttp 3 err "127.0.0.1:$fhttp is not a ringrpc server: this looks like an HTTP/1.1 server" \
  127.0.0.1:"$fhttp" list --timeout 60s
expect fakeredis 3 err "127.0.0.1:$fredis is not a ringrpc server: this looks like a Redis server \\(it answered \"PING\"" \
  127.0.0.1:"$fredis" call echo -d hello --timeout 60s
expect fakesilent 3 err "echo timed out after 1000 ms; nor did 127.0.0.1:$fsilent answer a ringrpc Ping" \
  127.0.0.1:"$fsilent" call echo -d hello --timeout 1s
expect fakeclose 3 err "also closed a connection of its own without answering a ringrpc Ping: .*try ringrpcs://127.0.0.1:$fclose" \
  127.0.0.1:"$fclose" list --timeout 60s
expect faketls 3 err "127.0.0.1:$fhttp is not a ringrpc server: this looks like an HTTP/1.1 server" \
  ringrpcs://127.0.0.1:"$fhttp" list --insecure --timeout 60s
expect plainfortls 3 err "answered a plaintext ringrpc Ping: it does not speak TLS on this port; try ringrpc://$addr" \
  ringrpcs://"$addr" list --insecure
redis=$(command -v redis-server || true)
if [ -n "$redis" ]; then
  rport=$(free_port)
  "$redis" --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" >"$work/redis.out" 2>&1 &
  pids="$pids $!"
  if wait_port 127.0.0.1 "$rport"; then
    expect realredis 3 err "is not a ringrpc server: this looks like a Redis server" 127.0.0.1:"$rport" call echo \
      -d hello --timeout 60s
  else
    fail "redis-server did not start: $(cat "$work/redis.out")"
  fi
else
  echo "redis-server not installed: the real Redis peer is skipped"
fi

# --- ringrpc-load --method: the JSON converted once, from reflection or --schema --------------
# run_load NAME ARGS...: ringrpc-load (bounded), status in $rc.
run_load typed -n 200 -c 2 -P 2 --method TestService.Echo --data '{"text": "load"}' "ringrpc://$addr"
if [ $rc -ne 0 ] || ! grep -q 'method=TestService.Echo' "$work/typed.out" || ! grep -Eq 'calls ok +200$' "$work/typed.out"; then
  fail "ringrpc-load --method TestService.Echo exited $rc"
  cat "$work/typed.out" "$work/typed.err" >&2
else
  ok "ringrpc-load --method TestService.Echo: 200 calls ok"
fi
run_load typederr -n 20 -c 1 --method TestService.Fail --data '{"code": 2}' "ringrpc://$addr/TestService.Fail"
if [ $rc -ne 3 ] || ! grep -Eq 'bad_request +20$' "$work/typederr.out"; then
  fail "ringrpc-load --method TestService.Fail exited $rc, expected 3 with 20 bad_request"
  cat "$work/typederr.out" "$work/typederr.err" >&2
else
  ok "ringrpc-load --method TestService.Fail: 20 bad_request errors, exit 3"
fi
run_load typedschema -n 20 -c 1 --method TestService.Echo --schema "$schema" "ringrpc://127.0.0.1:$bare"
[ $rc -eq 0 ] || { fail "ringrpc-load --method --schema exited $rc"; cat "$work/typedschema.err" >&2; }
# expect_load_usage ARGS...: ringrpc-load refuses ARGS before running, with status 2 and a message.
expect_load_usage() {
  run_load typedbad -n 5 "$@"
  if [ $rc -eq 2 ] && [ -s "$work/typedbad.err" ]; then
    ok "ringrpc-load $* -> 2: $(head -n 1 "$work/typedbad.err")"
  else
    fail "ringrpc-load $* exited $rc, expected 2"
    cat "$work/typedbad.err" >&2
  fi
}
expect_load_usage --method TestService.Nope "ringrpc://$addr"
expect_load_usage --method Streamer.Echo "ringrpc://$addr"  # a typed stream: not a unary call
grep -q 'Streamer.Echo is a bidi stream method' "$work/typedbad.err" || fail "ringrpc-load does not say Streamer.Echo streams"
expect_load_usage --method TestService.Echo --data '{"nme": 1}' "ringrpc://$addr"
expect_load_usage --method TestService.Echo "ringrpc://127.0.0.1:$bare"
expect_load_usage --data '{}' "ringrpc://$addr/echo"
expect_load_usage --method TestService.Echo -s 10 "ringrpc://$addr"
expect_load_usage --method TestService.Echo "ringrpc://$addr/echo"
expect_load_usage --method TestService.Echo "echo://$addr"
# Placeholders in --data: rendered per call (what the server receives is checked in
# load_template_loopback); a field that cannot hold one is refused at start.
run_load typedtpl -n 100 -c 2 --method TestService.Echo --data '{"text": "u{random:9}", "number": {seq}}' \
  --json "$work/typedtpl.json" "ringrpc://$addr"
if [ $rc -ne 0 ] || ! grep -Eq 'calls ok +100$' "$work/typedtpl.out" || ! python3 -c 'import json, sys
sys.exit("{seq}" not in json.load(open(sys.argv[1]))["config"]["data"])' "$work/typedtpl.json"; then
  fail "ringrpc-load --method with placeholders in --data exited $rc"; cat "$work/typedtpl.out" "$work/typedtpl.err" >&2
else
  ok "ringrpc-load --method --data '{\"number\": {seq}, ...}': 100 calls ok, config.data recorded"
fi
expect_load_usage --method TestService.Echo --data '{"color": {random:3}}' "ringrpc://$addr"
expect_load_usage --method TestService.Echo --data '{"number": {line}}' "ringrpc://$addr"
expect_load_usage --method TestService.Echo --template '{seq}' "ringrpc://$addr"

if [ $failures -ne 0 ]; then
  echo "$failures failure(s)" >&2
  exit 1
fi
echo "all ringrpc-call checks passed"
