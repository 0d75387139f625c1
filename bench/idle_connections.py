#!/usr/bin/env python3
"""Server memory per idle connection: RSS of a real ringrpc-server holding N connections.

Starts the server (pinned to CPU 0 where there are two), reads its RSS, opens N connections,
makes one echo call on each (so every connection has had a receive armed, a frame read and a
reply written, as a real idle client has), waits for the server to settle, reads its RSS again
and reports (after - before) / N. Repeats ROUNDS times with a fresh server and prints the
median, min and max. Loopback only, bounded by N; stops the servers it started by PID.

    bench/idle_connections.py build/release/tools/ringrpc-server [--connections 10000] [--rounds 3]
    bench/idle_connections.py build/release/tools/ringrpc-server --grpc   (idle gRPC clients)

With --grpc each connection is a gRPC client's instead (docs/grpc.md): the HTTP/2 preface,
SETTINGS and its acknowledgement, and one unary echo call read to its trailers.

The script raises its own RLIMIT_NOFILE (soft up to hard) and passes --max-connections, so N
may exceed the default 1024.
"""

import argparse
import os
import resource
import socket
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "wire"))
from protocol_client import REQUEST, decode_frame, encode_frame  # noqa: E402


def rss_of(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def read_frame(sock):
    def exact(n):
        out = b""
        while len(out) < n:
            chunk = sock.recv(n - len(out))
            if not chunk:
                raise SystemExit("idle_connections: the server closed a connection")
            out += chunk
        return out
    prefix = exact(4)
    return decode_frame(prefix + exact(int.from_bytes(prefix, "little")))


def h2_frame(ftype, flags, stream, payload=b""):
    return len(payload).to_bytes(3, "big") + bytes([ftype, flags]) + stream.to_bytes(4, "big") + payload


def h2_literal(name, value):  # HPACK: literal header field without indexing, new name
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value


# A gRPC client's opening: preface, SETTINGS, then one call of /echo (HEADERS, DATA with its
# 5-byte message prefix) with END_STREAM.
GRPC_CALL = (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + h2_frame(4, 0, 0) +
             h2_frame(1, 4, 1, b"\x83\x86" + h2_literal(b":path", b"/echo") + h2_literal(b":authority", b"x") +
                      h2_literal(b"content-type", b"application/grpc") + h2_literal(b"te", b"trailers")) +
             h2_frame(0, 1, 1, b"\x00" + (64).to_bytes(4, "big") + b"x" * 64))


def read_grpc_answer(sock):
    """Reads frames until stream 1's trailers (HEADERS with END_STREAM), ACKing the server's SETTINGS."""
    buf = b""
    while True:
        while len(buf) < 9 or len(buf) < 9 + int.from_bytes(buf[:3], "big"):
            chunk = sock.recv(65536)
            if not chunk:
                raise SystemExit("idle_connections: the server closed a gRPC connection")
            buf += chunk
        n = int.from_bytes(buf[:3], "big")
        ftype, flags, stream = buf[3], buf[4], int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF
        buf = buf[9 + n:]
        if ftype == 4 and not flags & 1:
            sock.sendall(h2_frame(4, 1, 0))
        if ftype == 1 and stream == 1 and flags & 1:
            return


def one_round(binary, n, grpc=False):
    # Every connection comes from 127.0.0.1: the per-address default (a share of max_connections)
    # must let all of them in.
    cmd = [binary, "--port", "0", "--log-level", "error", "--max-connections", str(2 * n + 64)]
    if (os.cpu_count() or 1) >= 2:
        cmd = ["taskset", "-c", "0"] + cmd
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = proc.stdout.readline()
        if "listening on" not in line:
            raise SystemExit("idle_connections: the server did not start: " + line)
        port = int(line.strip().rsplit(":", 1)[1])
        time.sleep(0.5)
        before = rss_of(proc.pid)
        socks = []
        frame = GRPC_CALL if grpc else encode_frame(call_id=1, kind=REQUEST, method="echo", payload=b"x" * 64)
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.sendall(frame)
            socks.append(s)
        for s in socks:
            if grpc:
                read_grpc_answer(s)
            else:
                read_frame(s)
        time.sleep(1.0)  # let the server's timers and frees settle
        after = rss_of(proc.pid)
        for s in socks:
            s.close()
        return (after - before) / n
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("server")
    p.add_argument("--connections", type=int, default=10_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--grpc", action="store_true", help="idle gRPC clients instead of ringrpc ones")
    a = p.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = a.connections + 64
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < want:
        raise SystemExit(f"idle_connections: RLIMIT_NOFILE hard limit {hard} is below {want}")
    per = [one_round(a.server, a.connections, a.grpc) for _ in range(a.rounds)]
    print(f"idle {'gRPC ' if a.grpc else ''}connections: {a.connections}, rounds {a.rounds}")
    print(f"server RSS per connection: median {statistics.median(per):.0f} B "
          f"(min {min(per):.0f}, max {max(per):.0f})")


if __name__ == "__main__":
    main()
