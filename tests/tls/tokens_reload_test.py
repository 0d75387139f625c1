#!/usr/bin/env python3
"""SIGHUP re-reads ringrpc-server's --tokens-file: over one connection kept open across reloads,
a token added to the file is accepted and a removed one refused from the next call on; a file
that no longer parses, or is empty, keeps the tokens in effect and logs why (never the token).
Then [auth] failure_burst from --config: past it, RPC and admin tokens are refused unchecked,
the connection closed at failures_per_connection, a warn line names the address, not the token.
Usage: tokens_reload_test.py PATH/TO/ringrpc-server"""

import os
import signal
import sys
import tempfile
import time
import urllib.error
import urllib.request

from tls_support import Checks, Server, pc, start_or_skip

SERVER = sys.argv[1]


def answer(conn, call_id, token):
    md = [("authorization", "Bearer " + token)]
    f = pc.call(conn, call_id, "echo", b"x", metadata=md)
    if f["kind"] == pc.REPLY:
        return "ok"
    if f["kind"] == pc.ERROR and f["status"] == pc.UNAUTHENTICATED:
        return "unauthenticated"
    return pc.describe(f)


def reload_and_wait(srv, event, count_before):
    """Sends SIGHUP and waits until the log line `event` appears once more than before."""
    srv.signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if srv.stderr().count(event) > count_before:
            return
        time.sleep(0.05)
    raise AssertionError("no %s after SIGHUP: %s" % (event, srv.stderr()))


def main():
    checks = Checks("tokens_reload")
    expect = checks.expect
    with tempfile.TemporaryDirectory() as d:
        tokens = os.path.join(d, "tokens")
        with open(tokens, "w") as f:
            f.write("alice tok-alice-1111\n")
        srv = start_or_skip(SERVER, ["--tokens-file", tokens], d)
        if srv is None:
            return 77
        try:
            conn = pc.Connection("127.0.0.1", srv.port, 10)
            expect(answer(conn, 1, "tok-alice-1111"), "ok", "alice's token at start")
            expect(answer(conn, 2, "tok-bob-2222"), "unauthenticated", "bob's token before it is added")

            with open(tokens + ".new", "w") as f:
                f.write("bob tok-bob-2222\n")
            os.replace(tokens + ".new", tokens)
            reload_and_wait(srv, "tokens_reloaded", 0)
            expect(answer(conn, 3, "tok-bob-2222"), "ok", "bob's token after the reload, same connection")
            expect(answer(conn, 4, "tok-alice-1111"), "unauthenticated", "alice's token once removed")

            for i, bad in enumerate(["bob tok-bob-2222 echo,,\n", "# nobody\n"]):
                with open(tokens, "w") as f:
                    f.write(bad)
                reload_and_wait(srv, "tokens_reload_failed", i)
                expect(answer(conn, 5 + 2 * i, "tok-bob-2222"), "ok", "bad file %d: bob's token kept" % i)
                expect(answer(conn, 6 + 2 * i, "tok-alice-1111"), "unauthenticated",
                       "bad file %d: alice still refused" % i)
            err = srv.stderr()
            expect("tok-bob-2222" in err or "tok-alice-1111" in err, False, "no token in the log")
            expect(srv.proc.poll(), None, "server still running")
            conn.close()
        finally:
            rc = srv.stop()
        expect(rc, 0, "server exit status")
    failure_budget_checks(expect)
    return checks.exit_code()


def admin_status(srv, token):
    req = urllib.request.Request("http://127.0.0.1:%d/status" % srv.admin_port,
                                 headers={"Authorization": "Bearer " + token})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers)


def failure_budget_checks(expect):
    with tempfile.TemporaryDirectory() as d:
        tokens = os.path.join(d, "tokens")
        with open(tokens, "w") as f:
            f.write("alice tok-alice-1111\n")
        config = os.path.join(d, "server.toml")
        with open(config, "w") as f:
            # One refill a minute: nothing comes back while this runs.
            f.write('[auth]\ntokens_file = "%s"\nfailure_burst = 3\nfailure_rate_per_minute = 1\n'
                    'failures_per_connection = 5\n' % tokens)
        srv = Server(SERVER, ["--config", config, "--admin-tokens-file", tokens], d)
        try:
            conn = pc.Connection("127.0.0.1", srv.port, 10)
            for i in range(1, 4):
                expect(answer(conn, i, "guess-%d" % i), "unauthenticated", "guess %d, within the budget" % i)
            f = pc.call(conn, 4, "echo", b"x", metadata=[("authorization", "Bearer tok-alice-1111")])
            expect((f["status"], "too many failed authentications from 127.0.0.1" in f["message"]),
                   (pc.UNAUTHENTICATED, True), "past the budget the right token is refused unchecked")
            expect(f["retry_after_ms"] > 0, True, "with a retry-after")
            expect(answer(conn, 5, "guess-5"), "unauthenticated", "the 5th failure is answered")
            expect(conn.expect_eof(), True, "closed after failures_per_connection")
            # The admin port keeps its own budget: three 401s, then 429 even for the right token.
            for i in range(3):
                expect(admin_status(srv, "guess")[0], 401, "admin guess %d" % i)
            code, headers = admin_status(srv, "tok-alice-1111")
            expect((code, "Retry-After" in headers), (429, True), "admin past the budget")
            err = srv.stderr()
            expect("event=auth_failures_limited" in err and "peer=127.0.0.1" in err, True,
                   "a warn line names the address")
            expect("port=admin" in err and "port=rpc" in err, True, "for each port")
            expect(any(t in err for t in ("guess", "tok-alice-1111")), False, "no token in the log")
        finally:
            rc = srv.stop()
        expect(rc, 0, "server exit status (budget)")


if __name__ == "__main__":
    sys.exit(main())
