#!/usr/bin/env python3
"""Python's grpcio (Debian's python3-grpcio) calls a stock ringrpc-server on its one port.

Usage: grpcio_test.py RINGRPC_SERVER RINGRPC_CALL. Exits 77 (skipped) without grpcio or where
the server cannot start (no io_uring). Every check is a real gRPC call over loopback; the
server's own /metrics says what happened on its side.
"""
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

try:
    import grpc
except ImportError:
    print("python3-grpcio is not installed: skipped")
    sys.exit(77)

server_exe, call_exe = sys.argv[1], sys.argv[2]
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


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


def wait_metric(admin, pattern, want, seconds=5):
    deadline = time.time() + seconds
    while True:
        got = metric(admin, pattern)
        if got >= want or time.time() > deadline:
            return got
        time.sleep(0.05)


def rpc_error(fn):
    try:
        fn()
    except grpc.RpcError as e:
        return e
    return None


proc, port, admin = start_server()
try:
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    echo = channel.unary_unary("/echo")

    check(echo(b"x", timeout=10) == b"x", "raw method: /echo returns b'x'")
    big = os.urandom(1 << 20)
    check(echo(big, timeout=10) == big, "a 1 MiB message both ways")

    # Two segments name Service.Method: reflection.list is a method of the reflection endpoint.
    listed = channel.unary_unary("/reflection/list")(b"", timeout=10)
    check(b'"untyped"' in listed and b'"echo"' in listed, "/reflection/list reaches the method reflection.list")

    # Metadata both ways: mirror sends request metadata back as headers, and a trailer.
    reply, call = channel.unary_unary("/mirror").with_call(
        b"m", timeout=10, metadata=[("k1", "v1"), ("trace-bin", b"\x00\x01\xff")])
    initial, trailing = dict(call.initial_metadata()), dict(call.trailing_metadata())
    check(reply == b"m" and initial.get("k1") == "v1" and initial.get("trace-bin") == b"\x00\x01\xff",
          f"request metadata reaches the handler and comes back as headers ({initial})")
    check(trailing.get("pairs") == "2", f"a handler's trailer arrives as a gRPC trailer ({trailing})")

    e = rpc_error(lambda: channel.unary_unary("/no.such")(b"x", timeout=10))
    check(e is not None and e.code() == grpc.StatusCode.UNIMPLEMENTED, f"/no.such: UNIMPLEMENTED ({e and e.code()})")
    e = rpc_error(lambda: channel.unary_unary("/a/b/c")(b"x", timeout=10))
    check(e is not None and e.code() == grpc.StatusCode.UNIMPLEMENTED, "a three-segment path: UNIMPLEMENTED")

    # An error status with its message: fail answers the ringrpc status asked for (12 invalid_argument).
    e = rpc_error(lambda: channel.unary_unary("/fail")(b"12", timeout=10))
    check(e is not None and e.code() == grpc.StatusCode.INVALID_ARGUMENT and e.details() == "failed as asked",
          f"an error status and message ({e and e.code()}, {e and e.details()!r})")
    e = rpc_error(lambda: channel.unary_unary("/fail")(b"nonsense", timeout=10))
    check(e is not None and e.code() == grpc.StatusCode.INVALID_ARGUMENT and "status number" in e.details(),
          f"bad_request maps to INVALID_ARGUMENT with the server's message ({e and e.code()})")

    # Deadline: the client gives up at 0.2 s, and the server cut its sleep short too.
    started = time.time()
    e = rpc_error(lambda: channel.unary_unary("/sleep")(b"2000000", timeout=0.2))
    check(e is not None and e.code() == grpc.StatusCode.DEADLINE_EXCEEDED and time.time() - started < 1.5,
          f"/sleep 2 s with a 0.2 s timeout: DEADLINE_EXCEEDED ({e and e.code()})")
    cut = wait_metric(admin, r'ringrpc_rpc_method_calls_total\{method="sleep",status="(cancelled|deadline_exceeded)"\}', 1)
    took = metric(admin, r'ringrpc_rpc_method_processing_time_seconds_sum\{method="sleep"\}')
    check(cut == 1 and took < 1.0, f"the server's sleep ended early on its side ({cut} cut short, {took:.3f} s run)")

    # Cancellation: RST_STREAM cancels the running call on the server.
    cancels_before = metric(admin, r"ringrpc_rpc_cancel_requests_total")
    future = channel.unary_unary("/sleep").future(b"3000000", timeout=30)
    time.sleep(0.3)
    future.cancel()
    check(future.cancelled(), "the client cancelled a running call")
    got = wait_metric(admin, r"ringrpc_rpc_cancel_requests_total", cancels_before + 1)
    cut = wait_metric(admin, r'ringrpc_rpc_method_calls_total\{method="sleep",status="cancelled"\}', 2)
    check(got >= cancels_before + 1 and cut >= 1, f"the server counted the cancel and ended the call ({got}, {cut})")

    # Compression is refused cleanly: UNIMPLEMENTED, the call does not run.
    zipped = grpc.insecure_channel(f"127.0.0.1:{port}", compression=grpc.Compression.Gzip)
    e = rpc_error(lambda: zipped.unary_unary("/echo")(b"z" * 100, timeout=10))
    check(e is not None and e.code() == grpc.StatusCode.UNIMPLEMENTED and "grpc-encoding" in e.details(),
          f"gzip: UNIMPLEMENTED ({e and e.code()}, {e and e.details()!r})")
    zipped.close()

    # The standard health check: HealthCheckRequest{} -> HealthCheckResponse{status: SERVING}.
    health = channel.unary_unary("/grpc.health.v1.Health/Check")
    check(health(b"", timeout=10) == b"\x08\x01", "grpc.health.v1.Health/Check: SERVING")
    check(health(b"\x0a\x04echo", timeout=10) == b"\x08\x01", "the health of service 'echo': SERVING")
    e = rpc_error(lambda: health(b"\x0a\x05nosvc", timeout=10))
    check(e is not None and e.code() == grpc.StatusCode.NOT_FOUND, "the health of an unknown service: NOT_FOUND")

    # A message past max_frame_bytes: RESOURCE_EXHAUSTED for that call, the connection stays.
    channel.close()

    # The same port still speaks ringrpc frames.
    out = subprocess.run([call_exe, f"127.0.0.1:{port}", "call", "echo", "-d", "hi"],
                         capture_output=True, text=True, timeout=30)
    check(out.returncode == 0 and out.stdout.strip() == "hi", f"ringrpc-call on the same port: {out.stdout!r}")
    check(metric(admin, r"ringrpc_grpc_connections_total") >= 2, "the server counted its gRPC connections")
finally:
    proc.terminate()
    proc.wait(timeout=30)

# Small frames cap: a message larger than max_frame_bytes is refused, the connection stays.
proc, port, admin = start_server("--max-frame-bytes", "65536")
try:
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    e = rpc_error(lambda: channel.unary_unary("/echo")(b"y" * 100000, timeout=10))
    check(e is not None and e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED,
          f"a message past max_frame_bytes: RESOURCE_EXHAUSTED ({e and e.code()})")
    check(channel.unary_unary("/echo")(b"after", timeout=10) == b"after", "... and the connection serves the next call")
    channel.close()
finally:
    proc.terminate()
    proc.wait(timeout=30)

# --no-grpc: the port speaks frames only, and a gRPC client is turned away.
proc, port, admin = start_server("--no-grpc")
try:
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    e = rpc_error(lambda: channel.unary_unary("/echo")(b"x", timeout=3))
    check(e is not None and e.code() == grpc.StatusCode.UNAVAILABLE, f"--no-grpc: a gRPC call fails ({e and e.code()})")
    channel.close()
    out = subprocess.run([call_exe, f"127.0.0.1:{port}", "call", "echo", "-d", "hi"],
                         capture_output=True, text=True, timeout=30)
    check(out.returncode == 0 and out.stdout.strip() == "hi", "--no-grpc: ringrpc-call still works")
finally:
    proc.terminate()
    proc.wait(timeout=30)

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("all passed")
