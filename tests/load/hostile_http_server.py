#!/usr/bin/env python3
"""A small HTTP/1.1 target on 127.0.0.1 that answers like a hostile server would: every
fourth call a 500 whose body and headers carry markup (<script>, "><img onerror=...>), the
others 200 "ok". It prints "listening on 127.0.0.1:PORT" (scripts/lib.sh start_server) and
serves until killed. Usage: hostile_http_server.py"""

import http.server
import socketserver
import sys

HOSTILE = '<script>alert(1)</script>"><img src=x onerror=alert(2)>'


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: ringrpc-load reuses its connections
    # One send per answer: headers and body apart would meet the client's delayed ACK (40 ms).
    wbufsize = 1 << 16
    disable_nagle_algorithm = True
    calls = 0

    def do_GET(self):
        Handler.calls += 1
        failing = Handler.calls % 4 == 0
        body = (HOSTILE if failing else "ok").encode()
        self.send_response(500 if failing else 200, HOSTILE if failing else "OK")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Hostile", HOSTILE)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    server = Server(("127.0.0.1", 0), Handler)
    print("listening on 127.0.0.1:%d" % server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
