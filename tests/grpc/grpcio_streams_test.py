#!/usr/bin/env python3
"""Python's grpcio streaming calls against a stock ringrpc-server's built-in stream methods.

A gRPC call to a method registered as a ringrpc stream is that stream (docs/grpc.md,
docs/protocol.md section 13): `generate` (a server stream: request "N BYTES", N messages of BYTES
bytes 'x', then OK) by gRPC's server-streaming call "/generate", and `echo_stream` (bidi: every
message back, OK after the client's half-close) by a bidi call "/echo_stream". Messages are raw
bytes both ways (no serializers: grpcio passes bytes as they are).

Usage: grpcio_streams_test.py RINGRPC_SERVER. Exits 77 (skipped) without grpcio or where the
server cannot start (no io_uring). Every call has a timeout and every wait a bound; no check
asserts speed. The server's own /metrics says what happened on its side (streams open, messages
sent, writes held back by flow control).
"""
import concurrent.futures
import re
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.request

try:
    import grpc
except ImportError:
    print("python3-grpcio is not installed: skipped")
    sys.exit(77)

server_exe = sys.argv[1]
failures = []

OK = grpc.StatusCode.OK
GENERATE_USAGE = 'payload must be "N BYTES": N messages of BYTES bytes each (BYTES at most 1048576)'
SENT = r'ringrpc_stream_messages_total\{direction="sent"\}'
BLOCKED = r'ringrpc_stream_writes_blocked_total\{reason="(credit|buffer)"\}'
OPEN_STREAMS = r"ringrpc_open_streams"


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


def info(what):
    print("info " + what, flush=True)


# --- the server and its /metrics (as tests/grpc/grpcio_test.py) ---------------------------------

def start_server(*extra):
    log = tempfile.TemporaryFile(mode="w+")
    proc = subprocess.Popen([server_exe, "--port", "0", "--admin-port", "0", *extra],
                            stdout=log, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 10
    port = admin = None
    while time.time() < deadline and proc.poll() is None:
        log.seek(0)
        text = log.read()
        m, a = re.search(r"listening on [0-9.]+:(\d+)", text), re.search(r"admin on http://[0-9.]+:(\d+)", text)
        if m and a:
            port, admin = int(m.group(1)), int(a.group(1))
            break
        time.sleep(0.05)
    if port is None:
        log.seek(0)
        text = log.read()
        proc.kill()
        if "io_uring" in text:
            print("io_uring unusable: skipped")
            sys.exit(77)
        print(text)
        sys.exit("ringrpc-server did not start")
    return proc, port, admin


def metric(admin, pattern):
    """The sum of the /metrics samples whose line matches `pattern` (a regex on name{labels})."""
    body = urllib.request.urlopen(f"http://127.0.0.1:{admin}/metrics", timeout=5).read().decode()
    total = 0.0
    for line in body.splitlines():
        if line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        if re.fullmatch(pattern, name):
            total += float(value)
    return total


def wait_until(fn, seconds=10):
    """Polls fn() until it is true or `seconds` have passed; its last value."""
    deadline = time.time() + seconds
    while True:
        got = fn()
        if got or time.time() > deadline:
            return got
        time.sleep(0.05)


def rpc_error(fn):
    try:
        fn()
    except grpc.RpcError as e:
        return e
    return None


def describe(e):
    return "no error" if e is None else f"{e.code()}: {e.details()!r}"


def wait_stall(progress, admin, blocked_before, quiet=1.5, limit=30):
    """Waits until progress() has not changed for `quiet` seconds while the server has counted
    a write held back by flow control since blocked_before, or `limit` seconds have passed.
    Returns (last progress, blocked writes since). Only bounds the test: a loaded machine makes
    it wait longer, never fail."""
    deadline = time.time() + limit
    last, since = progress(), time.time()
    while time.time() < deadline:
        time.sleep(0.1)
        now = progress()
        if now != last:
            last, since = now, time.time()
        elif time.time() - since >= quiet and metric(admin, BLOCKED) > blocked_before:
            break
    return last, metric(admin, BLOCKED) - blocked_before


# --- the cases ---------------------------------------------------------------------------------

cases = []


def case(fn):
    cases.append(fn)
    return fn


def generate(ch, request, timeout=30, **kw):
    return ch.unary_stream("/generate")(request, timeout=timeout, **kw)


def echo_stream(ch, requests, timeout=60, **kw):
    return ch.stream_stream("/echo_stream")(requests, timeout=timeout, **kw)


@case
def generate_counts_and_bytes(ch, admin):
    call = generate(ch, b"1000 100")
    msgs = list(call)
    want = b"x" * 100
    check(len(msgs) == 1000 and all(m == want for m in msgs) and call.code() == OK,
          f"generate 1000 x 100 B: {len(msgs)} messages, all {len(want)} x 'x': "
          f"{all(m == want for m in msgs)}, {call.code()}")

    call = generate(ch, b"0 100")
    msgs = list(call)
    check(msgs == [] and call.code() == OK, f"generate 0 messages: none, OK ({len(msgs)}, {call.code()})")

    call = generate(ch, b"5 0")
    msgs = list(call)
    check(msgs == [b""] * 5 and call.code() == OK, f"generate 5 empty messages: 5 x b'' ({msgs!r}, {call.code()})")

    call = generate(ch, b"3 1048576", timeout=60)
    msgs = list(call)
    big = b"x" * 1048576
    check(len(msgs) == 3 and all(m == big for m in msgs) and call.code() == OK,
          f"generate 3 x 1 MiB: {[len(m) for m in msgs]}, {call.code()}")


@case
def generate_bad_requests_are_invalid_argument_with_the_servers_message(ch, admin):
    for request in (b"abc", b"5 1048577", b"5", b""):
        e = rpc_error(lambda r=request: list(generate(ch, r)))
        check(e is not None and e.code() == grpc.StatusCode.INVALID_ARGUMENT and e.details() == GENERATE_USAGE,
              f"generate {request!r}: INVALID_ARGUMENT (BadRequest) with the server's message ({describe(e)})")


@case
def a_unary_call_of_a_server_stream_that_sends_one_message(ch, admin):
    # gRPC's unary call is a stream of one message each way on the wire.
    got = ch.unary_unary("/generate")(b"1 5", timeout=20)
    check(got == b"xxxxx", f"unary /generate '1 5': b'xxxxx' ({got!r})")


@case
def echo_stream_returns_500_messages_of_varied_sizes_in_order(ch, admin):
    def size(i):
        if i % 50 == 0:
            return 0
        if i % 97 == 1:
            return 200 * 1024
        return (i * 2654435761) % 5000
    # Each message starts with its index (where it has room), then a byte of its own.
    msgs = [(i.to_bytes(4, "big") + bytes([i % 251]) * size(i))[:size(i)] for i in range(500)]

    def requests():
        yield from msgs
    call = echo_stream(ch, requests(), timeout=120)
    got = list(call)
    first_bad = next((i for i, (a, b) in enumerate(zip(got, msgs)) if a != b), None)
    check(len(got) == 500 and first_bad is None and call.code() == OK,
          f"echo_stream 500 messages of 0 B..200 KiB ({sum(map(len, msgs))} bytes): {len(got)} back, "
          f"first mismatch {first_bad}, {call.code()}")


@case
def echo_stream_edges(ch, admin):
    call = echo_stream(ch, iter([]), timeout=20)
    got = list(call)
    check(got == [] and call.code() == OK, f"echo_stream with no message, only the half-close: none, OK ({got!r})")

    call = ch.unary_stream("/echo_stream")(b"one", timeout=20)
    got = list(call)
    check(got == [b"one"] and call.code() == OK, f"echo_stream by a server-streaming call: its one message ({got!r})")

    got = ch.unary_unary("/echo_stream")(b"solo", timeout=20)
    check(got == b"solo", f"echo_stream by a unary call: its one message ({got!r})")


@case
def a_slow_reader_gets_every_message(ch, admin):
    blocked_before = metric(admin, BLOCKED)
    call = generate(ch, b"2000 1000", timeout=120)
    want = b"x" * 1000
    n = bad = 0
    for m in call:
        n += 1
        bad += m != want
        if n <= 200:
            time.sleep(0.002)
        elif n == 201:
            time.sleep(1.0)
    check(n == 2000 and bad == 0 and call.code() == OK,
          f"generate 2000 x 1000 B read slowly: {n} messages, {bad} wrong, {call.code()}")
    info(f"writes the server held back meanwhile: {metric(admin, BLOCKED) - blocked_before:.0f}")


@case
def a_client_that_does_not_read_holds_the_server_back(ch, admin):
    # 200 MiB: more than any HTTP/2 window, socket buffers and the server's 4 MiB of queued
    # replies hold; the handler must wait for credit that only the client's reading gives back.
    total = 200
    wait_until(lambda: metric(admin, OPEN_STREAMS) == 0)
    sent_before, blocked_before = metric(admin, SENT), metric(admin, BLOCKED)
    call = generate(ch, f"{total} 1048576".encode(), timeout=120)
    try:
        first = next(call)
        sent, blocked = wait_stall(lambda: metric(admin, SENT) - sent_before, admin, blocked_before)
        check(0 < sent < total and blocked > 0 and metric(admin, OPEN_STREAMS) >= 1,
              f"while the client reads nothing the server stops writing: {sent:.0f} of {total} messages sent, "
              f"{blocked:.0f} writes held back, the stream still open")
        n, bad = 1, first != b"x" * 1048576
        for m in call:
            n += 1
            bad += m != b"x" * 1048576
        check(n == total and bad == 0 and call.code() == OK,
              f"... and once it reads it gets all {total} (got {n}, {bad} wrong, {call.code()})")
    finally:
        call.cancel()  # nothing, once it has ended


@case
def a_handler_that_cannot_write_holds_the_client_back(ch, admin):
    # echo_stream stops reading while its echo waits for credit: a client that sends and never
    # reads is held back by the HTTP/2 window, not buffered by the server.
    total, size = 2000, 65536
    wait_until(lambda: metric(admin, OPEN_STREAMS) == 0)
    blocked_before = metric(admin, BLOCKED)
    yielded = [0]
    stop = threading.Event()

    def message(i):
        return i.to_bytes(4, "big") + bytes([i % 251]) * (size - 4)

    def requests():
        for i in range(total):
            if stop.is_set():
                return
            yielded[0] += 1
            yield message(i)
    call = echo_stream(ch, requests(), timeout=120)
    try:
        sent, blocked = wait_stall(lambda: yielded[0], admin, blocked_before)
        check(0 < sent < total and blocked > 0,
              f"a client that sends and never reads is held back: {sent} of {total} x 64 KiB taken, "
              f"{blocked:.0f} server writes held back")
        n = bad = 0
        for m in call:
            bad += m != message(n)
            n += 1
        check(n == total and bad == 0 and call.code() == OK,
              f"... and once it reads, all {total} come back in order ({n}, {bad} wrong, {call.code()})")
    finally:
        stop.set()
        call.cancel()  # nothing, once it has ended


@case
def cancel_ends_the_stream_on_the_server_and_the_connection_serves_on(ch, admin):
    wait_until(lambda: metric(admin, OPEN_STREAMS) == 0)
    connections = metric(admin, r"ringrpc_grpc_connections_total")
    cancels = metric(admin, r"ringrpc_grpc_cancels_total")
    call = generate(ch, b"1000000 1000", timeout=60)
    got = [next(call) for _ in range(10)]
    check(got == [b"x" * 1000] * 10, "generate 1000000 x 1000 B: the first 10 messages")
    call.cancel()
    e = rpc_error(lambda: [None for _ in call])
    check(call.code() == grpc.StatusCode.CANCELLED and (e is None or e.code() == grpc.StatusCode.CANCELLED),
          f"call.cancel(): the call ends CANCELLED ({call.code()}, {describe(e)})")
    closed = wait_until(lambda: metric(admin, OPEN_STREAMS) == 0)
    check(closed, "the server ended the cancelled stream (ringrpc_open_streams back to 0)")
    sent = metric(admin, SENT)
    time.sleep(0.5)
    check(metric(admin, SENT) == sent, "... and writes no more on it")
    info(f"ringrpc_grpc_cancels_total +{metric(admin, r'ringrpc_grpc_cancels_total') - cancels:.0f}")
    after = ch.unary_unary("/echo")(b"after the cancel", timeout=20)
    check(after == b"after the cancel", f"a unary call on the same channel after the cancel: {after!r}")
    got = list(generate(ch, b"3 7"))
    check(got == [b"x" * 7] * 3, f"... and a new stream: {got!r}")
    check(metric(admin, r"ringrpc_grpc_connections_total") == connections,
          "... on the same connection (no new gRPC connection)")


@case
def a_deadline_ends_a_stream_the_client_keeps_open(ch, admin):
    wait_until(lambda: metric(admin, OPEN_STREAMS) == 0)
    release = threading.Event()

    def requests():
        yield b"first"
        release.wait(30)  # never half-closes before the deadline

    try:
        call = echo_stream(ch, requests(), timeout=0.3)
        got = []
        e = rpc_error(lambda: [got.append(m) for m in call])
        check(e is not None and e.code() == grpc.StatusCode.DEADLINE_EXCEEDED and got in ([], [b"first"]),
              f"echo_stream with timeout=0.3 s, never half-closed: DEADLINE_EXCEEDED ({describe(e)}, {got!r})")
    finally:
        release.set()
    check(wait_until(lambda: metric(admin, OPEN_STREAMS) == 0),
          "the server ended the stream (its deadline, or the client's RST_STREAM at it)")
    check(ch.unary_unary("/echo")(b"after", timeout=20) == b"after", "the channel serves on after the deadline")


@case
def metadata_both_ways(ch, admin):
    md = [("k1", "v1"), ("trace-bin", b"\x00\x01\xff")]
    call = echo_stream(ch, iter([b"a", b"bb"]), timeout=20, metadata=md)
    initial = call.initial_metadata()
    got = list(call)
    trailing = call.trailing_metadata()
    check(got == [b"a", b"bb"] and call.code() == OK and initial is not None and trailing is not None,
          f"echo_stream with request metadata: echoed, OK, initial {initial!r} and trailing {trailing!r} metadata read")
    call = generate(ch, b"2 3", metadata=md)
    initial = call.initial_metadata()
    got = list(call)
    check(got == [b"xxx"] * 2 and call.code() == OK and call.trailing_metadata() is not None,
          f"generate with request metadata: OK, initial {initial!r}, trailing {call.trailing_metadata()!r}")
    info("skipped: the handler's view of request metadata (no built-in stream echoes it; "
         "grpc_stream_client_test.cpp checks it)")


@case
def fifty_concurrent_streams_and_unary_calls_on_one_channel(ch, admin):
    def echo_one(k):
        msgs = [f"{k}:{j}:".encode() + bytes([k % 256]) * ((k * 37 + j * 101) % 5000) for j in range(20)]
        call = echo_stream(ch, iter(msgs), timeout=90)
        return list(call) == msgs and call.code() == OK

    def generate_one(k):
        call = generate(ch, f"{50 + k} {k * 10}".encode(), timeout=90)
        return list(call) == [b"x" * (k * 10)] * (50 + k) and call.code() == OK

    with concurrent.futures.ThreadPoolExecutor(max_workers=50) as pool:
        futures = [pool.submit(echo_one, k) for k in range(40)] + [pool.submit(generate_one, k) for k in range(10)]
        unary_ok = 0
        for i in range(20):
            unary_ok += ch.unary_unary("/echo")(b"u%d" % i, timeout=30) == b"u%d" % i
        results = []
        for f in futures:
            try:
                results.append(f.result(timeout=120))
            except Exception as e:  # an RpcError (or a timeout) is one failed stream
                results.append(False)
                info(f"a concurrent stream failed: {e!r}")
    check(all(results), f"50 streams at once on one channel (40 echo_stream, 10 generate): "
                        f"{sum(results)} of {len(results)} right")
    check(unary_ok == 20, f"unary calls interleaved with them: {unary_ok} of 20")


@case
def unknown_methods_are_still_unimplemented(ch, admin):
    for path, fn in (("/no_such_stream", lambda: list(ch.unary_stream("/no_such_stream")(b"1 1", timeout=20))),
                     ("/no.such", lambda: list(ch.stream_stream("/no.such")(iter([b"a", b"b"]), timeout=20))),
                     ("/a/b/c", lambda: list(ch.stream_stream("/a/b/c")(iter([b"a"]), timeout=20)))):
        e = rpc_error(fn)
        check(e is not None and e.code() == grpc.StatusCode.UNIMPLEMENTED,
              f"a streaming call of {path}: UNIMPLEMENTED ({describe(e)})")
    # "/generate/x" is the method "generate.x", which the dispatcher finds under the endpoint
    # "generate" (docs/grpc.md, the mapping): the stream, not an unknown method.
    got = list(ch.unary_stream("/generate/x")(b"2 3", timeout=20))
    check(got == [b"xxx", b"xxx"], f"/generate/x reaches generate (the endpoint's name.method rule): {got}")


@case
def nothing_is_left_open(ch, admin):
    check(wait_until(lambda: metric(admin, OPEN_STREAMS) == 0), "no stream is left open on the server")
    opened = metric(admin, r"ringrpc_streams_opened_total")
    check(opened >= 60, f"the server counted the streams it opened ({opened:.0f})")


proc, port, admin = start_server()
try:
    channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.enable_retries", 0),
                                                                  ("grpc.max_receive_message_length", 16 << 20)])
    for fn in cases:
        started = time.time()
        print(f"--- {fn.__name__}", flush=True)
        try:
            fn(channel, admin)
        except Exception as e:  # one case's surprise is its failure, not the run's end
            traceback.print_exc()
            detail = f"{e.code()}: {e.details()!r}" if isinstance(e, grpc.RpcError) else repr(e)
            check(False, f"{fn.__name__} raised {detail}")
        print(f"    ({time.time() - started:.2f} s)", flush=True)
    channel.close()
    check(proc.poll() is None, "the server is still running")
finally:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=30)

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("all passed")
