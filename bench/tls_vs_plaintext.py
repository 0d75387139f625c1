#!/usr/bin/env python3
"""TLS vs plaintext on one ringrpc-server, same load, same cores: the server pinned to one CPU
(--readers 1, direct dispatch: the echo runs on the reader), bench/tls_bench_client pinned to
another. Rounds alternate plaintext and TLS at depth 1 and 16, then TLS handshakes; each figure
is the median over the rounds with min and max. CPU per call is the server's own (utime+stime
from /proc/PID/stat over the run) divided by the calls it answered.

With --baseline PATH (a ringrpc-server built before TLS), plaintext rounds against it join the
alternation, so "plaintext did not get slower" is a ratio measured in the same run.

Run under the bench lock:
  flock /tmp/ringrpc-bench.lock bench/tls_vs_plaintext.py --build build/bench [--rounds 5] [--baseline OLD]"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "tls"))
from tls_support import Server, make_ca, make_cert  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build/bench")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--server-cpu", default="0")
    ap.add_argument("--client-cpu", default="1")
    ap.add_argument("--baseline", help="a ringrpc-server built before TLS: its plaintext calls join the rounds, "
                                       "on the same CPU, to show plaintext did not get slower")
    args = ap.parse_args()
    server_bin = os.path.join(args.build, "tools", "ringrpc-server")
    client_bin = os.path.join(args.build, "bench", "tls_bench_client")

    with tempfile.TemporaryDirectory(prefix="ringrpc-tls-bench.") as work:
        make_ca(work, "ca")
        cert, key = make_cert(work, "server", "ca", "localhost", "DNS:localhost,IP:127.0.0.1")
        srv = Server(server_bin, ["--dispatch", "direct", "--tls-port", "0", "--tls-cert", cert,
                                  "--tls-key", key, "--log-level", "warn"], work,
                     prefix=["taskset", "-c", args.server_cpu])
        pid = srv.proc.pid
        base = None
        if args.baseline:
            bdir = os.path.join(work, "baseline")
            os.makedirs(bdir)
            base = Server(args.baseline, ["--dispatch", "direct", "--log-level", "warn"], bdir,
                          prefix=["taskset", "-c", args.server_cpu])
        results = {}
        try:
            cases = [("plaintext d1", srv.port, ["--depth", "1"]), ("tls d1", srv.tls_port, ["--tls", "--depth", "1"]),
                     ("plaintext d16", srv.port, ["--depth", "16"]), ("tls d16", srv.tls_port, ["--tls", "--depth", "16"]),
                     ("tls handshakes", srv.tls_port, ["--handshakes"])]
            if base:
                cases += [("baseline d1", base.port, ["--depth", "1"]), ("baseline d16", base.port, ["--depth", "16"])]
            for r in range(args.rounds):
                for name, port, extra in cases:
                    spid = base.proc.pid if name.startswith("baseline") else pid
                    before = cpu_seconds(spid)
                    out = subprocess.run(["taskset", "-c", args.client_cpu, client_bin, "--port", str(port),
                                          "--seconds", str(args.seconds), *extra],
                                         capture_output=True, text=True, timeout=60, check=True).stdout
                    used = cpu_seconds(spid) - before
                    j = json.loads(out)
                    results.setdefault(name, []).append({
                        "calls_per_s": j["calls"] / j["seconds"],
                        "cpu_us_per_call": used * 1e6 / max(j["calls"], 1),
                        "handshakes_per_s": j["handshakes"] / j["seconds"]})
                time.sleep(0.2)
        finally:
            srv.stop()
            if base:
                base.stop()

    def med(name, key):
        v = [x[key] for x in results[name]]
        return statistics.median(v), min(v), max(v)

    print("%-16s %26s %26s" % ("", "calls/s (median [min..max])", "server CPU us/call"))
    for name in results:
        c, cmin, cmax = med(name, "calls_per_s")
        u, umin, umax = med(name, "cpu_us_per_call")
        print("%-16s %10.0f [%6.0f..%6.0f] %8.2f [%5.2f..%5.2f]" % (name, c, cmin, cmax, u, umin, umax))
    h, hmin, hmax = med("tls handshakes", "handshakes_per_s")
    print("TLS handshakes/s (connect, handshake, one call, close): %.0f [%.0f..%.0f]" % (h, hmin, hmax))
    for d in ("d1", "d16"):
        # Ratio per round (the rounds alternate), then the median of the ratios.
        ratios = [t["cpu_us_per_call"] / p["cpu_us_per_call"]
                  for t, p in zip(results["tls " + d], results["plaintext " + d])]
        rates = [t["calls_per_s"] / p["calls_per_s"] for t, p in zip(results["tls " + d], results["plaintext " + d])]
        print("TLS/plaintext %-4s CPU per call %.2fx [%.2f..%.2f], calls/s %.2fx [%.2f..%.2f]" % (
            d, statistics.median(ratios), min(ratios), max(ratios),
            statistics.median(rates), min(rates), max(rates)))
    if "baseline d1" in results:
        for d in ("d1", "d16"):
            ratios = [n["cpu_us_per_call"] / b["cpu_us_per_call"]
                      for n, b in zip(results["plaintext " + d], results["baseline " + d])]
            print("plaintext now/before TLS %-4s CPU per call %.3fx [%.3f..%.3f]" % (
                d, statistics.median(ratios), min(ratios), max(ratios)))


if __name__ == "__main__":
    main()
