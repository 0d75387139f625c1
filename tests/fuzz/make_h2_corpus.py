#!/usr/bin/env python3
"""Writes the seed corpora of h2_reply_fuzz, grpc_framing_fuzz and grpc_server_fuzz
(tests/fuzz/corpus/h2_reply, grpc_framing, grpc_server): HTTP/2 frames built by hand (HPACK
static-table and literal headers), a server's for the first two, a gRPC client's for the last.
Run from the repository root; deterministic, so re-running changes nothing."""
import os
import struct


def frame(ftype, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", stream) + payload


def literal(name, value):  # literal header field without indexing, new name
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value


def grpc_message(m):
    return b"\x00" + struct.pack(">I", len(m)) + m


SETTINGS, SETTINGS_ACK = frame(4, 0, 0), frame(4, 1, 0)
END_STREAM, END_HEADERS = 1, 4
STATUS_200, STATUS_404 = b"\x88", b"\x8d"


def h2c_ok(stream, body=b"hello"):
    return frame(1, END_HEADERS, stream, STATUS_200) + frame(0, END_STREAM, stream, body)


def grpc_reply(stream, status=b"0", msg=b"\x0a\x05hello"):
    head = STATUS_200 + literal(b"content-type", b"application/grpc")
    return (frame(1, END_HEADERS, stream, head) + frame(0, 0, stream, grpc_message(msg)) +
            frame(1, END_HEADERS | END_STREAM, stream, literal(b"grpc-status", status)))


def grpc_trailers_only(stream, status=b"5"):
    head = STATUS_200 + literal(b"content-type", b"application/grpc") + literal(b"grpc-status", status)
    return frame(1, END_HEADERS | END_STREAM, stream, head)


def grpc_stream(messages, status=b"0", pad=0):
    """One bidi call's answers (--stream): the messages split over DATA frames as `messages` lists
    them (each entry one frame's payload), then trailers."""
    head = STATUS_200 + literal(b"content-type", b"application/grpc")
    out = frame(1, END_HEADERS, 1, head)
    for payload in messages:
        if pad:
            out += frame(0, 8, 1, bytes([pad]) + payload + b"\0" * pad)  # PADDED
        else:
            out += frame(0, 0, 1, payload)
    return out + frame(1, END_HEADERS | END_STREAM, 1, literal(b"grpc-status", status))


# h2_reply: byte 0 = scheme (bit 0: grpc), settings-first (bit 1), outstanding-1 (bits 2-4),
# grpc --stream (bit 5); byte 1 = where the input is split in two reads.
h2_reply = {
    "h2c_one": bytes([0, 128]) + SETTINGS + SETTINGS_ACK + h2c_ok(1),
    "h2c_three": bytes([2 << 2, 40]) + SETTINGS + h2c_ok(1) + h2c_ok(3, b"") + frame(1, END_HEADERS | END_STREAM, 5, STATUS_404),
    "h2c_settings_first": bytes([2 | (1 << 2), 200]) + h2c_ok(1) + h2c_ok(3),
    "h2c_rst": bytes([1 << 2, 0]) + SETTINGS + frame(3, 0, 1, struct.pack(">I", 2)) + h2c_ok(3),
    "h2c_goaway": bytes([2 << 2, 100]) + SETTINGS + h2c_ok(1) + frame(7, 0, 0, struct.pack(">II", 1, 0)),
    "h2c_ping_window": bytes([0, 50]) + SETTINGS + frame(6, 0, 0, b"12345678") + frame(8, 0, 0, struct.pack(">I", 65535)) + h2c_ok(1),
    "grpc_ok": bytes([1, 128]) + SETTINGS + grpc_reply(1),
    "grpc_two_status": bytes([1 | (1 << 2), 90]) + SETTINGS + grpc_reply(1) + grpc_reply(3, b"14"),
    "grpc_trailers_only": bytes([1 | 2, 10]) + grpc_trailers_only(1),
    "grpc_stream": bytes([1 | 32 | (3 << 2), 60]) + SETTINGS + grpc_stream(
        [grpc_message(b"a") + grpc_message(b""), grpc_message(b"\x0a\x05hello")[:3],
         grpc_message(b"\x0a\x05hello")[3:]]),
    "grpc_stream_padded_status": bytes([1 | 32 | (2 << 2), 30]) + SETTINGS + grpc_stream(
        [grpc_message(b"x") + grpc_message(b"yy")], b"5", pad=3),
    "h1_at_h2": bytes([0, 255]) + b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n",
}
# grpc_framing: byte 0 = HTTP status (0 mod 4: 503), byte 1 % 8 = status text length at the end.
grpc_framing = {
    "ok": bytes([1, 1]) + grpc_message(b"hello") + b"0",
    "two_messages": bytes([1, 1]) + grpc_message(b"a") + grpc_message(b"") + b"0",
    "not_found": bytes([1, 1]) + b"5",
    "cut": bytes([1, 2]) + b"\x00\x00\x00\x00\x09abc" + b"13",
    "bad_flag": bytes([1, 1]) + b"\x07\x00\x00\x00\x00" + b"0",
    "http_503": bytes([0, 1]) + grpc_message(b"x") + b"0",
}



def grpc_request(stream, path=b"/echo", message=b"hello", extra=b"", end=True):
    """A gRPC client's call: HEADERS (POST, literal :path and friends), then its message."""
    head = (b"\x83" + b"\x86" + literal(b":path", path) + literal(b":authority", b"x") +  # POST, http
            literal(b"content-type", b"application/grpc") + literal(b"te", b"trailers") + extra)
    return frame(1, END_HEADERS, stream, head) + frame(0, END_STREAM if end else 0, stream, grpc_message(message))


def indexing_literal(name, value):  # literal header field with incremental indexing, new name
    return b"\x40" + bytes([len(name)]) + name + bytes([len(value)]) + value


def block_request(stream, block):
    return frame(1, END_HEADERS, stream, block) + frame(0, END_STREAM, stream, grpc_message(b"hi"))


# A request block that refers to the dynamic table's newest entry (62), sent again byte for byte
# around blocks that insert into the table: the server replays a repeated block's fields only
# while the table is unchanged (src/grpc/hpack_repeats.hpp).
REFERS = b"\x83\x86" + literal(b":path", b"/echo") + literal(b"content-type", b"application/grpc") + b"\xbe"


def inserting(value):
    return b"\x83\x86" + literal(b":path", b"/echo") + indexing_literal(b"x-a", value)


# grpc_server: what follows a gRPC client's preface (the target sends the preface itself); byte
# 0 = where the input is split in two reads.
grpc_server = {
    "one_call": bytes([40]) + SETTINGS + grpc_request(1),
    "three_calls": bytes([90]) + SETTINGS + grpc_request(1) + grpc_request(3, b"/svc.Greeter/Hello") +
    grpc_request(5, b"/sleep", b"100"),
    "metadata_and_timeout": bytes([10]) + SETTINGS + grpc_request(
        1, extra=literal(b"grpc-timeout", b"200m") + literal(b"k-bin", b"AAEC") + literal(b"k", b"v")),
    "reset": bytes([60]) + SETTINGS + grpc_request(1, end=False) + frame(3, 0, 1, struct.pack(">I", 8)),
    "ping_window": bytes([20]) + SETTINGS + frame(6, 0, 0, b"12345678") + frame(8, 0, 0, struct.pack(">I", 1000)) +
    grpc_request(1),
    "health": bytes([30]) + SETTINGS + grpc_request(1, b"/grpc.health.v1.Health/Check", b"\x0a\x04echo"),
    "gzip": bytes([30]) + SETTINGS + grpc_request(1, extra=literal(b"grpc-encoding", b"gzip")),
    "bad_prefix": bytes([30]) + SETTINGS + frame(1, END_HEADERS, 1, b"\x83\x86" + literal(b":path", b"/echo") +
                                                 literal(b"content-type", b"application/grpc")) +
    frame(0, END_STREAM, 1, b"\x00\x00\x00\x00\x10ab"),
    "goaway": bytes([30]) + SETTINGS + grpc_request(1) + frame(7, 0, 0, struct.pack(">II", 1, 0)),
    # Streams: the target registers "/server", "/client" and "/bidi" as stream methods.
    "server_stream": bytes([40]) + SETTINGS + grpc_request(1, b"/server", b"3 5"),
    "client_stream": bytes([70]) + SETTINGS + grpc_request(1, b"/client", b"one", end=False) +
    frame(0, 0, 1, grpc_message(b"two") + grpc_message(b"")) + frame(0, END_STREAM, 1, grpc_message(b"three")),
    "bidi_many": bytes([50]) + SETTINGS + grpc_request(1, b"/bidi", b"a", end=False) +
    b"".join(frame(0, 0, 1, grpc_message(bytes([65 + i]) * i)) for i in range(20)) +
    frame(8, 0, 1, struct.pack(">I", 100)) + frame(0, END_STREAM, 1, b""),
    "bidi_cut_message": bytes([20]) + SETTINGS + grpc_request(3, b"/bidi", b"x", end=False) +
    frame(0, END_STREAM, 3, b"\x00\x00\x00\x00\x09abc"),
    "bidi_reset": bytes([60]) + SETTINGS + grpc_request(1, b"/bidi", b"x", end=False) +
    frame(3, 0, 1, struct.pack(">I", 8)) + grpc_request(3, b"/bidi", b"y"),
    "repeated_blocks": bytes([80]) + SETTINGS + grpc_request(1) + grpc_request(3) + block_request(5, inserting(b"1")) +
    block_request(7, REFERS) + block_request(9, REFERS) + block_request(11, inserting(b"2")) +
    block_request(13, REFERS) + block_request(15, REFERS),
}

for name, seeds in (("h2_reply", h2_reply), ("grpc_framing", grpc_framing), ("grpc_server", grpc_server)):
    d = os.path.join("tests", "fuzz", "corpus", name)
    os.makedirs(d, exist_ok=True)
    for k, v in seeds.items():
        with open(os.path.join(d, k), "wb") as f:
            f.write(v)
