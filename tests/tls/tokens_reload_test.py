#!/usr/bin/env python3
"""SIGHUP re-reads ringrpc-server's --tokens-file: over one connection kept open across reloads,
a token added to the file is accepted and a removed one refused from the next call on; a file
that no longer parses, or is empty, keeps the tokens in effect and logs why (never the token).
Usage: tokens_reload_test.py PATH/TO/ringrpc-server"""

import os
import signal
import sys
import tempfile
import time

from tls_support import Checks, Server, pc

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
        try:
            srv = Server(SERVER, ["--tokens-file", tokens], d)
        except RuntimeError as e:
            if "io_uring" in str(e):
                print("SKIP: io_uring unavailable:", e)
                return 77
            raise
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
    return checks.exit_code()


if __name__ == "__main__":
    sys.exit(main())
