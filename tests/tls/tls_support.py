"""Shared pieces of the TLS tests: certificates made with the openssl CLI into a temporary
directory (no private key is ever committed), a ringrpc-server started and stopped by PID, and
frames over Python's ssl module (encoder/decoder of tests/wire/protocol_client.py)."""

import json
import os
import signal
import socket
import ssl
import struct
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "wire"))
import protocol_client as pc  # noqa: E402


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=30)


def make_ca(d, name):
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", name + ".key", "-out", name + ".pem", "-days", "2", "-subj", "/CN=" + name,
            cwd=d)


def make_cert(d, name, ca, cn, san, days="2"):
    """A key and a certificate signed by `ca`; `days` may be "-1" (already expired)."""
    with open(os.path.join(d, name + ".ext"), "w") as f:
        f.write("subjectAltName=" + san + "\n")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", name + ".key", "-out", name + ".csr", "-subj", "/CN=" + cn, cwd=d)
    openssl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".pem", "-CAkey", ca + ".key",
            "-CAcreateserial", "-out", name + ".pem", "-days", days, "-extfile", name + ".ext",
            cwd=d)
    return os.path.join(d, name + ".pem"), os.path.join(d, name + ".key")


def make_all(d):
    """ca, server (localhost, 127.0.0.1), client (signed by ca), other-CA client, expired."""
    make_ca(d, "ca")
    make_ca(d, "other-ca")
    make_cert(d, "server", "ca", "localhost", "DNS:localhost,IP:127.0.0.1")
    make_cert(d, "server2", "ca", "localhost-renewed", "DNS:localhost,IP:127.0.0.1")
    make_cert(d, "client", "ca", "client-1", "URI:spiffe://test/client-1,DNS:client-1.test")
    make_cert(d, "stranger", "other-ca", "stranger", "DNS:stranger.test")
    make_cert(d, "expired", "ca", "localhost", "DNS:localhost", days="-1")
    return {k: os.path.join(d, k) for k in
            ["ca", "other-ca", "server", "server2", "client", "stranger", "expired"]}


class Server:
    """ringrpc-server on 127.0.0.1 with free ports; stopped by PID (TERM, then KILL)."""

    def __init__(self, binary, args, workdir, prefix=()):
        self.out = open(os.path.join(workdir, "server.out"), "w+")
        self.err = open(os.path.join(workdir, "server.err"), "w+")
        self.proc = subprocess.Popen([*prefix, binary, "--port", "0", "--readers", "1", "--handlers", "1",
                                      "--admin-port", "0", *args],
                                     stdout=self.out, stderr=self.err)
        self.port = self.tls_port = self.admin_port = None
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            self.out.seek(0)
            for line in self.out.read().splitlines():
                if line.startswith("listening on "):
                    self.port = int(line.rsplit(":", 1)[1])
                elif line.startswith("tls listening on "):
                    self.tls_port = int(line.rsplit(":", 1)[1])
                elif line.startswith("admin on "):
                    self.admin_port = int(line.rstrip("/").rsplit(":", 1)[1])
            if self.port and self.admin_port and (self.tls_port or "--tls-cert" not in args):
                return
            if self.proc.poll() is not None:
                raise RuntimeError("ringrpc-server exited %d: %s" % (self.proc.returncode, self.stderr()))
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("ringrpc-server did not start: " + self.stderr())

    def stderr(self):
        self.err.flush()
        self.err.seek(0)
        return self.err.read()

    def status(self):
        with urllib.request.urlopen("http://127.0.0.1:%d/status" % self.admin_port, timeout=10) as r:
            return json.loads(r.read())

    def tls_stats(self):
        return self.status()["tls"]

    def wait_stat(self, key, at_least, seconds=10):
        deadline = time.monotonic() + seconds
        while True:
            v = self.tls_stats()[key]
            if v >= at_least or time.monotonic() > deadline:
                return v
            time.sleep(0.05)

    def signal(self, sig):
        self.proc.send_signal(sig)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return self.proc.returncode


def server_tls_args(certs, *more):
    """ringrpc-server's arguments for a TLS port with make_all's server certificate, then `more`."""
    return ["--tls-port", "0", "--tls-cert", certs["server"] + ".pem", "--tls-key", certs["server"] + ".key",
            *more]


def start_or_skip(binary, args, workdir):
    """Server(binary, args, workdir), or None after a SKIP line where the server cannot start for
    want of io_uring (the test then exits 77); any other failure to start raises."""
    try:
        return Server(binary, args, workdir)
    except RuntimeError as e:
        if "io_uring" in str(e):
            print("SKIP: io_uring unavailable:", e)
            return None
        raise


def client_context(ca=None, cert=None, key=None, alpn=True):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if ca:
        ctx.load_verify_locations(ca)
    else:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if cert:
        ctx.load_cert_chain(cert, key)
    if alpn:
        ctx.set_alpn_protocols(["ringrpc/1"])
    # The server closes a failed connection without close_notify: that is an end, not an error.
    ctx.options |= getattr(ssl, "OP_IGNORE_UNEXPECTED_EOF", 0)
    return ctx


def tls_connect(port, ctx, server_name="localhost", timeout=10):
    raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return ctx.wrap_socket(raw, server_hostname=server_name)


def recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise EOFError("closed after %d of %d bytes" % (len(buf), n))
        buf += chunk
    return bytes(buf)


def read_frame(sock):
    (n,) = struct.unpack("<I", recv_exact(sock, 4))
    return pc.decode_body(recv_exact(sock, n))


def echo_frame(call_id, payload):
    return pc.encode_frame(call_id=call_id, kind=pc.REQUEST, method="echo", payload=payload)


class Checks:
    """Named checks that each print ok/FAIL and go on, so one run reports every failure."""

    def __init__(self, test):
        self.test = test
        self.failures = []

    def expect(self, got, want, what):
        if got != want:
            self.failures.append(what)
            print("FAIL %s: got %r, expected %r" % (what, got, want))
        else:
            print("ok   %s" % what)

    def exit_code(self):
        if self.failures:
            print("%s: %d failure(s): %s" % (self.test, len(self.failures), ", ".join(self.failures)))
            return 1
        print("%s: all checks passed" % self.test)
        return 0
