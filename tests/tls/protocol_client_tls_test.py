#!/usr/bin/env python3
"""protocol_client.py over Python's ssl against the TLS listener of a fresh ringrpc-server.
Usage: protocol_client_tls_test.py PATH/TO/ringrpc-server"""

import os
import subprocess
import sys
import tempfile

from tls_support import HERE, Server, make_ca, make_cert

with tempfile.TemporaryDirectory(prefix="ringrpc-tls-pc.") as work:
    make_ca(work, "ca")
    cert, key = make_cert(work, "server", "ca", "localhost", "DNS:localhost,IP:127.0.0.1")
    srv = Server(sys.argv[1], ["--tls-port", "0", "--tls-cert", cert, "--tls-key", key], work)
    try:
        rc = subprocess.run([sys.executable, os.path.join(HERE, "protocol_client_tls.py"),
                             "--port", str(srv.tls_port), "--cacert", os.path.join(work, "ca.pem")],
                            timeout=90).returncode
    finally:
        status = srv.stop()
    if status != 0:
        print("ringrpc-server exited %d: %s" % (status, srv.stderr()))
        rc = rc or 1
    sys.exit(rc)
