#!/usr/bin/env bash
# ringrpc-load --stream against a real gRPC server's bidi method (grpc_echo_server's Echo.Chat,
# libgrpc++'s callback API; issue 34): the closed loop (-c streams, -P messages in flight on
# each), the open loop (-R messages/s in total), -n counted by the server itself, messages larger
# than the server's HTTP/2 window (they wait for its WINDOW_UPDATE, counted as credit waits), a
# stream the server ends with an error status (a stream failure of that kind), one it does not
# serve (stopped early), a server killed mid-run (connection_lost), a stream nghttp2 resets itself
# (the connection ends at once, by the code) and a graceful GOAWAY (half-closed, ended OK,
# reconnected). Counts only, never timings: the machine is shared.
# Usage: load_grpc_stream_test.sh ringrpc-load grpc_echo_server echo.proto
# Exit 77 (skipped) when python3 is missing or io_uring is unusable.
set -u

load=${1:?usage: $0 ringrpc-load grpc_echo_server echo.proto}
grpc_server=${2:?usage}
proto=${3:?usage}

# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
test_init load_grpc_stream
command -v python3 >/dev/null || { echo "python3 not found: skipped"; exit 77; }

start_server "$work/grpc" "$grpc_server" 2 || { fail "grpc_echo_server did not start"; exit 1; }
port=$listen_port
cd "$work" || exit 1
url="grpc://127.0.0.1:$port/ringtest.Echo/Chat"
hello=(--proto "$proto" --data '{"text":"hello"}')

# --- closed loop: 4 streams, 8 messages in flight on each --------------------------------------
run_load closed --stream -c 4 -P 8 --duration 2s "${hello[@]}" --json closed.json "$url"
if [ "$rc" -eq 77 ] || grep -qi "io_uring" closed.err; then echo "io_uring unusable: skipped"; exit 77; fi
got=$(json_field closed.json '(j["calls_ok"] > 0, j["errors"], j["streams_opened"], j["streams_failed"], j["stream_failures"], type(j["stream_credit_waits"]).__name__, j["config"]["stream"])')
if [ "$rc" -ne 0 ] || [ "$got" != "(True, {}, 4, 0, {}, 'int', True)" ]; then
  fail "closed loop: exit $rc, (calls_ok > 0, errors, streams_opened, streams_failed, stream_failures, credit waits type, stream) = $got"
  cat closed.err closed.out >&2
else
  ok "closed loop: $(json_field closed.json 'j["calls_ok"]') messages echoed on 4 gRPC streams, none failed"
fi
# Each message's latency runs from its own send to its own answer (FIFO matching): none is zero,
# and none exceeds the 2 s the run lasted (one timed from a wrong or unset send time would).
[ "$(json_field closed.json '0 < j["latency_us"]["p50"] and j["latency_us"]["max"] < 2e6')" = True ] ||
  fail "closed.json's latency_us is out of (0, 2 s): $(json_field closed.json 'j["latency_us"]')"
grep -q 'streams opened  *4$' closed.out || { fail "the summary does not show the streams:"; cat closed.out >&2; }

# --- open loop: 2,000 messages/s in total over 4 streams, of the empty message (no --proto) ------
# -P 2000 is more than a stream's share of the whole run (6,000 calls with the warm-up, over 4
# streams), so no call ever waits for a free slot: every call due is sent, however late the
# machine lets the tool or the server run (one due before the end goes out after it if need be).
# So issued is exact. Answered is not: it counts replies before the schedule's end, and a busy
# machine may hold the last ones past it; errors {} says every call was answered in the drain.
run_load open --stream -c 4 -P 2000 -R 2000 --duration 2s --json open.json "$url"
got=$(json_field open.json '[(s["scheduled"], s["issued"], s["issued"] >= s["answered"] > 0, j["errors"], j["streams_opened"], j["streams_failed"], j["config"]["loop"]) for s in j["steps"][:1]][0]')
if [ "$rc" -ne 0 ] || [ "$got" != "(4000, 4000, True, {}, 4, 0, 'open')" ]; then
  fail "open loop: exit $rc, (scheduled, issued, issued >= answered > 0, errors, streams_opened, streams_failed, loop) = $got"
  cat open.err open.out >&2
else
  ok "open loop -R 2000 for 2 s: $(json_field open.json 'j["steps"][0]["answered"]') of 4000 scheduled empty messages answered on 4 streams"
fi

# --- messages of 200,000 bytes: past gRPC's first HTTP/2 window (64 KiB), they wait for it ------
python3 -c 'import sys; sys.stdout.buffer.write(b"\x1a\xc0\x9a\x0c" + b"y" * 200000)' >big.bin  # blob (3), 200000 bytes
run_load big --stream -c 2 -P 4 --duration 1s --warmup 0 --payload-file big.bin --json big.json "$url"
expect_run big '(j["calls_ok"] > 0, j["errors"], j["streams_failed"], j["stream_credit_waits"] > 0)' \
  "(True, {}, 0, True)" "200 KB messages wait for the server's window (credit waits counted), none lost"

# --- -n counts messages; the server counts the same, on the streams opened (--callback-only) ---
start_server "$work/counted" "$grpc_server" --callback-only || { fail "the second grpc_echo_server did not start"; exit 1; }
cpid=$server_pid
run_load count --stream -c 2 -P 4 -n 1000 "${hello[@]}" --json count.json "grpc://127.0.0.1:$listen_port/ringtest.Echo/Chat"
stop_pid "$cpid"
served=$(sed -n 's/^streamed \([0-9]*\) messages on \([0-9]*\) streams$/\1 \2/p' counted.out)
if [ "$rc" -ne 0 ] || [ "$(json_field count.json '(j["calls_ok"], j["errors"], j["streams_opened"], j["streams_failed"])')" != "(1000, {}, 2, 0)" ] ||
  [ "$served" != "1000 2" ]; then
  fail "-n 1000: exit $rc, $(json_field count.json '(j["calls_ok"], j["errors"], j["streams_opened"], j["streams_failed"])'), the server streamed '$served'"
  cat count.err >&2
else
  ok "-n 1000 on 2 streams: 1000 answered, and the server read 1000 messages on 2 streams, each ended OK"
fi

# --- a stream the server ends with NOT_FOUND (fail_with): a stream failure of that kind, exit 3 --
run_load failed --stream -c 2 -P 4 --duration 1s --warmup 0 --proto "$proto" --data '{"text":"x","failWith":5}' \
  --json failed.json "$url"
got=$(json_field failed.json '(j["calls_ok"], list(j["errors"]), j["streams_failed"] == j["streams_opened"] >= 2, list(j["stream_failures"]))')
if [ "$rc" -ne 3 ] || [ "$got" != "(0, ['grpc_not_found'], True, ['grpc_not_found'])" ]; then
  fail "a stream ended NOT_FOUND: exit $rc, (calls_ok, error kinds, every stream failed, failure kinds) = $got"
  cat failed.err failed.out >&2
else
  ok "a stream ended NOT_FOUND -> 3: $(json_field failed.json 'j["stream_failures"]'), reconnected each time"
fi

# --- a method the server does not have: stopped early (5) with the status ---------------------
run_load nosuch --stream -c 2 -P 4 --duration 5s "grpc://127.0.0.1:$port/ringtest.Echo/Nope"
if [ "$rc" -ne 5 ] || ! grep -q "the server refused the stream: grpc_unimplemented" nosuch.err; then
  fail "--stream to Echo/Nope: exit $rc, expected 5 and grpc_unimplemented:"; cat nosuch.err >&2
else
  ok "--stream to Echo/Nope -> 5: $(grep 'refused' nosuch.err)"
fi
# --proto checks the method is bidi before connecting.
run_load unary --stream -c 1 "${hello[@]}" "grpc://127.0.0.1:$port/ringtest.Echo/Say"
if [ "$rc" -ne 2 ] || ! grep -q "not a bidi streaming method" unary.err; then
  fail "--stream --proto to a unary method: exit $rc, expected 2:"; cat unary.err >&2
else
  ok "--stream --proto to Echo/Say -> 2: $(head -n 1 unary.err)"
fi

# --- a server killed mid-run: its streams are lost connections, exit 3 --------------------------
start_server "$work/victim" "$grpc_server" 1 || { fail "the victim grpc_echo_server did not start"; exit 1; }
victim=$server_pid
timeout 30 "$load" --stream -c 2 -P 4 --duration 3s --warmup 0 "${hello[@]}" --json killed.json \
  "grpc://127.0.0.1:$listen_port/ringtest.Echo/Chat" >killed.out 2>killed.err &
loadpid=$!
sleep 1
kill -KILL "$victim"
wait "$victim" 2>/dev/null
wait "$loadpid"
rc=$?
got=$(json_field killed.json '(j["calls_ok"] > 0, j["streams_failed"], j["stream_failures"], j["streams_opened"] >= j["streams_failed"])')
if [ "$rc" -ne 3 ] || [ "$got" != "(True, 2, {'connection_lost': 2}, True)" ]; then
  fail "server killed mid-run: exit $rc, (calls_ok > 0, streams_failed, stream_failures, opened >= failed) = $got:"
  cat killed.err killed.out >&2
else
  ok "server killed mid-run -> 3: 2 streams failed as connection_lost"
fi

# --- a stream nghttp2 resets itself (its window overflowed): the connection ends at once ---------
# A hand-made server: SETTINGS, then a WINDOW_UPDATE that takes stream 1's window past 2^31-1.
# nghttp2 answers with RST_STREAM, and the stream closes only as that goes out (on a write): the
# connection must end there, counted by the code, not idle until --timeout.
cat >overflow.py <<'PY'
import socket, struct, sys, threading
def serve(c):
    with c:
        c.recv(65536)  # the preface, SETTINGS, HEADERS of stream 1 and its first DATA
        c.sendall(struct.pack(">I", 0)[1:] + b"\x04\x00" + b"\0" * 4                    # SETTINGS
                  + struct.pack(">I", 4)[1:] + b"\x08\x00" + struct.pack(">II", 1, 0x7fffffff))  # WINDOW_UPDATE
        while c.recv(65536):
            pass
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(16)
print(f"listening on 127.0.0.1:{s.getsockname()[1]}", flush=True)
while True:
    threading.Thread(target=serve, args=(s.accept()[0],), daemon=True).start()
PY
start_server "$work/overflow" python3 overflow.py || { fail "overflow.py did not start"; exit 1; }
opid=$server_pid
run_load reset --stream -c 1 -P 1 --duration 1s --warmup 0 --timeout 800ms "${hello[@]}" --json reset.json \
  "grpc://127.0.0.1:$listen_port/ringtest.Echo/Chat"
stop_pid "$opid"
got=$(json_field reset.json '(list(j["errors"]), list(j["stream_failures"]))')
if [ "$got" != "(['h2_flow_control_error'], ['h2_flow_control_error'])" ]; then
  fail "a stream nghttp2 reset: exit $rc, (error kinds, stream failure kinds) = $got, expected h2_flow_control_error only:"
  cat reset.err reset.out >&2
else
  ok "a stream nghttp2 reset (its window overflowed) ends the connection as h2_flow_control_error, no timeout"
fi

# --- a graceful GOAWAY: the client half-closes once all is answered, and reconnects without error
# A hand-made echo: it writes back each DATA frame of the call, sends GOAWAY(NO_ERROR) after 40
# echoed messages, and ends the call with grpc-status 0 on the client's END_STREAM, then closes.
cat >goaway.py <<'PY'
import socket, struct, threading
def frame(t, f, sid, p=b""):
    return struct.pack(">I", len(p))[1:] + bytes([t, f]) + struct.pack(">I", sid) + p
def serve(c):
    with c:
        buf, echoed, goaway = b"", 0, False
        c.sendall(frame(4, 0, 0))  # SETTINGS
        while True:
            got = c.recv(65536)
            if not got:
                return
            buf += got
            if buf.startswith(b"PRI * HTTP/2.0"):
                buf = buf[24:]
            while len(buf) >= 9 and len(buf) >= 9 + int.from_bytes(buf[:3], "big"):
                n, t, f, sid = int.from_bytes(buf[:3], "big"), buf[3], buf[4], int.from_bytes(buf[5:9], "big")
                payload, buf = buf[9:9 + n], buf[9 + n:]
                if t == 1:
                    c.sendall(frame(1, 4, sid, b"\x88"))  # HEADERS :status 200
                if t == 0 and payload:
                    c.sendall(frame(0, 0, sid, payload))
                    echoed += payload.count(b"hello")
                    if echoed >= 40 and not goaway:
                        goaway = True
                        c.sendall(frame(7, 0, 0, struct.pack(">II", sid, 0)))
                if t == 0 and f & 1:
                    c.sendall(frame(1, 5, sid, b"\x00\x0bgrpc-status\x010"))  # trailers, END_STREAM
                    c.shutdown(socket.SHUT_WR)
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(16)
print(f"listening on 127.0.0.1:{s.getsockname()[1]}", flush=True)
while True:
    threading.Thread(target=serve, args=(s.accept()[0],), daemon=True).start()
PY
start_server "$work/goaway" python3 goaway.py || { fail "goaway.py did not start"; exit 1; }
gpid=$server_pid
run_load goaway --stream -c 1 -P 4 -n 200 --timeout 2s "${hello[@]}" --json goaway.json \
  "grpc://127.0.0.1:$listen_port/ringtest.Echo/Chat"
stop_pid "$gpid"
expect_run goaway '(j["calls_ok"], j["errors"], j["streams_opened"] >= 5, j["streams_failed"])' "(200, {}, True, 0)" \
  "a graceful GOAWAY every 40 messages: half-closed, ended OK and reconnected, no error"

# The first server is still well after all that.
run_load after --stream -c 1 -P 1 --duration 500ms --warmup 0 "${hello[@]}" --json after.json "$url"
expect_run after '(j["calls_ok"] > 0, j["streams_opened"], j["streams_failed"])' "(True, 1, 0)" "the server still streams afterwards"

[ "$failures" -eq 0 ] || exit 1
echo "all load_grpc_stream checks passed"
