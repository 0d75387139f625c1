#!/usr/bin/env python3
"""gRPC over TLS on ringrpc-server's TLS port: ALPN h2 selects gRPC, ringrpc/1 frames.

Usage: grpcio_tls_test.py RINGRPC_SERVER. Certificates are made per run with the openssl CLI
(tests/tls/tls_support.py). Exits 77 without grpcio or io_uring.
"""
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tls"))
import tls_support as ts  # noqa: E402

try:
    import grpc
except ImportError:
    print("python3-grpcio is not installed: skipped")
    sys.exit(77)

server_exe = sys.argv[1]
checks = ts.Checks("grpcio_tls")


def read(path):
    with open(path, "rb") as f:
        return f.read()


def code_of(fn):
    try:
        fn()
    except grpc.RpcError as e:
        return e.code()
    return grpc.StatusCode.OK


def secure_channel(port, certs, client=None):
    creds = grpc.ssl_channel_credentials(
        root_certificates=read(certs["ca"] + ".pem"),
        private_key=read(certs[client] + ".key") if client else None,
        certificate_chain=read(certs[client] + ".pem") if client else None)
    return grpc.secure_channel(f"127.0.0.1:{port}", creds,
                               options=[("grpc.ssl_target_name_override", "localhost")])


def frames_still_work(srv, certs, what, client=None):
    """A ringrpc client (ALPN ringrpc/1) on the same TLS port."""
    ctx = ts.client_context(certs["ca"] + ".pem",
                            certs[client] + ".pem" if client else None,
                            certs[client] + ".key" if client else None)
    with ts.tls_connect(srv.tls_port, ctx) as s:
        checks.expect(s.selected_alpn_protocol(), "ringrpc/1", what + ": a frames client negotiates ringrpc/1")
        s.sendall(ts.echo_frame(7, b"frames"))
        reply = ts.read_frame(s)
        checks.expect((reply["call_id"], reply["payload"]), (7, b"frames"), what + ": and gets its echo")


with tempfile.TemporaryDirectory() as d:
    certs = ts.make_all(d)

    # TLS: a gRPC client verifies the server and calls through ALPN h2.
    srv = ts.start_or_skip(server_exe, ts.server_tls_args(certs), d)
    if srv is None:
        sys.exit(77)
    try:
        ch = secure_channel(srv.tls_port, certs)
        checks.expect(ch.unary_unary("/echo")(b"over tls", timeout=10), b"over tls", "gRPC over TLS: /echo")
        reply, call = ch.unary_unary("/mirror").with_call(b"m", timeout=10, metadata=[("k", "v")])
        checks.expect(dict(call.initial_metadata()).get("k"), "v", "gRPC over TLS: metadata both ways")
        checks.expect(code_of(lambda: ch.unary_unary("/no.such")(b"", timeout=10)),
                      grpc.StatusCode.UNIMPLEMENTED, "gRPC over TLS: UNIMPLEMENTED")
        big = os.urandom(700_000)
        checks.expect(ch.unary_unary("/echo")(big, timeout=10) == big, True, "gRPC over TLS: a 700 KB message")
        ch.close()
        frames_still_work(srv, certs, "TLS")
        # The plaintext port serves gRPC beside it.
        plain = grpc.insecure_channel(f"127.0.0.1:{srv.port}")
        checks.expect(plain.unary_unary("/echo")(b"plain", timeout=10), b"plain", "the plaintext port too")
        plain.close()
    finally:
        srv.stop()

    # Mutual TLS: the client's certificate is required; gRPC clients present theirs.
    srv = ts.start_or_skip(server_exe, ts.server_tls_args(certs, "--tls-ca", certs["ca"] + ".pem",
                                                           "--tls-require-client-cert", "true"), d)
    try:
        ch = secure_channel(srv.tls_port, certs, client="client")
        checks.expect(ch.unary_unary("/echo")(b"mtls", timeout=10), b"mtls", "mTLS: a gRPC client with a certificate")
        ch.close()
        ch = secure_channel(srv.tls_port, certs)
        checks.expect(code_of(lambda: ch.unary_unary("/echo")(b"x", timeout=5)), grpc.StatusCode.UNAVAILABLE,
                      "mTLS: a gRPC client without a certificate is refused")
        ch.close()
        ch = secure_channel(srv.tls_port, certs, client="stranger")
        checks.expect(code_of(lambda: ch.unary_unary("/echo")(b"x", timeout=5)), grpc.StatusCode.UNAVAILABLE,
                      "mTLS: a certificate from another CA is refused")
        ch.close()
        frames_still_work(srv, certs, "mTLS", client="client")
    finally:
        srv.stop()

    # gRPC off: ALPN h2 is not selected, so a gRPC client fails its handshake.
    srv = ts.start_or_skip(server_exe, ts.server_tls_args(certs, "--no-grpc"), d)
    try:
        ch = secure_channel(srv.tls_port, certs)
        checks.expect(code_of(lambda: ch.unary_unary("/echo")(b"x", timeout=5)), grpc.StatusCode.UNAVAILABLE,
                      "--no-grpc: gRPC over TLS is refused")
        ch.close()
        frames_still_work(srv, certs, "--no-grpc")
    finally:
        srv.stop()

sys.exit(checks.exit_code())
