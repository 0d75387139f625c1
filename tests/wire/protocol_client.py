#!/usr/bin/env python3
"""Independent ringrpc client, written from docs/protocol.md alone.

Standard library only (struct, socket): frames are built by hand with the fixed layout of
docs/protocol.md section 4.3 and parsed by following root offset, vtable and field offsets
(section 4.2). Checks a running ringrpc-server (built-in methods) given --port.

Exit 0 when every check passes; otherwise prints FAIL: ... and exits 1.
"""

import argparse
import os
import re
import socket
import struct
import sys
import time

# Kind and Status values (docs/protocol.md sections 3 and 6).
REQUEST, ONE_WAY, REPLY, ERROR, CANCEL, PING, PONG = range(7)
# Stream kinds (section 13), and the stream_kind values of StreamOpen.
STREAM_OPEN, STREAM_MESSAGE, STREAM_HALF_CLOSE, STREAM_CREDIT = range(7, 11)
SERVER_STREAM, CLIENT_STREAM, BIDI_STREAM = 1, 2, 3
OK, UNKNOWN_METHOD, BAD_REQUEST, FRAME_TOO_LARGE, SERVER_BUSY, DEADLINE_EXCEEDED, \
    SHUTTING_DOWN, INTERNAL, CANCELLED, UNAUTHENTICATED, PERMISSION_DENIED = range(11)
# Appended later (section 6): sent only by methods, never by the server on its own.
NOT_FOUND, INVALID_ARGUMENT, ALREADY_EXISTS, FAILED_PRECONDITION, UNAVAILABLE, UNIMPLEMENTED, \
    RESOURCE_EXHAUSTED, ABORTED, OUT_OF_RANGE, DATA_LOSS, UNKNOWN = range(11, 22)

# Field ids (= vtable slots).
F_CALL_ID, F_KIND, F_METHOD, F_TIMEOUT_US, F_PAYLOAD, F_STATUS, F_MESSAGE, F_RETRY, \
    F_METADATA, F_TRAILERS, F_DETAILS, F_STREAM_KIND, F_CREDIT_MESSAGES, F_CREDIT_BYTES = range(14)
# Fields of a Metadata table (section 3.1).
M_KEY, M_VALUE = range(2)


class ProtocolError(Exception):
    pass


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)


# ---------------------------------------------------------------- encoding (section 4.3)

TABLE_POS = 32        # table position from the first byte of the prefix
ROOT = TABLE_POS - 4  # root uoffset is stored at position 4
VTABLE_POS = 8
TABLE_SIZE = 40
# Field offsets from the table start, by field id.
FIELD_OFFSETS = {
    F_CALL_ID: 8, F_KIND: 38, F_METHOD: 24, F_TIMEOUT_US: 16,
    F_PAYLOAD: 28, F_STATUS: 36, F_MESSAGE: 32, F_RETRY: 4,
}


def _pad4(b):
    return b + b"\0" * (-len(b) % 4)


def _encode_metadata(pairs, pos):
    """The metadata objects of section 4.4 laid out from position `pos` (a multiple of 4):
    one shared Metadata vtable, the vector, the tables, then the keys and values. Returns
    (bytes, position of the vector)."""
    n = len(pairs)
    vt_pos = pos
    vtable = struct.pack("<HHHH", 8, 12, 4, 8)           # 2 entries; key at +4, value at +8
    vec_pos = vt_pos + len(vtable)
    tables_pos = vec_pos + 4 + 4 * n
    data_pos = tables_pos + 12 * n
    data = b""
    tables = b""
    offsets = b""
    for i, (key, value) in enumerate(pairs):
        key = key.encode() if isinstance(key, str) else bytes(key)
        value = value.encode() if isinstance(value, str) else bytes(value)
        t = tables_pos + 12 * i
        key_at = data_pos + len(data)
        data += _pad4(struct.pack("<I", len(key)) + key + b"\0")
        value_at = data_pos + len(data)
        data += _pad4(struct.pack("<I", len(value)) + value)
        offsets += struct.pack("<I", t - (vec_pos + 4 + 4 * i))
        tables += struct.pack("<iII", t - vt_pos, key_at - (t + 4), value_at - (t + 8))
    return vtable + struct.pack("<I", n) + offsets + tables + data, vec_pos


def encode_frame(call_id=0, kind=REQUEST, method=None, timeout_us=0, payload=None,
                 status=OK, message=None, retry_after_ms=0, metadata=None,
                 stream_kind=None, credit_messages=0, credit_bytes=0):
    """Returns one complete frame (prefix included). None for method/payload/message/metadata =
    absent. Without metadata the layout of section 4.3; with it that of 4.4: a 9th vtable entry
    (metadata at table + 40), the table 4 bytes longer and the objects from position 76. With
    stream_kind (0 included) the layout of 4.5: 14 entries, the table at 40, the stream fields
    at table + 39, 44 and 48, the objects from position 96."""
    if isinstance(method, str):
        method = method.encode()
    if isinstance(message, str):
        message = message.encode()
    streams = stream_kind is not None
    n_fields = 14 if streams else 8 if metadata is None else 9
    table_pos = 40 if streams else TABLE_POS
    table_size = 56 if streams else TABLE_SIZE + 4 * (n_fields - 8)
    offsets = dict(FIELD_OFFSETS)
    offsets.update({F_METADATA: 40, F_TRAILERS: 0, F_DETAILS: 0, F_STREAM_KIND: 39,
                    F_CREDIT_MESSAGES: 44, F_CREDIT_BYTES: 48})
    pos = table_pos + table_size  # 72, 76, 96: strings and vectors follow the table
    objects = b""
    obj_pos = {}
    for fid, data, is_string in ((F_METHOD, method, True), (F_PAYLOAD, payload, False),
                                 (F_MESSAGE, message, True)):
        if data is None:
            continue
        data = bytes(data)
        obj_pos[fid] = pos + len(objects)
        objects += _pad4(struct.pack("<I", len(data)) + data + (b"\0" if is_string else b""))
    if metadata is not None:
        md, obj_pos[F_METADATA] = _encode_metadata(metadata, pos + len(objects))
        objects += md

    entries = []
    for fid in range(n_fields):
        present = fid not in (F_METHOD, F_PAYLOAD, F_MESSAGE, F_METADATA) or fid in obj_pos
        entries.append(offsets[fid] if present else 0)
    vtable = struct.pack("<HH%dH" % n_fields, 4 + 2 * n_fields, table_size, *entries)

    def uoff(fid):
        if fid not in obj_pos:
            return 0
        return obj_pos[fid] - (table_pos + offsets[fid])

    fields = [table_pos - VTABLE_POS, retry_after_ms, call_id, timeout_us, uoff(F_METHOD),
              uoff(F_PAYLOAD), uoff(F_MESSAGE), status, kind]
    if streams:
        table = struct.pack("<iIQQIIIHBBIIQ", *fields, stream_kind, uoff(F_METADATA),
                            credit_messages, credit_bytes)
    else:
        if metadata is not None:
            fields.append(uoff(F_METADATA))
        table = struct.pack("<iIQQIIIHBx" + "I" * (n_fields - 8), *fields)
    assert len(table) == table_size
    head = struct.pack("<I", table_pos - 4) + vtable  # the root, then the vtable at 8
    head += b"\0" * (table_pos - 4 - len(head))  # padding up to the table
    body = head + table + objects
    return struct.pack("<I", len(body)) + body


# ---------------------------------------------------------------- decoding (section 4.2)

def _u(fmt, b, pos):
    size = struct.calcsize(fmt)
    if pos < 0 or pos + size > len(b):
        raise ProtocolError("read of %d bytes at body offset %d outside a %d-byte body"
                            % (size, pos, len(b)))
    return struct.unpack_from("<" + fmt, b, pos)[0]


def decode_body(b):
    """Parses a Frame body (without the prefix). Returns a dict; absent fields get defaults."""
    t = _u("I", b, 0)
    v = t - _u("i", b, t)
    vsize = _u("H", b, v)
    if vsize < 4 or vsize % 2:
        raise ProtocolError("bad vtable size %d" % vsize)
    tsize = _u("H", b, v + 2)

    def field(fid):
        entry = 4 + 2 * fid
        o = _u("H", b, v + entry) if entry < vsize else 0
        if o and o >= tsize:
            raise ProtocolError("field %d at offset %d outside table size %d" % (fid, o, tsize))
        return o

    def scalar(fid, fmt, default=0):
        o = field(fid)
        return _u(fmt, b, t + o) if o else default

    def blob(fid, is_string):
        o = field(fid)
        if not o:
            return b""
        p = t + o + _u("I", b, t + o)
        n = _u("I", b, p)
        if p + 4 + n > len(b):
            raise ProtocolError("field %d: %d bytes at %d run past the body" % (fid, n, p))
        if is_string and _u("B", b, p + 4 + n) != 0:
            raise ProtocolError("field %d: string without terminator" % fid)
        return bytes(b[p + 4:p + 4 + n])

    def metadata(fid=F_METADATA):
        # Request metadata, or a Reply/Error's headers (section 3.2); trailers have the same form.
        o = field(fid)
        if not o:
            return None
        p = t + o + _u("I", b, t + o)
        pairs = []
        for i in range(_u("I", b, p)):
            e = p + 4 + 4 * i
            mt = e + _u("I", b, e)
            mv = mt - _u("i", b, mt)
            mvsize = _u("H", b, mv)

            def entry(fid):
                at = 4 + 2 * fid
                fo = _u("H", b, mv + at) if at < mvsize else 0
                if not fo:
                    return b""
                q = mt + fo + _u("I", b, mt + fo)
                n = _u("I", b, q)
                return bytes(b[q + 4:q + 4 + n])
            pairs.append((entry(M_KEY).decode("ascii", "replace"), entry(M_VALUE)))
        return pairs

    return {
        "call_id": scalar(F_CALL_ID, "Q"),
        "kind": scalar(F_KIND, "B"),
        "method": blob(F_METHOD, True).decode("utf-8", "replace"),
        "timeout_us": scalar(F_TIMEOUT_US, "Q"),
        "payload": blob(F_PAYLOAD, False),
        "status": scalar(F_STATUS, "H"),
        "message": blob(F_MESSAGE, True).decode("utf-8", "replace"),
        "retry_after_ms": scalar(F_RETRY, "I"),
        "metadata": metadata(),
        "trailers": metadata(F_TRAILERS),
        "details": blob(F_DETAILS, False),
        "stream_kind": scalar(F_STREAM_KIND, "B"),
        "credit_messages": scalar(F_CREDIT_MESSAGES, "I"),
        "credit_bytes": scalar(F_CREDIT_BYTES, "Q"),
    }


def decode_frame(frame):
    n = _u("I", frame, 0)
    if n != len(frame) - 4:
        raise ProtocolError("prefix says %d bytes, frame has %d" % (n, len(frame) - 4))
    return decode_body(frame[4:])


# ---------------------------------------------------------------- connection

class Connection:
    def __init__(self, host, port, timeout):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def close(self):
        self.sock.close()

    def send(self, data):
        self.sock.sendall(data)

    def _recv_exact(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(min(n - len(buf), 1 << 20))
            if not chunk:
                raise EOFError("connection closed after %d of %d bytes" % (len(buf), n))
            buf += chunk
        return bytes(buf)

    def read_frame(self, max_body=64 << 20):
        (n,) = struct.unpack("<I", self._recv_exact(4))
        if n > max_body:
            raise ProtocolError("server sent a %d-byte frame" % n)
        return decode_body(self._recv_exact(n))

    def expect_eof(self):
        """True when the server closed (EOF or reset) before sending anything else."""
        try:
            data = self.sock.recv(1)
        except ConnectionResetError:
            return True
        return data == b""


def describe(f):
    return ("call_id=%d kind=%d status=%d message=%r payload=%d bytes"
            % (f["call_id"], f["kind"], f["status"], f["message"], len(f["payload"])))


# ---------------------------------------------------------------- checks

def check_self_consistency():
    """The decoder against the encoder, and both against the dumps in docs/protocol.md."""
    f = decode_frame(encode_frame(call_id=7, kind=ERROR, method="m", timeout_us=9, payload=b"\1\2",
                                  status=SERVER_BUSY, message="busy", retry_after_ms=10))
    check(f == {"call_id": 7, "kind": ERROR, "method": "m", "timeout_us": 9, "payload": b"\1\2",
                "status": SERVER_BUSY, "message": "busy", "retry_after_ms": 10, "metadata": None,
                "trailers": None, "details": b"", "stream_kind": 0, "credit_messages": 0,
                "credit_bytes": 0},
          "encode/decode round trip: %r" % f)
    md = [("traceparent", TRACEPARENT), ("bin", b"\0\xff"), ("empty", b"")]
    f = decode_frame(encode_frame(call_id=8, method="m", payload=b"x", metadata=md))
    check(f["metadata"] == [(k, v.encode() if isinstance(v, str) else v) for k, v in md]
          and f["payload"] == b"x" and f["method"] == "m", "metadata round trip: %r" % f)
    # docs/protocol.md section 4.4: the fixed layout with metadata.
    check(encode_frame(call_id=1, method="echo", payload=b"hi", metadata=[("tenant", "blue")])
          == DOC_METADATA,
          "the fixed-layout encoder with metadata differs from docs/protocol.md 4.4:\n"
          + encode_frame(call_id=1, method="echo", payload=b"hi",
                         metadata=[("tenant", "blue")]).hex(" "))
    # docs/protocol.md section 5: the builder's echo request and the server's (hand-laid) reply.
    req = DOC_REQUEST
    f = decode_frame(req)
    check((f["call_id"], f["kind"], f["method"], f["payload"], f["timeout_us"]) ==
          (1, REQUEST, "echo", b"hi", 0), "doc request decodes to %r" % f)
    f = decode_frame(DOC_REPLY)
    check((f["call_id"], f["kind"], f["status"], f["payload"]) == (1, REPLY, OK, b"hi"),
          "doc reply decodes to %r" % f)
    f = decode_frame(DOC_PONG)
    check((f["call_id"], f["kind"]) == (2, PONG), "doc pong decodes to %r" % f)
    # docs/protocol.md sections 3.2 and 3.3: response headers, trailers and error details.
    f = decode_frame(DOC_RESPONSE_METADATA)
    check((f["call_id"], f["kind"], f["status"], f["payload"], f["metadata"], f["trailers"]) ==
          (1, REPLY, OK, b"hi", [("region", b"eu")], [("pairs", b"1")]),
          "doc reply with response metadata decodes to %r" % f)
    f = decode_frame(DOC_ERROR_DETAILS)
    check((f["call_id"], f["kind"], f["status"], f["message"], f["details"], f["metadata"],
           f["trailers"]) ==
          (2, ERROR, NOT_FOUND, "failed as asked", b"\x08\x05", None, [("pairs", b"0")]),
          "doc error with details decodes to %r" % f)
    check_stream_dumps()
    # docs/protocol.md section 4.3: the fixed-layout example.
    check(encode_frame(call_id=1, method="echo", payload=b"hi") == DOC_FIXED,
          "the fixed-layout encoder differs from the example in docs/protocol.md 4.3:\n"
          + encode_frame(call_id=1, method="echo", payload=b"hi").hex(" "))


DOCS_PROTOCOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs",
                             "protocol.md")


def doc_dumps(section, path=DOCS_PROTOCOL):
    """The hex dumps ("0010: 18 00 ..." lines in ``` blocks) under the heading numbered `section`
    of docs/protocol.md (a subsection's dumps are its own), as bytes, in order."""
    dumps, here, block = [], None, None
    with open(path) as f:
        for line in f:
            heading = re.match(r"#+ (\d+(?:\.\d+)*)\.? ", line)
            if heading:
                here = heading.group(1)
            elif line.startswith("```"):
                if block and here == section:
                    dumps.append(bytes.fromhex(" ".join(block)))
                block = [] if block is None else None
            elif block is not None:
                row = re.fullmatch(r"[0-9a-f]{4}: ((?:[0-9a-f]{2} ?)+)", line.strip())
                if row:
                    block.append(row.group(1))
    return dumps


# The dumps of docs/protocol.md, read from it so that the bytes stand in one place: by section,
# in the order they stand there.
DOC_REQUEST, DOC_REPLY, DOC_PONG = doc_dumps("5")
DOC_FIXED, = doc_dumps("4.3")
DOC_METADATA, = doc_dumps("4.4")
DOC_RESPONSE_METADATA, = doc_dumps("3.2")
DOC_ERROR_DETAILS, = doc_dumps("3.3")
DOC_PING_REQUEST, DOC_PING_REPLY = doc_dumps("9.1")
DOC_STREAM_FIXED, = doc_dumps("4.5")
DOC_STREAM_OPEN, = doc_dumps("13.7.1")
DOC_STREAM_MESSAGE, = doc_dumps("13.7.2")
DOC_STREAM_CREDIT, = doc_dumps("13.7.3")
DOC_STREAM_HALF_CLOSE, = doc_dumps("13.7.4")
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def check_stream_dumps():
    """docs/protocol.md 4.5 and 13.7: the fixed-layout StreamOpen is what the encoder makes, and
    the builder's stream frames decode to the fields the doc gives them."""
    check(encode_frame(call_id=1, kind=STREAM_OPEN, method="generate", payload=b"3 5",
                       stream_kind=SERVER_STREAM, credit_messages=16, credit_bytes=262144)
          == DOC_STREAM_FIXED,
          "the stream fixed-layout encoder differs from docs/protocol.md 4.5:\n"
          + encode_frame(call_id=1, kind=STREAM_OPEN, method="generate", payload=b"3 5",
                         stream_kind=SERVER_STREAM, credit_messages=16,
                         credit_bytes=262144).hex(" "))
    for dump in (DOC_STREAM_FIXED, DOC_STREAM_OPEN):
        f = decode_frame(dump)
        check((f["call_id"], f["kind"], f["method"], f["payload"], f["stream_kind"],
               f["credit_messages"], f["credit_bytes"]) ==
              (1, STREAM_OPEN, "generate", b"3 5", SERVER_STREAM, 16, 262144),
              "doc StreamOpen decodes to %r" % f)
    f = decode_frame(DOC_STREAM_MESSAGE)
    check((f["call_id"], f["kind"], f["payload"]) == (1, STREAM_MESSAGE, b"xxxxx"),
          "doc StreamMessage decodes to %r" % f)
    f = decode_frame(DOC_STREAM_CREDIT)
    check((f["call_id"], f["kind"], f["credit_messages"], f["credit_bytes"]) ==
          (1, STREAM_CREDIT, 8, 40), "doc StreamCredit decodes to %r" % f)
    f = decode_frame(DOC_STREAM_HALF_CLOSE)
    check((f["call_id"], f["kind"]) == (2, STREAM_HALF_CLOSE), "doc StreamHalfClose decodes to %r" % f)


def call(conn, call_id, method, payload=None, timeout_us=0, metadata=None):
    conn.send(encode_frame(call_id=call_id, method=method, payload=payload, timeout_us=timeout_us,
                           metadata=metadata))
    f = conn.read_frame()
    check(f["call_id"] == call_id, "%s: answer for call %d, expected %d (%s)"
          % (method, f["call_id"], call_id, describe(f)))
    return f


def check_doc_example(conn):
    """The exact bytes of docs/protocol.md section 5 get the exact reply bytes shown there."""
    conn.send(DOC_REQUEST)
    n = struct.unpack("<I", conn._recv_exact(4))[0]
    got = struct.pack("<I", n) + conn._recv_exact(n)
    check(got == DOC_REPLY,
          "reply to the documented echo request differs from docs/protocol.md:\n" + got.hex(" "))


def check_echo(conn):
    sizes = [0, 1, 2, 3, 4, 5, 7, 8, 100, 4096, 65536, 100 * 1024]
    for i, size in enumerate(sizes):
        payload = bytes((i * 31 + k * 7) & 0xFF for k in range(size))
        f = call(conn, 1000 + i, "echo", payload)
        check(f["kind"] == REPLY and f["status"] == OK,
              "echo of %d bytes: expected Reply/Ok, got %s" % (size, describe(f)))
        check(f["payload"] == payload, "echo of %d bytes: payload differs (%d bytes back)"
              % (size, len(f["payload"])))
    # A payload-less request (no payload field at all) is an empty echo.
    f = call(conn, 1100, "echo", None)
    check(f["kind"] == REPLY and f["payload"] == b"", "echo without payload: " + describe(f))


def check_unknown_method(conn):
    f = call(conn, 2000, "no_such_method", b"x")
    check(f["kind"] == ERROR and f["status"] == UNKNOWN_METHOD,
          "unknown method: expected Error/UnknownMethod(1), got " + describe(f))
    check("no_such_method" in f["message"], "unknown method: message %r lacks the name"
          % f["message"])


def check_ping(conn):
    for cid in (3000, 0xFFFFFFFFFFFFFFFF):
        conn.send(encode_frame(call_id=cid, kind=PING))
        f = conn.read_frame()
        check(f["kind"] == PONG and f["call_id"] == cid,
              "ping %d: expected Pong with the same id, got %s" % (cid, describe(f)))


def check_builtin_ping(conn):
    """ringrpc.ping is answered Reply/Ok with no payload, whatever the request carried."""
    check(encode_frame(call_id=7, method="ringrpc.ping") == DOC_PING_REQUEST,
          "the encoder's ringrpc.ping request differs from docs/protocol.md 9.1")
    conn.send(DOC_PING_REQUEST)
    n = struct.unpack("<I", conn._recv_exact(4))[0]
    got = struct.pack("<I", n) + conn._recv_exact(n)
    check(got == DOC_PING_REPLY,
          "reply to the documented ringrpc.ping differs from docs/protocol.md:\n" + got.hex(" "))
    f = call(conn, 3100, "ringrpc.ping", b"anything")
    check(f["kind"] == REPLY and f["status"] == OK and f["payload"] == b"",
          "ringrpc.ping: expected Reply/Ok with an empty payload, got " + describe(f))


def check_silent_kinds(conn):
    """OneWay and Cancel are never answered: the next frame is the Pong that follows them."""
    conn.send(encode_frame(call_id=4000, kind=ONE_WAY, method="echo", payload=b"dropped"))
    conn.send(encode_frame(call_id=4001, kind=ONE_WAY, method="no_such_method"))
    conn.send(encode_frame(call_id=4000, kind=CANCEL))
    conn.send(encode_frame(call_id=4002, kind=PING))
    f = conn.read_frame()
    check(f["kind"] == PONG and f["call_id"] == 4002,
          "OneWay/Cancel must not be answered; got " + describe(f))


def check_client_sent_reply(conn):
    conn.send(encode_frame(call_id=4500, kind=REPLY, payload=b"x"))
    f = conn.read_frame()
    check(f["call_id"] == 4500 and f["kind"] == ERROR and f["status"] == BAD_REQUEST,
          "client-sent Reply: expected Error/BadRequest(2), got " + describe(f))
    # The connection stays open.
    f = call(conn, 4501, "echo", b"still open")
    check(f["kind"] == REPLY and f["payload"] == b"still open", "after BadRequest: " + describe(f))


def check_verification_failure_with_id(conn):
    """A body whose method string lacks its terminator: BadRequest for that id, still open."""
    frame = bytearray(encode_frame(call_id=4600, method="echo", payload=b"p"))
    method_pos = TABLE_POS + FIELD_OFFSETS[F_METHOD]
    str_pos = method_pos + struct.unpack_from("<I", frame, method_pos)[0]
    frame[str_pos + 4 + 4] = ord("!")  # the 0 byte after "echo"
    conn.send(bytes(frame))
    f = conn.read_frame()
    check(f["call_id"] == 4600 and f["kind"] == ERROR and f["status"] == BAD_REQUEST,
          "unterminated string: expected Error/BadRequest for 4600, got " + describe(f))
    f = call(conn, 4601, "echo", b"ok")
    check(f["kind"] == REPLY, "after a verification failure: " + describe(f))


def check_pipelining(conn, count=100):
    frames = []
    for i in range(count):
        frames.append(encode_frame(call_id=5000 + i, method="echo", payload=b"p%d" % i))
    conn.send(b"".join(frames))  # back to back, in one write
    seen = {}
    for _ in range(count):
        f = conn.read_frame()
        cid = f["call_id"]
        check(5000 <= cid < 5000 + count, "pipelining: unexpected id in " + describe(f))
        check(cid not in seen, "pipelining: second answer for call %d" % cid)
        check(f["kind"] == REPLY and f["payload"] == b"p%d" % (cid - 5000),
              "pipelining: bad answer " + describe(f))
        seen[cid] = f
    check(len(seen) == count, "pipelining: %d distinct answers for %d calls" % (len(seen), count))


def check_deadline(conn):
    """With one handler thread: a 300 ms sleep occupies it, so a call with a 1 ms budget queued
    behind it expires before it can run."""
    conn.send(encode_frame(call_id=6000, method="sleep", payload=b"300000"))
    conn.send(encode_frame(call_id=6001, method="sleep", payload=b"1000", timeout_us=1000))
    answers = {}
    for _ in range(2):
        f = conn.read_frame()
        answers[f["call_id"]] = f
    check(set(answers) == {6000, 6001}, "deadline: answers for %r" % sorted(answers))
    check(answers[6000]["kind"] == REPLY and answers[6000]["payload"] == b"300000",
          "deadline: the sleep without budget: " + describe(answers[6000]))
    f = answers[6001]
    check(f["kind"] == ERROR and f["status"] == DEADLINE_EXCEEDED,
          "deadline: expected Error/DeadlineExceeded(5) for the queued call, got " + describe(f)
          + " (is the server running with --handlers 1?)")


def check_sleep_bad_payload(conn):
    f = call(conn, 6100, "sleep", b"soon")
    check(f["kind"] == ERROR and f["status"] == BAD_REQUEST, "sleep 'soon': " + describe(f))


def check_metadata(conn):
    """Section 3.1: metadata within the caps reaches the method; beyond them, or with a bad
    key, the call gets BadRequest and the connection stays open."""
    conn.send(DOC_METADATA)
    f = conn.read_frame()
    check(f["call_id"] == 1 and f["kind"] == REPLY and f["payload"] == b"hi",
          "the documented frame with metadata: " + describe(f))
    md = [("traceparent", TRACEPARENT), ("k%d" % 1, b"\0\1\2"), ("empty", b"")]
    f = call(conn, 7100, "echo", b"with metadata", metadata=md)
    check(f["kind"] == REPLY and f["payload"] == b"with metadata", "echo with metadata: " + describe(f))
    at_caps = [("k%02d" % i, b"v" * 10) for i in range(31)] + [("last", b"x" * (8192 - 31 * 13 - 4))]
    f = call(conn, 7101, "echo", b"at the caps", metadata=at_caps)
    check(f["kind"] == REPLY, "32 pairs, 8192 bytes (the default caps): " + describe(f))
    bad = [("33 pairs", [("k%02d" % i, b"") for i in range(33)], "max_metadata_entries (32)"),
           ("8193 bytes", [("big", b"x" * 8190)], "max_metadata_bytes (8192)"),
           ("an uppercase key", [("Tenant", b"blue")], "not a lowercase token"),
           ("a duplicate key", [("a", b"1"), ("a", b"2")], "appears twice")]
    for i, (what, pairs, says) in enumerate(bad):
        f = call(conn, 7110 + i, "echo", b"x", metadata=pairs)
        check(f["kind"] == ERROR and f["status"] == BAD_REQUEST and says in f["message"],
              "metadata with %s: expected Error/BadRequest(2) naming %r, got %s"
              % (what, says, describe(f)))
        f = call(conn, 7120 + i, "echo", b"still open")
        check(f["kind"] == REPLY and f["payload"] == b"still open",
              "after metadata with %s: %s" % (what, describe(f)))


def check_response_metadata(conn):
    """Sections 3.2, 3.3 and 6: the built-in `mirror` answers with the request's metadata as
    headers and a trailer; `fail` answers each status 11..21 (and a number nobody knows) with
    the details asked for; the documented exchanges give the documented bytes."""
    conn.send(encode_frame(call_id=1, method="mirror", payload=b"hi", metadata=[("region", "eu")]))
    n = struct.unpack("<I", conn._recv_exact(4))[0]
    got = struct.pack("<I", n) + conn._recv_exact(n)
    check(got == DOC_RESPONSE_METADATA,
          "mirror's answer differs from docs/protocol.md 3.2:\n" + got.hex(" "))
    conn.send(encode_frame(call_id=2, method="fail", payload=b"11 \x08\x05"))
    n = struct.unpack("<I", conn._recv_exact(4))[0]
    got = struct.pack("<I", n) + conn._recv_exact(n)
    check(got == DOC_ERROR_DETAILS,
          "fail's answer differs from docs/protocol.md 3.3:\n" + got.hex(" "))
    md = [("traceparent", TRACEPARENT), ("bin", b"\0\xff"), ("empty", b"")]
    f = call(conn, 7200, "mirror", b"payload", metadata=md)
    check(f["kind"] == REPLY and f["payload"] == b"payload"
          and f["metadata"] == [(k, v.encode() if isinstance(v, str) else v) for k, v in md]
          and f["trailers"] == [("pairs", b"3")],
          "mirror with three pairs: %s headers=%r trailers=%r" % (describe(f), f["metadata"], f["trailers"]))
    f = call(conn, 7201, "mirror", b"")
    check(f["kind"] == REPLY and f["metadata"] is None and f["trailers"] == [("pairs", b"0")],
          "mirror without metadata: %s headers=%r" % (describe(f), f["metadata"]))
    for i, code in enumerate(list(range(NOT_FOUND, UNKNOWN + 1)) + [400]):
        details = bytes([i, 0, 255]) * (i + 1)
        f = call(conn, 7210 + i, "fail", str(code).encode() + b" " + details, metadata=[("k", "v")])
        check(f["kind"] == ERROR and f["status"] == code and f["details"] == details
              and f["message"] == "failed as asked" and f["metadata"] == [("k", b"v")],
              "fail %d: expected Error/%d with %d bytes of details, got %s details=%r"
              % (code, code, len(details), describe(f), f["details"]))
    f = call(conn, 7230, "fail", b"12")
    check(f["kind"] == ERROR and f["status"] == INVALID_ARGUMENT and f["details"] == b"",
          "fail without details: " + describe(f))
    f = call(conn, 7231, "fail", b"zero")
    check(f["kind"] == ERROR and f["status"] == BAD_REQUEST, "fail with a bad payload: " + describe(f))


# ---------------------------------------------------------------- streams (section 13)

DEFAULT_WINDOW_MESSAGES, DEFAULT_WINDOW_BYTES = 16, 262144


class Stream:
    """One stream's two credits (section 13.3): what we may send (the server's window, 16
    messages and 256 KiB, plus its grants) and what we granted the server (our window), granted
    back in batches of half the window as we read."""

    def __init__(self, conn, sid, window_messages=0, window_bytes=0):
        self.conn, self.sid = conn, sid
        self.send_messages, self.send_bytes = DEFAULT_WINDOW_MESSAGES, DEFAULT_WINDOW_BYTES
        self.window_messages = window_messages or DEFAULT_WINDOW_MESSAGES
        self.window_bytes = window_bytes or DEFAULT_WINDOW_BYTES
        self.peer_messages, self.peer_bytes = self.window_messages, self.window_bytes
        self.owed_messages = self.owed_bytes = 0
        self.granted_to_us = 0

    def open(self, method, kind, payload=None):
        self.conn.send(encode_frame(call_id=self.sid, kind=STREAM_OPEN, method=method,
                                    payload=payload, stream_kind=kind,
                                    credit_messages=self.window_messages,
                                    credit_bytes=self.window_bytes))

    def write(self, message):
        while not (self.send_messages > 0 and self.send_bytes > 0):
            f = self.read()  # only credit may come now: every echo was read
            check(f["kind"] == STREAM_CREDIT, "stream %d: waiting for credit, got %s"
                  % (self.sid, describe(f)))
        self.send_messages -= 1
        self.send_bytes -= len(message)
        self.conn.send(encode_frame(call_id=self.sid, kind=STREAM_MESSAGE, payload=message))

    def read(self):
        """The next frame of the stream but credit it handles itself: a message (its credit
        checked and given back) or the end. Credit frames are returned too, after counting."""
        f = self.conn.read_frame()
        check(f["call_id"] == self.sid, "stream %d: frame for id %d: %s"
              % (self.sid, f["call_id"], describe(f)))
        if f["kind"] == STREAM_CREDIT:
            self.send_messages += f["credit_messages"]
            self.send_bytes += f["credit_bytes"]
            self.granted_to_us += f["credit_messages"]
        elif f["kind"] == STREAM_MESSAGE:
            check(self.peer_messages > 0 and self.peer_bytes > 0,
                  "stream %d: the server wrote beyond its credit" % self.sid)
            self.peer_messages -= 1
            self.peer_bytes -= len(f["payload"])
            self.consumed(len(f["payload"]))
        return f

    def consumed(self, n):
        self.owed_messages += 1
        self.owed_bytes += n
        if self.owed_messages * 2 < self.window_messages and self.owed_bytes * 2 < self.window_bytes:
            return
        self.conn.send(encode_frame(call_id=self.sid, kind=STREAM_CREDIT, stream_kind=0,
                                    credit_messages=self.owed_messages,
                                    credit_bytes=self.owed_bytes))
        self.peer_messages += self.owed_messages
        self.peer_bytes += self.owed_bytes
        self.owed_messages = self.owed_bytes = 0

    def read_message(self):
        """The next message's payload, or None at the end (then self.end is the end frame)."""
        while True:
            f = self.read()
            if f["kind"] == STREAM_MESSAGE:
                return f["payload"]
            if f["kind"] in (REPLY, ERROR):
                self.end = f
                return None
            check(f["kind"] == STREAM_CREDIT, "stream %d: unexpected %s" % (self.sid, describe(f)))


def check_doc_stream_example(conn):
    """The StreamOpen of 13.7.1, byte for byte, gets the StreamMessage of 13.7.2 three times
    (the server's own bytes), then Reply Ok."""
    conn.send(DOC_STREAM_OPEN)
    for i in range(3):
        n = struct.unpack("<I", conn._recv_exact(4))[0]
        got = struct.pack("<I", n) + conn._recv_exact(n)
        check(got == DOC_STREAM_MESSAGE, "message %d of generate '3 5' differs from docs/protocol.md "
              "13.7.2:\n%s" % (i, got.hex(" ")))
    f = conn.read_frame()
    check((f["call_id"], f["kind"], f["status"], f["payload"]) == (1, REPLY, OK, b""),
          "the end of generate '3 5': " + describe(f))


def check_server_stream(conn, sid=9100, count=40, size=100, window=4):
    """generate 'N BYTES' with a window of 4 messages: every message within the credit we
    granted, all N of them, then Reply Ok."""
    s = Stream(conn, sid, window_messages=window)
    s.open("generate", SERVER_STREAM, b"%d %d" % (count, size))
    got = 0
    while True:
        m = s.read_message()
        if m is None:
            break
        check(m == b"x" * size, "generate: message %d is %d bytes %r..." % (got, len(m), m[:8]))
        got += 1
    check(s.end["kind"] == REPLY and s.end["status"] == OK,
          "generate: the end is " + describe(s.end))
    check(got == count, "generate '%d %d': %d messages before the end" % (count, size, got))


def check_bidi_stream(conn, sid=9200, count=40):
    """echo_stream: each message comes back, the server's grants let us write past the first
    window of 16, and the half-close brings Reply Ok."""
    s = Stream(conn, sid)
    s.open("echo_stream", BIDI_STREAM)
    for i in range(count):
        m = b"m%d" % i + b"." * (i * 37 % 300)
        s.write(m)
        echo = s.read_message()
        check(echo == m, "echo_stream: message %d came back as %r" % (i, echo))
    check(s.granted_to_us >= count - DEFAULT_WINDOW_MESSAGES,
          "echo_stream: the server granted %d messages for %d written" % (s.granted_to_us, count))
    conn.send(encode_frame(call_id=sid, kind=STREAM_HALF_CLOSE))
    check(s.read_message() is None, "echo_stream: a message after the half-close")
    check(s.end["kind"] == REPLY and s.end["status"] == OK, "echo_stream: the end is " + describe(s.end))


def check_stream_cancel(conn, sid=9300):
    """A Cancel ends a stream the server is still writing: Error Cancelled after what it wrote."""
    s = Stream(conn, sid, window_messages=2)
    s.open("generate", SERVER_STREAM, b"1000000 10")
    for _ in range(2):
        check(s.read_message() == b"x" * 10, "generate before the cancel")
    conn.send(encode_frame(call_id=sid, kind=CANCEL))
    while s.read_message() is not None:
        pass
    check(s.end["kind"] == ERROR and s.end["status"] == CANCELLED
          and s.end["message"] == "cancelled by the client",
          "a cancelled stream ends with " + describe(s.end))


def check_stream_errors(conn):
    """Kinds that do not match (13.2) are refused with BadRequest naming the right way; a frame
    for an id never opened is dropped unanswered (13.5); the connection stays."""
    refusals = [
        (encode_frame(call_id=9400, kind=STREAM_OPEN, method="echo", stream_kind=BIDI_STREAM),
         "method 'echo' is not a stream; call it with Request"),
        (encode_frame(call_id=9401, method="generate", payload=b"1 1"),
         "method 'generate' is a server stream; open it with StreamOpen stream_kind 1"),
        (encode_frame(call_id=9402, kind=STREAM_OPEN, method="echo_stream", stream_kind=SERVER_STREAM),
         "method 'echo_stream' is a bidi stream; open it with StreamOpen stream_kind 3"),
    ]
    for frame, says in refusals:
        conn.send(frame)
        f = conn.read_frame()
        check(f["kind"] == ERROR and f["status"] == BAD_REQUEST and f["message"] == says,
              "expected Error/BadRequest %r, got %s" % (says, describe(f)))
    conn.send(encode_frame(call_id=9410, kind=STREAM_MESSAGE, payload=b"stray"))
    conn.send(encode_frame(call_id=9411, kind=STREAM_CREDIT, stream_kind=0, credit_messages=1))
    conn.send(encode_frame(call_id=9412, kind=PING))
    f = conn.read_frame()
    check(f["kind"] == PONG and f["call_id"] == 9412, "stray stream frames were answered: " + describe(f))


def check_bearer_tokens(conn, token, limited_token):
    """Section 6 and docs/security.md: a server with --tokens-file answers calls without an
    accepted token Unauthenticated, and a token's disallowed methods PermissionDenied."""
    f = call(conn, 8000, "echo", b"x")
    check(f["kind"] == ERROR and f["status"] == UNAUTHENTICATED,
          "no token: expected Error/Unauthenticated(9), got " + describe(f))
    f = call(conn, 8001, "echo", b"x", metadata=[("authorization", "Bearer not-" + token)])
    check(f["kind"] == ERROR and f["status"] == UNAUTHENTICATED and token not in f["message"],
          "wrong token: expected Error/Unauthenticated(9), got " + describe(f))
    f = call(conn, 8002, "echo", b"x", metadata=[("authorization", "Bearer " + token),
                                                ("traceparent", TRACEPARENT)])
    check(f["kind"] == REPLY and f["payload"] == b"x", "good token: " + describe(f))
    auth = [("authorization", "Bearer " + limited_token)]
    f = call(conn, 8003, "echo", b"y", metadata=auth)
    check(f["kind"] == REPLY and f["payload"] == b"y", "limited token, allowed method: " + describe(f))
    f = call(conn, 8004, "sleep", b"1", metadata=auth)
    check(f["kind"] == ERROR and f["status"] == PERMISSION_DENIED,
          "limited token, other method: expected Error/PermissionDenied(10), got " + describe(f))
    conn.send(encode_frame(call_id=8005, kind=PING))
    f = conn.read_frame()
    check(f["kind"] == PONG, "Ping needs no token: " + describe(f))


def check_frame_too_large(host, port, timeout):
    conn = Connection(host, port, timeout)
    try:
        conn.send(struct.pack("<I", 0xFFFFFFFF))  # far above any max_frame_bytes (<= 2^30)
        f = conn.read_frame()
        check(f["call_id"] == 0 and f["kind"] == ERROR and f["status"] == FRAME_TOO_LARGE,
              "oversized prefix: expected Error/FrameTooLarge(3) with call_id 0, got "
              + describe(f))
        check("4294967295" in f["message"], "oversized prefix: message %r" % f["message"])
        check(conn.expect_eof(), "oversized prefix: the server did not close the connection")
    finally:
        conn.close()


def check_undecodable(host, port, timeout):
    """A table misaligned by 4 bytes puts call_id off its 8-byte boundary: unreadable id, so
    BadRequest with call_id 0, then close (docs/protocol.md sections 2 and 6)."""
    conn = Connection(host, port, timeout)
    try:
        good = encode_frame(call_id=7000, kind=PING)
        body = bytearray(good[4:])
        # Insert 4 bytes before the table and move the root accordingly: every table field
        # shifts by 4, so the u64 call_id lands on a position that is 4 mod 8.
        split = TABLE_POS - 4
        body = body[:split] + b"\0\0\0\0" + body[split:]
        struct.pack_into("<I", body, 0, ROOT + 4)
        struct.pack_into("<i", body, split + 4, TABLE_POS + 4 - VTABLE_POS)
        check(decode_body(bytes(body))["call_id"] == 7000, "misaligned test frame is wrong")
        conn.send(struct.pack("<I", len(body)) + body)
        f = conn.read_frame()
        check(f["call_id"] == 0 and f["kind"] == ERROR and f["status"] == BAD_REQUEST,
              "misaligned frame: expected Error/BadRequest with call_id 0, got " + describe(f))
        check(conn.expect_eof(), "misaligned frame: the server did not close the connection")
    finally:
        conn.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--timeout", type=float, default=20.0, help="socket timeout in seconds")
    ap.add_argument("--skip-deadline", action="store_true",
                    help="skip the DeadlineExceeded check (it needs a server with one handler)")
    ap.add_argument("--token", help="the server checks bearer tokens: run the token checks "
                    "only, with this token (allowed every method)")
    ap.add_argument("--limited-token", help="with --token: a token allowed only 'echo'")
    args = ap.parse_args()

    if args.token:
        try:
            conn = Connection(args.host, args.port, args.timeout)
            check_self_consistency()
            check_bearer_tokens(conn, args.token, args.limited_token)
            conn.close()
        except (Failure, ProtocolError, EOFError, OSError) as e:
            print("FAIL: bearer tokens: %s: %s" % (type(e).__name__, e), file=sys.stderr)
            return 1
        print("ok   bearer tokens -> Unauthenticated / PermissionDenied")
        print("protocol_client: all checks passed")
        return 0

    checks = [("encoder/decoder vs docs/protocol.md dumps", lambda c: check_self_consistency()),
              ("documented echo example, byte for byte", check_doc_example),
              ("echo round trips (0 B .. 100 KiB)", check_echo),
              ("unknown method -> UnknownMethod", check_unknown_method),
              ("ping -> pong", check_ping),
              ("built-in ringrpc.ping -> Reply/Ok, byte for byte", check_builtin_ping),
              ("one-way and cancel are not answered", check_silent_kinds),
              ("client-sent Reply -> BadRequest, stays open", check_client_sent_reply),
              ("verification failure with id -> BadRequest, stays open",
               check_verification_failure_with_id),
              ("pipelining 100 requests", check_pipelining),
              ("sleep with a bad payload -> BadRequest", check_sleep_bad_payload),
              ("metadata: reaches the method; over the caps -> BadRequest", check_metadata),
              ("response headers, trailers, details, statuses 11..21", check_response_metadata),
              ("documented StreamOpen -> documented StreamMessages", check_doc_stream_example),
              ("server stream: generate under a 4-message window", check_server_stream),
              ("bidi stream: echo_stream, credit both ways, half-close", check_bidi_stream),
              ("stream cancel -> Error Cancelled", check_stream_cancel),
              ("stream kind mismatches, stray frames", check_stream_errors)]
    if not args.skip_deadline:
        checks.append(("timeout_us shorter than the queueing -> DeadlineExceeded", check_deadline))

    current = "connect"
    try:
        conn = Connection(args.host, args.port, args.timeout)
        for name, fn in checks:
            current = name
            t0 = time.monotonic()
            fn(conn)
            print("ok   %-58s %6.1f ms" % (name, (time.monotonic() - t0) * 1e3))
        conn.close()
        for name, fn in [("oversized length prefix -> FrameTooLarge, close", check_frame_too_large),
                         ("misaligned frame -> BadRequest id 0, close", check_undecodable)]:
            current = name
            t0 = time.monotonic()
            fn(args.host, args.port, args.timeout)
            print("ok   %-58s %6.1f ms" % (name, (time.monotonic() - t0) * 1e3))
    except Failure as e:
        print("FAIL: %s: %s" % (current, e), file=sys.stderr)
        return 1
    except (ProtocolError, EOFError, OSError) as e:
        print("FAIL: %s: %s: %s" % (current, type(e).__name__, e), file=sys.stderr)
        return 1
    print("protocol_client: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
