#!/usr/bin/env python3
"""ringrpc-server ends a TLS connection it closes in order with close_notify before the FIN:
an idle connection shed by --idle-timeout-ms, one shed by --frame-stall-timeout-ms (half a
frame, then nothing), open connections when the server stops (SIGTERM), and a connection whose
client sent its own close_notify (answered, after the reply still owed). A client that does not ignore truncation (no OP_IGNORE_UNEXPECTED_EOF,
suppress_ragged_eofs off) then reads a clean end, where a bare FIN raises SSLEOFError.
Usage: close_notify_test.py PATH/TO/ringrpc-server"""

import signal
import socket
import ssl
import sys
import tempfile
import time

from tls_support import Checks, echo_frame, make_all, pc, read_frame, server_tls_args, start_or_skip

SERVER = sys.argv[1]
checks = Checks("close_notify")
expect = checks.expect


def strict_context(ca):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(ca)
    ctx.set_alpn_protocols(["ringrpc/1"])
    ctx.options &= ~getattr(ssl, "OP_IGNORE_UNEXPECTED_EOF", 0)
    return ctx


def connect(port, ctx):
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    return ctx.wrap_socket(raw, server_hostname="localhost", suppress_ragged_eofs=False)


def end_of(s):
    """'close_notify' for a clean end, 'truncated' for a FIN without it, else what came."""
    try:
        data = s.recv(100)
    except ssl.SSLEOFError:
        return "truncated"
    except ssl.SSLZeroReturnError:
        return "close_notify"  # the peer's, read after ours was sent (both sides shut down)
    except (ssl.SSLError, OSError) as e:
        return "error %s" % e
    return "close_notify" if data == b"" else "data %r" % data[:20]



def unwrap_end(s):
    """Our close_notify, then the server's: 'close_notify' when it answered before closing."""
    try:
        s.unwrap().close()
    except (ssl.SSLError, OSError) as e:
        s.close()
        return "error %s" % e
    return "close_notify"


def unwrap_after_reply(s):
    """Sends close_notify with a call outstanding; reads the reply, then the server's end."""
    # Non-blocking, SSL_shutdown sends ours and stops at waiting for the peer's (SSLWantRead);
    # blocking again, reading goes on, as a half-closed TLS stream allows.
    s.setblocking(False)
    try:
        s._sslobj.shutdown()  # the ssl module has no half-close of its own
    except ssl.SSLWantReadError:
        pass
    except (ssl.SSLError, OSError) as e:
        return "error at shutdown %s" % e
    s.settimeout(10)
    try:
        f = read_frame(s)
    except (ssl.SSLError, OSError, EOFError) as e:
        return "no reply: %s" % e
    if f["kind"] != pc.REPLY or f["call_id"] != 7:
        return "unexpected frame"
    return "reply then " + end_of(s)


def echo_once(s, call_id):
    s.sendall(echo_frame(call_id, b"hello"))
    f = read_frame(s)
    return f["kind"] == pc.REPLY and f["payload"] == b"hello"


def idle_shed(srv, s, ctx):
    expect(end_of(s), "close_notify", "idle timeout ends with close_notify")
    s.close()


def frame_stall_shed(srv, s, ctx):
    s.sendall(echo_frame(2, b"hello")[:7])  # the length and a little: then nothing
    expect(end_of(s), "close_notify", "frame-stall shed ends with close_notify")
    s.close()


def peer_close_notify(srv, s, ctx):
    expect(unwrap_end(s), "close_notify", "the client's close_notify is answered")
    # A call still owed when the client ends: the reply comes first, then ours.
    s = connect(srv.tls_port, ctx)
    s.sendall(pc.encode_frame(call_id=7, kind=pc.REQUEST, method="sleep", payload=b"200000"))
    expect(unwrap_after_reply(s), "reply then close_notify", "close_notify after the reply still owed")
    s.close()


def server_stop(srv, s, ctx):
    srv.signal(signal.SIGTERM)
    expect(end_of(s), "close_notify", "server stop ends with close_notify")
    s.close()
    srv.proc.wait(15)  # the one SIGTERM drains and exits; stop() then sends nothing


# Each: what the checks call it, the server's own, the server's extra arguments, then the check
# on a connection that has made one call.
CASES = [
    ("idle", "idle", ["--idle-timeout-ms", "300"], idle_shed),
    ("shed", "shed", ["--frame-stall-timeout-ms", "300"], frame_stall_shed),
    ("peer close_notify", "peer close_notify", [], peer_close_notify),
    ("stop", "stopped", [], server_stop),
]


def main():
    with tempfile.TemporaryDirectory() as d:
        certs = make_all(d)
        ctx = strict_context(certs["ca"] + ".pem")
        for name, server_name, args, check in CASES:
            srv = start_or_skip(SERVER, server_tls_args(certs, *args), d)
            if srv is None:
                return 77
            try:
                s = connect(srv.tls_port, ctx)
                expect(echo_once(s, 1), True, "%s: a call first" % name)
                check(srv, s, ctx)
            finally:
                expect(srv.stop(), 0, "%s server exit status" % server_name)
    return checks.exit_code()


if __name__ == "__main__":
    sys.exit(main())
