#!/usr/bin/env python3
"""Soak: a normal client beside thousands of hostile peers, against a real ringrpc-server.

Runs the server (pinned to CPU 0 where there are two), then two phases of the same length:
  baseline  the normal client alone: echo calls of 64 bytes at a fixed rate on one connection
  hostile   the same client beside
              claimers   each sends a length prefix claiming 16 MiB and 100 bytes, then holds
              drippers   each sends a valid frame one byte per second
              sleepers   each pipelines 64 echo calls of 64 KiB and never reads a reply
              resetters  connect, 30 bytes of a frame, RST, in a loop
              churners   connect and close at once, in a loop
then a settle phase (every hostile peer gone). Reports the server's RSS and fd count (peak and
after settling) and the normal client's p50/p99 in each phase, with the ratio to baseline.

Bounded in time and count; loopback only; stops the server it started (by PID) at the end.

    bench/soak.py build/release/tools/ringrpc-server [--seconds 20] [--claimers 1000] ...
"""

import argparse
import os
import resource
import selectors
import socket
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "wire"))
from protocol_client import REQUEST, decode_frame, encode_frame  # noqa: E402
from idle_connections import rss_of  # noqa: E402  (bench/, the script's own folder)

HOST = "127.0.0.1"


def percentile(values, q):
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


class ServerProcess:
    def __init__(self, binary, extra):
        cmd = [binary, "--port", "0", "--log-level", "error"] + extra
        if os.cpu_count() and os.cpu_count() >= 2:
            cmd = ["taskset", "-c", "0"] + cmd
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.proc.stdout.readline()
        if "listening on" not in line:
            raise SystemExit("soak: the server did not start: " + line)
        self.port = int(line.strip().rsplit(":", 1)[1])

    def rss(self):
        return rss_of(self.proc.pid)

    def fds(self):
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return self.proc.returncode


class NormalClient(threading.Thread):
    """One connection, echo calls at `rate` per second; latencies per phase."""

    def __init__(self, port, rate):
        super().__init__(daemon=True)
        self.sock = socket.create_connection((HOST, port), timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.rate = rate
        self.phase = "baseline"
        self.latencies = {}
        self.errors = {}
        self.stop_flag = threading.Event()

    def read_frame(self):
        head = self._exact(4)
        (n,) = struct.unpack("<I", head)
        return decode_frame(head + self._exact(n))

    def _exact(self, n):
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("server closed the normal client's connection")
            out += chunk
        return out

    def run(self):
        payload = b"x" * 64
        call_id = 0
        interval = 1.0 / self.rate
        next_at = time.monotonic()
        while not self.stop_flag.is_set():
            call_id += 1
            start = time.monotonic()
            phase = self.phase
            try:
                self.sock.sendall(encode_frame(call_id=call_id, kind=REQUEST, method="echo", payload=payload))
                f = self.read_frame()
                ok = f.get("call_id") == call_id and f.get("payload") == payload
            except (OSError, ConnectionError):
                ok = False
            if ok:
                self.latencies.setdefault(phase, []).append((time.monotonic() - start) * 1e6)
            else:
                self.errors[phase] = self.errors.get(phase, 0) + 1
                if self.errors[phase] > 100:
                    return
            next_at += interval
            delay = next_at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            else:
                next_at = time.monotonic()


class Hostiles:
    """Every hostile peer, driven by one selector loop on this thread."""

    def __init__(self, port, args):
        self.port = port
        self.args = args
        self.sel = selectors.DefaultSelector()
        self.held = []
        self.drippers = []  # [sock, frame, offset]
        self.counts = {"resets": 0, "churns": 0, "connect_failures": 0, "shed_sleepers": 0}

    def _connect(self, blocking=True):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(2)
        s.connect((HOST, self.port))
        s.setblocking(blocking)
        return s

    def start_claimers(self):
        claim = struct.pack("<I", 16 << 20) + b"c" * 100
        for _ in range(self.args.claimers):
            try:
                s = self._connect()
                s.sendall(claim)
                self.held.append(s)
            except OSError:
                self.counts["connect_failures"] += 1

    def start_others(self):
        frame = encode_frame(call_id=1, kind=REQUEST, method="echo", payload=b"d" * 64)
        for _ in range(self.args.drippers):
            try:
                self.drippers.append([self._connect(), frame, 0])
            except OSError:
                self.counts["connect_failures"] += 1
        big = b"s" * (64 << 10)
        for _ in range(self.args.sleepers):
            try:
                s = self._connect()
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                s.setblocking(False)
                for i in range(64):
                    try:
                        s.send(encode_frame(call_id=i + 1, kind=REQUEST, method="echo", payload=big))
                    except BlockingIOError:
                        break
                self.held.append(s)
            except OSError:
                self.counts["connect_failures"] += 1

    def step(self, now, last_drip):
        """One round of the looping peers; drips once per second."""
        partial = encode_frame(call_id=7, kind=REQUEST, method="echo", payload=b"r" * 64)[:30]
        for _ in range(self.args.resets_per_step):
            try:
                s = self._connect()
                s.sendall(partial)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                s.close()  # linger 0: RST
                self.counts["resets"] += 1
            except OSError:
                self.counts["connect_failures"] += 1
        for _ in range(self.args.churns_per_step):
            try:
                self._connect().close()
                self.counts["churns"] += 1
            except OSError:
                self.counts["connect_failures"] += 1
        if now - last_drip >= 1.0:
            for d in self.drippers:
                s, frame, off = d
                if off < len(frame):
                    try:
                        s.send(frame[off:off + 1])
                        d[2] = off + 1
                    except OSError:
                        d[2] = len(frame)
            return now
        return last_drip

    def close(self):
        for s in self.held:
            s.close()
        for d in self.drippers:
            d[0].close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("server")
    ap.add_argument("--seconds", type=float, default=20, help="length of each phase")
    ap.add_argument("--rate", type=int, default=500, help="normal client's calls per second")
    ap.add_argument("--claimers", type=int, default=1000)
    ap.add_argument("--drippers", type=int, default=200)
    ap.add_argument("--sleepers", type=int, default=100)
    ap.add_argument("--resets-per-step", type=int, default=20)
    ap.add_argument("--churns-per-step", type=int, default=20)
    ap.add_argument("--server-arg", action="append", default=[], help="extra ringrpc-server flag")
    args = ap.parse_args()

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    srv = ServerProcess(args.server, args.server_arg)
    rows = []
    try:
        rss0, fds0 = srv.rss(), srv.fds()
        client = NormalClient(srv.port, args.rate)
        client.start()
        time.sleep(args.seconds)

        client.phase = "hostile"
        h = Hostiles(srv.port, args)
        before = srv.rss()
        h.start_claimers()
        time.sleep(0.5)
        after_claims = srv.rss()
        h.start_others()
        peak_rss, peak_fds = 0, 0
        end = time.monotonic() + args.seconds
        last_drip = time.monotonic()
        while time.monotonic() < end:
            last_drip = h.step(time.monotonic(), last_drip)
            peak_rss = max(peak_rss, srv.rss())
            peak_fds = max(peak_fds, srv.fds())
            time.sleep(0.05)
        h.close()

        client.phase = "settled"
        time.sleep(min(args.seconds, 10))
        client.stop_flag.set()
        client.join(timeout=5)
        rss1, fds1 = srv.rss(), srv.fds()
    finally:
        rc = srv.stop()

    base = client.latencies.get("baseline", [])
    hostile = client.latencies.get("hostile", [])
    settled = client.latencies.get("settled", [])
    b50, b99 = percentile(base, 0.5), percentile(base, 0.99)
    print(f"server rc={rc}; phases of {args.seconds:.0f} s; normal client at {args.rate} calls/s")
    print(f"hostile peers: {args.claimers} claimers (16 MiB + 100 B), {args.drippers} drippers "
          f"(1 B/s), {args.sleepers} never-reading pipeliners (64 x 64 KiB), "
          f"{h.counts['resets']} connect/30 B/RST cycles, {h.counts['churns']} connect/close cycles, "
          f"{h.counts['connect_failures']} connects refused")
    per_claim = (after_claims - before) / max(args.claimers, 1)
    print(f"RSS: start {rss0 / 2**20:.1f} MiB, after the claimers {after_claims / 2**20:.1f} MiB "
          f"({per_claim / 1024:.1f} KiB per claimer), peak {peak_rss / 2**20:.1f} MiB, "
          f"settled {rss1 / 2**20:.1f} MiB")
    print(f"fds: start {fds0}, peak {peak_fds}, settled {fds1}")
    print(f"{'phase':<10}{'calls':>8}{'errors':>8}{'p50 us':>10}{'p99 us':>10}{'p50 x':>8}{'p99 x':>8}")
    for name, lat in (("baseline", base), ("hostile", hostile), ("settled", settled)):
        p50, p99 = percentile(lat, 0.5), percentile(lat, 0.99)
        print(f"{name:<10}{len(lat):>8}{client.errors.get(name, 0):>8}{p50:>10.0f}{p99:>10.0f}"
              f"{p50 / b50:>8.2f}{p99 / b99:>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
