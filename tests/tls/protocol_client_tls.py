#!/usr/bin/env python3
"""Runs tests/wire/protocol_client.py (the client written from docs/protocol.md alone) over TLS:
every socket it opens is wrapped by Python's ssl module, nothing else changes, because frames
inside TLS are the same as on the plaintext port.
Usage: protocol_client_tls.py --port TLS_PORT --cacert CA.pem [protocol_client.py options]"""

import argparse
import os
import socket
import sys

from tls_support import client_context, pc

ap = argparse.ArgumentParser(add_help=False)
ap.add_argument("--cacert", required=True)
ap.add_argument("--server-name", default="localhost")
ours, rest = ap.parse_known_args()

ctx = client_context(ours.cacert)
plain_connect = socket.create_connection


def tls_connection(*args, **kwargs):
    return ctx.wrap_socket(plain_connect(*args, **kwargs), server_hostname=ours.server_name)


pc.socket.create_connection = tls_connection
sys.argv = [os.path.join(os.path.dirname(pc.__file__), "protocol_client.py"), *rest]
sys.exit(pc.main())
