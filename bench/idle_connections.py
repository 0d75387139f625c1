#!/usr/bin/env python3
"""Server memory per idle connection: RSS of a real ringrpc-server holding N connections.

Starts the server (pinned to CPU 0 where there are two), reads its RSS, opens N connections,
makes one echo call on each (so every connection has had a receive armed, a frame read and a
reply written, as a real idle client has), waits for the server to settle, reads its RSS again
and reports (after - before) / N. Repeats ROUNDS times with a fresh server and prints the
median, min and max. Loopback only, bounded by N; stops the servers it started by PID.

    bench/idle_connections.py build/release/tools/ringrpc-server [--connections 10000] [--rounds 3]

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


def one_round(binary, n):
    cmd = [binary, "--port", "0", "--log-level", "error", "--max-connections", str(n + 16)]
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
        frame = encode_frame(call_id=1, kind=REQUEST, method="echo", payload=b"x" * 64)
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.sendall(frame)
            socks.append(s)
        for s in socks:
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
    a = p.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = a.connections + 64
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < want:
        raise SystemExit(f"idle_connections: RLIMIT_NOFILE hard limit {hard} is below {want}")
    per = [one_round(a.server, a.connections) for _ in range(a.rounds)]
    print(f"idle connections: {a.connections}, rounds {a.rounds}")
    print(f"server RSS per connection: median {statistics.median(per):.0f} B "
          f"(min {min(per):.0f}, max {max(per):.0f})")


if __name__ == "__main__":
    main()
