#!/usr/bin/env python3
"""TLS listener of ringrpc-server against Python's ssl module: byte-exact calls (one TLS record
and many, pipelined), the plaintext port beside it, garbage instead of a ClientHello, a stalled
handshake, mutual TLS refusals, start-up errors for bad certificates and a SIGHUP reload.
Usage: tls_server_test.py PATH/TO/ringrpc-server [PATH/TO/ringrpc-call]"""

import os
import random
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request

from tls_support import (Server, client_context, echo_frame, make_all, pc, read_frame, server_tls_args,
                         tls_connect)

SERVER = sys.argv[1]
CALL = sys.argv[2] if len(sys.argv) > 2 else None
failures = []


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def run(name, fn, *args):
    t0 = time.monotonic()
    try:
        fn(*args)
        print("ok   %-62s %6.0f ms" % (name, (time.monotonic() - t0) * 1e3))
    except Exception as e:  # noqa: BLE001 - every failure is reported, the others still run
        failures.append(name)
        print("FAIL %s: %s: %s" % (name, type(e).__name__, e))


def echo_sizes(srv, certs):
    ctx = client_context(certs["ca"] + ".pem")
    with tls_connect(srv.tls_port, ctx) as s:
        check(s.selected_alpn_protocol() == "ringrpc/1", "ALPN: %r" % s.selected_alpn_protocol())
        rnd = random.Random(1)
        for i, size in enumerate([0, 1, 100, 16383, 16384, 16385, 100_000, 1 << 20]):
            payload = bytes(rnd.getrandbits(8) for _ in range(min(size, 4096))) * (size // 4096 + 1)
            payload = payload[:size]
            s.sendall(echo_frame(i + 1, payload))
            f = read_frame(s)
            check(f["call_id"] == i + 1 and f["kind"] == pc.REPLY and f["status"] == pc.OK,
                  "size %d: %s" % (size, pc.describe(f)))
            check(f["payload"] == payload, "size %d: payload differs" % size)


def pipelined(srv, certs):
    ctx = client_context(certs["ca"] + ".pem")
    with tls_connect(srv.tls_port, ctx) as s:
        rnd = random.Random(2)
        sent = {}
        batch = bytearray()
        for i in range(1, 201):
            payload = os.urandom(rnd.choice([1, 50, 3000, 20000]))
            sent[i] = payload
            batch += echo_frame(i, payload)
        s.sendall(bytes(batch))  # every request before any reply is read
        # Replies come in completion order (the fair share may reorder): match them by id.
        for _ in range(200):
            f = read_frame(s)
            check(f["call_id"] in sent, "unexpected reply %s" % pc.describe(f))
            check(f["payload"] == sent.pop(f["call_id"]), "call %d: payload differs" % f["call_id"])
        check(not sent, "no reply for %s" % sorted(sent))


def plaintext_beside(srv, certs):
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
        s.sendall(echo_frame(7, b"plain"))
        f = read_frame(s)
        check(f["payload"] == b"plain", "plaintext echo: %s" % pc.describe(f))
    # A TLS ClientHello on the plaintext port is a bad frame there, not a handshake.
    ctx = client_context(certs["ca"] + ".pem")
    try:
        tls_connect(srv.port, ctx, timeout=5).close()
        raise AssertionError("a TLS handshake succeeded on the plaintext port")
    except (ssl.SSLError, OSError):
        pass


def garbage(srv, certs):
    before = srv.tls_stats()["handshake_failures"]
    with socket.create_connection(("127.0.0.1", srv.tls_port), timeout=10) as bad, \
            tls_connect(srv.tls_port, client_context(certs["ca"] + ".pem")) as good:
        bad.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + b"\0" * 200)
        data = b""
        try:
            while True:
                chunk = bad.recv(4096)
                if not chunk:
                    break
                data += chunk
        except ConnectionResetError:
            pass
        check(len(data) < 64, "the server answered garbage with %d bytes" % len(data))
        check(srv.wait_stat("handshake_failures", before + 1) >= before + 1, "failure not counted")
        good.sendall(echo_frame(1, b"still here"))
        check(read_frame(good)["payload"] == b"still here", "another connection was affected")


def read_to_end(sock):
    data = b""
    try:
        while True:
            chunk = sock.recv(4096)
            if not chunk:
                return data
            data += chunk
    except ConnectionResetError:
        return data


def is_fatal_alert(data):
    """One TLS alert record, fatal: content type 21, version 3.x, length 2, level 2."""
    return len(data) == 7 and data[0] == 0x15 and data[1] == 0x03 and data[3:6] == b"\x00\x02\x02"


def not_tls_gets_alert(srv, certs):
    # OpenSSL itself says nothing to bytes that do not look like TLS; the server sends a fatal
    # alert anyway, so a client on the wrong port learns it is talking to a TLS server.
    for what, data in [("an HTTP request", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
                       ("a plaintext ringrpc frame", echo_frame(1, b"plain on the TLS port")),
                       ("a TLS-shaped record out of place", b"\x17\x03\x03\x00\x05hello")]:
        with socket.create_connection(("127.0.0.1", srv.tls_port), timeout=10) as s:
            s.sendall(data)
            got = read_to_end(s)
            check(is_fatal_alert(got), "%s got %r, not one fatal alert" % (what, got))


def stalled(binary, certs, work):
    # A server of its own: a 300 ms handshake timeout on the shared one would close any
    # handshake that a busy machine delays that long (a wrong-CA client would then see the FIN,
    # never the certificate it is to refuse).
    srv = Server(binary, server_tls_args(certs, "--set", "tls.handshake_timeout_ms=300"), work)
    try:
        t0 = time.monotonic()
        with socket.create_connection(("127.0.0.1", srv.tls_port), timeout=10) as s:
            s.sendall(b"\x16\x03\x01")  # the start of a record header, then nothing
            try:
                check(s.recv(1) == b"", "the server sent bytes to a stalled handshake")
            except ConnectionResetError:
                pass
        waited = time.monotonic() - t0
        check(waited < 8, "closed only after %.1f s (handshake timeout 300 ms)" % waited)
        check(srv.wait_stat("handshake_timeouts", 1) >= 1, "timeout not counted")
    finally:
        srv.stop()


def shed_count(srv):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % srv.admin_port, timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith('ringrpc_connections_shed_total{reason="frame_stall"} '):
                return float(line.split()[1])
    return 0.0


def handshake_over_memory(sock, ctx):
    """A client session whose ciphertext we hold: so a test can send part of a record."""
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_hostname="localhost")
    while True:
        try:
            obj.do_handshake()
            break
        except ssl.SSLWantReadError:
            sock.sendall(out.read())
            data = sock.recv(65536)
            if not data:
                raise EOFError("closed during the handshake")
            inc.write(data)
    sock.sendall(out.read())
    return obj, inc, out


# Idle and handshake timeouts far away, the frame-stall timeout 1 s: only it can close.
STALL_ONLY = ["--set", "server.frame_stall_timeout_ms=1000", "--set", "server.idle_timeout_ms=300000",
              "--set", "tls.handshake_timeout_ms=120000"]


def partial_record_stalls(binary, certs, work):
    # frame_stall_timeout_ms applies to part of a TLS record as to part of a frame, in the
    # handshake and after it; idle and handshake timeouts are far away, so only it can close.
    srv = Server(binary, server_tls_args(certs, *STALL_ONLY), work)
    try:
        shed0 = shed_count(srv)
        with socket.create_connection(("127.0.0.1", srv.tls_port), timeout=30) as s:
            obj, inc, out = handshake_over_memory(s, client_context(certs["ca"] + ".pem"))
            def echo(call_id, payload):
                obj.write(echo_frame(call_id, payload))
                s.sendall(out.read())
                got = b""
                while len(got) < 4 or len(got) < 4 + int.from_bytes(got[:4], "little"):
                    try:
                        got += obj.read(65536)
                    except ssl.SSLWantReadError:  # tickets may come before the reply
                        data = s.recv(65536)
                        check(data != b"", "closed before reply %d" % call_id)
                        inc.write(data)
                check(pc.decode_body(got[4:])["payload"] == payload, "reply %d" % call_id)

            echo(1, b"whole")
            # Whole records only, then quiet for three stall timeouts: idle, not stalled.
            time.sleep(3)
            echo(2, b"still open after 3 s of whole records and silence")
            obj.write(echo_frame(3, b"never finished"))
            record = out.read()
            s.sendall(record[:len(record) // 2])  # half a record, then silence
            try:
                read_to_end(s)  # ends with the FIN (our close_notify may come first)
            except socket.timeout:
                raise AssertionError("still open 30 s after half a record (frame_stall_timeout 1 s)")
        check(shed_count(srv) >= shed0 + 1, "not counted as a frame stall")
    finally:
        srv.stop()


def partial_client_hello_stalls(binary, certs, work):
    srv = Server(binary, server_tls_args(certs, *STALL_ONLY), work)
    try:
        shed0 = shed_count(srv)
        with socket.create_connection(("127.0.0.1", srv.tls_port), timeout=30) as s:
            s.sendall(b"\x16\x03\x01\x02\x00\x01")  # a ClientHello's header and one byte of it
            try:
                check(read_to_end(s) == b"", "the server sent bytes to a half ClientHello")
            except socket.timeout:
                raise AssertionError("a half ClientHello still open after 30 s (frame_stall_timeout 1 s)")
        check(shed_count(srv) >= shed0 + 1, "the half ClientHello not counted as a frame stall")
        check(srv.tls_stats()["handshake_timeouts"] == 0, "closed by the handshake timeout instead")
    finally:
        srv.stop()


def refused(port, ctx, what):
    try:
        with tls_connect(port, ctx) as s:
            # TLS 1.3: the client finishes first; the server's verdict comes with the next read.
            s.sendall(echo_frame(1, b"x"))
            f = read_frame(s)
            raise AssertionError("%s got an answer: %s" % (what, pc.describe(f)))
    except (ssl.SSLError, EOFError, ConnectionResetError, BrokenPipeError):
        pass


def ringrpc_call(srv, certs):
    base = [CALL, "ringrpcs://127.0.0.1:%d" % srv.tls_port, "call", "echo", "-d", "over tls"]
    p = subprocess.run(base + ["--cacert", certs["ca"] + ".pem"], capture_output=True, text=True, timeout=30)
    check(p.returncode == 0 and p.stdout == "over tls", "ringrpc-call: %d %r %r" % (p.returncode, p.stdout, p.stderr))
    p = subprocess.run(base + ["--cacert", certs["other-ca"] + ".pem"], capture_output=True, text=True, timeout=30)
    check(p.returncode != 0 and "certificate verify failed" in p.stderr, "wrong CA: %d %r" % (p.returncode, p.stderr))
    p = subprocess.run(base + ["--insecure"], capture_output=True, text=True, timeout=30)
    check(p.returncode == 0 and p.stdout == "over tls", "--insecure: %d %r" % (p.returncode, p.stderr))


def mutual(binary, certs, work):
    srv = Server(binary, server_tls_args(certs, "--tls-ca", certs["ca"] + ".pem", "--tls-require-client-cert", "true"),
                 work)
    try:
        ca = certs["ca"] + ".pem"
        refused(srv.tls_port, client_context(ca), "a client without a certificate")
        refused(srv.tls_port, client_context(ca, certs["stranger"] + ".pem", certs["stranger"] + ".key"),
                "a client signed by another CA")
        check(srv.wait_stat("handshake_failures", 2) >= 2, "refusals not counted: %s" % srv.tls_stats())
        with tls_connect(srv.tls_port, client_context(ca, certs["client"] + ".pem", certs["client"] + ".key")) as s:
            s.sendall(echo_frame(5, b"trusted"))
            check(read_frame(s)["payload"] == b"trusted", "the trusted client was not served")
    finally:
        srv.stop()


def refused_at_accept(binary, certs, work):
    # Past max_connections a plaintext client gets an error frame saying why; a TLS client has
    # no session to read it in (it would see a broken record), so it gets only the FIN.
    srv = Server(binary, ["--max-connections", "1", *server_tls_args(certs)], work)
    try:
        with tls_connect(srv.tls_port, client_context(certs["ca"] + ".pem")) as first:
            first.sendall(echo_frame(1, b"first"))
            check(read_frame(first)["payload"] == b"first", "the first connection was not served")
            with socket.create_connection(("127.0.0.1", srv.tls_port), timeout=10) as second:
                data = b""
                try:
                    while True:
                        chunk = second.recv(4096)
                        if not chunk:
                            break
                        data += chunk
                except ConnectionResetError:
                    pass
                check(data == b"", "a refused TLS connection got %d plaintext bytes: %r" % (len(data), data[:40]))
    finally:
        srv.stop()


def startup_errors(binary, certs, work):
    cases = [
        ([certs["expired"] + ".pem", certs["expired"] + ".key"], "expired"),
        ([certs["server"] + ".pem", certs["client"] + ".key"], "does not match"),
        ([os.path.join(work, "missing.pem"), certs["server"] + ".key"], "No such file"),
        ([certs["server"] + ".key", certs["server"] + ".key"], "no usable PEM certificate"),
    ]
    for (cert, key), expected in cases:
        p = subprocess.run([binary, "--port", "0", "--tls-port", "0", "--tls-cert", cert, "--tls-key", key],
                           capture_output=True, text=True, timeout=20)
        check(p.returncode == 2, "%s: exit %d, want 2" % (expected, p.returncode))
        check(expected in p.stderr and p.stderr.count("\n") == 1,
              "%s: stderr %r" % (expected, p.stderr))


def reload(binary, certs, work):
    cert, key = os.path.join(work, "live.pem"), os.path.join(work, "live.key")
    for src, dst in [(certs["server"] + ".pem", cert), (certs["server"] + ".key", key)]:
        with open(src, "rb") as a, open(dst, "wb") as b:
            b.write(a.read())
    srv = Server(binary, ["--tls-port", "0", "--tls-cert", cert, "--tls-key", key], work)
    try:
        ctx = client_context(certs["ca"] + ".pem")
        old = tls_connect(srv.tls_port, ctx)
        check(dict(x[0] for x in old.getpeercert()["subject"])["commonName"] == "localhost", "first cert")
        for src, dst in [(certs["server2"] + ".pem", cert), (certs["server2"] + ".key", key)]:
            with open(src, "rb") as a, open(dst + ".new", "wb") as b:
                b.write(a.read())
            os.replace(dst + ".new", dst)
        srv.signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while "tls_reloaded" not in srv.stderr() and time.monotonic() < deadline:
            time.sleep(0.05)
        check("tls_reloaded" in srv.stderr(), "no tls_reloaded line: " + srv.stderr()[-500:])
        old.sendall(echo_frame(9, b"after reload"))
        check(read_frame(old)["payload"] == b"after reload", "the open connection broke")
        old.close()
        with tls_connect(srv.tls_port, ctx) as new:
            cn = dict(x[0] for x in new.getpeercert()["subject"])["commonName"]
            check(cn == "localhost-renewed", "new connection saw %r" % cn)
            new.sendall(echo_frame(10, b"new"))
            check(read_frame(new)["payload"] == b"new", "new connection")
        # A broken file on reload keeps the certificate in effect.
        with open(cert, "w") as f:
            f.write("not a certificate\n")
        srv.signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while "tls_reload_failed" not in srv.stderr() and time.monotonic() < deadline:
            time.sleep(0.05)
        check("tls_reload_failed" in srv.stderr(), "no tls_reload_failed line")
        with tls_connect(srv.tls_port, ctx) as new:
            new.sendall(echo_frame(11, b"kept"))
            check(read_frame(new)["payload"] == b"kept", "served after a failed reload")
    finally:
        check(srv.stop() == 0, "server exit status")


def main():
    with tempfile.TemporaryDirectory(prefix="ringrpc-tls.") as work:
        certs = make_all(work)
        # The default handshake timeout (10 s): no check here may depend on a handshake's speed.
        srv = Server(SERVER, server_tls_args(certs), work)
        try:
            st = srv.tls_stats()
            check(st["record_layer"] == "userspace OpenSSL", "/status tls: %s" % st)
            run("echo over TLS, 0 B .. 1 MiB, byte-exact", echo_sizes, srv, certs)
            run("200 pipelined calls over TLS", pipelined, srv, certs)
            run("plaintext port beside the TLS one", plaintext_beside, srv, certs)
            run("garbage instead of a ClientHello: that connection closes", garbage, srv, certs)
            run("HTTP, a plaintext frame, a stray record: one fatal alert, then the FIN",
                not_tls_gets_alert, srv, certs)
            if CALL:
                run("ringrpc-call ringrpcs:// (--cacert, wrong CA, --insecure)", ringrpc_call, srv, certs)
            print("     /status tls: %s" % srv.tls_stats())
        finally:
            rc = srv.stop()
            if rc != 0:
                failures.append("server exit %d: %s" % (rc, srv.stderr()[-2000:]))
        run("stalled handshake: closed after the timeout, counted", stalled, SERVER, certs, work)
        run("half a TLS record after the handshake: closed by frame_stall_timeout",
            partial_record_stalls, SERVER, certs, work)
        run("half a ClientHello: closed by frame_stall_timeout before the handshake timeout",
            partial_client_hello_stalls, SERVER, certs, work)
        run("mutual TLS: no certificate, other CA refused; trusted served", mutual, SERVER, certs, work)
        run("refused at accept (max_connections): a TLS client gets the FIN, no plaintext frame",
            refused_at_accept, SERVER, certs, work)
        run("start-up errors: expired, mismatched, missing, not a certificate", startup_errors,
            SERVER, certs, work)
        run("SIGHUP reload: open connection kept, new ones see the new cert", reload, SERVER, certs, work)
    if failures:
        print("FAILED: " + ", ".join(failures))
        return 1
    print("tls_server_test: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
