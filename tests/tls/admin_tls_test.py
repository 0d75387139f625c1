#!/usr/bin/env python3
"""ringrpc-server's admin port over TLS (--admin-tls, the RPC listener's certificate) and behind
bearer tokens (--admin-tokens-file), over real loopback sockets with Python's ssl module:
 - /status and /metrics answer 200 to a client that verifies the certificate, and the page
   ends with close_notify;
 - a plaintext request to the TLS admin port is closed without a page (and logged), the server
   goes on; a handshake that stalls is closed by the request timeout; both are counted;
 - no token: 401 with WWW-Authenticate: Bearer; a wrong one: 401; the right one: 200;
   /healthz and /readyz answer without a token;
 - SIGHUP re-reads the tokens file (the new token works, the old one no longer) and the
   certificate (new handshakes get the renewed one); no token ever appears in the output;
 - start-up fails clearly for --admin-tls without --tls-cert and for an empty tokens file.
Usage: admin_tls_test.py PATH/TO/ringrpc-server"""

import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time

from tls_support import Checks, make_all, start_or_skip

SERVER = sys.argv[1]
checks = Checks("admin_tls")
expect = checks.expect



def verifying_context(ca):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # checks the chain and the name "localhost"
    ctx.load_verify_locations(ca)
    ctx.set_alpn_protocols(["h2", "http/1.1"])  # as curl offers: the server must pick http/1.1
    # Strict about the end: a page cut by a bare FIN raises instead of reading as complete.
    ctx.options &= ~getattr(ssl, "OP_IGNORE_UNEXPECTED_EOF", 0)
    return ctx


def https_get(port, ctx, path, token=None, header=None):
    """(status, headers text, body, end, peer subject CN) of one request."""
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    s = ctx.wrap_socket(raw, server_hostname="localhost", suppress_ragged_eofs=False)
    cn = dict(x[0] for x in s.getpeercert()["subject"]).get("commonName")
    if s.selected_alpn_protocol() != "http/1.1":
        cn = "ALPN %s" % s.selected_alpn_protocol()
    req = "GET %s HTTP/1.1\r\nHost: localhost\r\n" % path
    if token is not None:
        req += "Authorization: Bearer %s\r\n" % token
    if header is not None:
        req += header + "\r\n"
    s.sendall((req + "\r\n").encode())
    data = b""
    end = "close_notify"
    while True:
        try:
            chunk = s.recv(65536)
        except ssl.SSLEOFError:
            end = "truncated"
            break
        if not chunk:
            break
        data += chunk
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    status = int(lines[0].split(" ")[1]) if lines[0].startswith("HTTP/1.1 ") else None
    return status, "\r\n".join(lines[1:]), body.decode(), end, cn


def plaintext_to_tls(port):
    """What a plain HTTP client gets from the TLS admin port: 'closed' when no HTTP came back."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"GET /status HTTP/1.1\r\nHost: localhost\r\n\r\n")
    data = b""  # noqa: the server's alert, if any, is not HTTP
    try:
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    except ConnectionResetError:
        pass
    s.close()
    return "http" if data.startswith(b"HTTP/") else "closed"


def stalled_handshake(port):
    """Half a ClientHello, then silence: 'closed' once the server gives up (within 10 s)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
    try:
        data = s.recv(4096)
    except ConnectionResetError:
        data = b""
    except socket.timeout:
        data = None
    s.close()
    return "closed" if data == b"" else "still open" if data is None else "answered %r" % data[:10]


def wait_for(srv, text, count_before, seconds=10):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if srv.stderr().count(text) > count_before:
            return True
        time.sleep(0.05)
    return False


def startup_error(args, d):
    p = subprocess.run([SERVER, "--port", "0", "--readers", "1", "--handlers", "1", *args],
                       cwd=d, capture_output=True, text=True, timeout=30)
    return p.returncode, p.stderr


def main():
    with tempfile.TemporaryDirectory() as d:
        certs = make_all(d)
        ca = certs["ca"] + ".pem"
        # The server reads these paths; SIGHUP later finds the renewed certificate in them.
        cert, key = os.path.join(d, "live.pem"), os.path.join(d, "live.key")
        shutil.copy(certs["server"] + ".pem", cert)
        shutil.copy(certs["server"] + ".key", key)
        tokens = os.path.join(d, "admin-tokens")
        with open(tokens, "w") as f:
            f.write("# operators\nops tok-admin-AAAA1111\n")
        tls_args = ["--tls-port", "0", "--tls-cert", cert, "--tls-key", key]

        rc, err = startup_error(["--admin-port", "0", "--admin-tls"], d)
        expect(rc, 2, "--admin-tls without --tls-cert: exit status")
        expect("admin.tls" in err and "tls.cert" in err, True, "--admin-tls without --tls-cert: says why (%s)" % err.strip())
        empty = os.path.join(d, "empty-tokens")
        with open(empty, "w") as f:
            f.write("# nobody\n")
        rc, err = startup_error(["--admin-port", "0", "--admin-tokens-file", empty], d)
        expect(rc, 2, "empty admin tokens file: exit status")
        expect("holds no tokens" in err, True, "empty admin tokens file: says why (%s)" % err.strip())

        srv = start_or_skip(SERVER, [*tls_args, "--admin-tls", "--admin-tokens-file", tokens], d)
        if srv is None:
            return 77
        try:
            srv.out.seek(0)
            expect("admin on https://127.0.0.1:%d/" % srv.admin_port in srv.out.read(), True,
                   "start-up line says https")
            ctx = verifying_context(ca)
            st, _, body, end, cn = https_get(srv.admin_port, ctx, "/status", "tok-admin-AAAA1111")
            expect(st, 200, "TLS /status with the token")
            expect('"state"' in body, True, "TLS /status is the status page")
            expect(end, "close_notify", "TLS page ends with close_notify")
            expect(cn, "localhost", "admin certificate is the RPC listener's")
            st, _, body, _, _ = https_get(srv.admin_port, ctx, "/metrics", "tok-admin-AAAA1111")
            expect(st, 200, "TLS /metrics with the token")
            expect("ringrpc_" in body, True, "TLS /metrics is the metrics page")

            st, headers, _, _, _ = https_get(srv.admin_port, ctx, "/status")
            expect(st, 401, "no token: 401")
            expect('WWW-Authenticate: Bearer realm="ringrpc-admin"' in headers, True, "no token: WWW-Authenticate")
            st, headers, body, _, _ = https_get(srv.admin_port, ctx, "/status", "tok-wrong-BBBB2222")
            expect(st, 401, "wrong token: 401")
            expect('error="invalid_token"' in headers, True, "wrong token: invalid_token")
            expect("tok-wrong" in body + headers, False, "wrong token not echoed")
            st, _, _, _, _ = https_get(srv.admin_port, ctx, "/status", header="Authorization: Basic b3BzOng=")
            expect(st, 401, "Basic credentials: 401")
            expect(https_get(srv.admin_port, ctx, "/healthz")[0], 200, "/healthz without a token")
            expect(https_get(srv.admin_port, ctx, "/readyz")[0], 200, "/readyz without a token")

            before = srv.stderr().count("admin_tls_failed")
            expect(plaintext_to_tls(srv.admin_port), "closed", "plaintext request to the TLS admin port: closed")
            expect(wait_for(srv, "admin_tls_failed", before), True, "plaintext request: logged")
            expect("use https://" in srv.stderr(), True, "plaintext request: the log line says what happened")
            expect(https_get(srv.admin_port, ctx, "/healthz")[0], 200, "still serving after the plaintext one")
            expect(stalled_handshake(srv.admin_port), "closed", "a handshake that stalls is closed (request timeout)")
            metrics = https_get(srv.admin_port, ctx, "/metrics", "tok-admin-AAAA1111")[2]
            expect("\nringrpc_admin_tls_failures_total 2\n" in metrics, True,
                   "plaintext request and stalled handshake: counted in /metrics")
            expect("\nringrpc_admin_unauthorized_total 3\n" in metrics, True, "401s counted in /metrics")

            # SIGHUP: a new tokens file and a renewed certificate, both taken without a restart.
            with open(tokens + ".new", "w") as f:
                f.write("ops tok-admin-CCCC3333\n")
            os.replace(tokens + ".new", tokens)
            shutil.copy(certs["server2"] + ".pem", cert + ".new")
            shutil.copy(certs["server2"] + ".key", key + ".new")
            os.replace(key + ".new", key)
            os.replace(cert + ".new", cert)
            srv.signal(signal.SIGHUP)
            expect(wait_for(srv, "admin_tokens_reloaded", 0), True, "SIGHUP: admin tokens reloaded")
            expect(wait_for(srv, "tls_reloaded", 0), True, "SIGHUP: certificate reloaded")
            st, _, _, _, cn = https_get(srv.admin_port, ctx, "/status", "tok-admin-CCCC3333")
            expect(st, 200, "after SIGHUP: the new token works")
            expect(cn, "localhost-renewed", "after SIGHUP: the admin port has the renewed certificate")
            expect(https_get(srv.admin_port, ctx, "/status", "tok-admin-AAAA1111")[0], 401,
                   "after SIGHUP: the old token is refused")

            with open(tokens, "w") as f:
                f.write("# emptied by mistake\n")
            before = srv.stderr().count("admin_tokens_reload_failed")
            srv.signal(signal.SIGHUP)
            expect(wait_for(srv, "admin_tokens_reload_failed", before), True, "emptied file: reload refused")
            expect(https_get(srv.admin_port, ctx, "/status", "tok-admin-CCCC3333")[0], 200,
                   "emptied file: the tokens in effect are kept")
            expect(https_get(srv.admin_port, ctx, "/status")[0], 401, "emptied file: the pages stay closed")

            srv.out.seek(0)
            logs = srv.stderr() + srv.out.read()
            expect(any(t in logs for t in ["AAAA1111", "BBBB2222", "CCCC3333"]), False, "no token in the logs")
            expect(srv.proc.poll(), None, "server still running")
        finally:
            rc = srv.stop()
        expect(rc, 0, "server exit status")
    return checks.exit_code()


if __name__ == "__main__":
    sys.exit(main())
