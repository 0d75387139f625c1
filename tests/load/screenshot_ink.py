#!/usr/bin/env python3
"""Whether a chromium screenshot shows something: enough non-white pixels ("ink") and the
first series' blue (#1f77b4) of ringrpc-load's plots. PNG decoded here, with zlib only, so the
screenshot tests need no imaging library. Usage: screenshot_ink.py SHOT.png; exits 1 when the
screenshot is (nearly) blank."""

import struct
import sys
import zlib

def pixels(path):
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6), "unexpected PNG format %d/%d" % (depth, colour)
            bpp = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw, stride, prev, out = zlib.decompress(idat), w * bpp, bytearray(w * bpp), []
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1: line[i] = (line[i] + a) & 255
            elif f == 2: line[i] = (line[i] + b) & 255
            elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        out.extend(tuple(line[i:i + 3]) for i in range(0, stride, bpp))
        prev = line
    return w, h, out


def main():
    w, h, px = pixels(sys.argv[1])
    ink = sum(1 for p in px if min(p) < 200) / len(px)
    blue = sum(1 for r, g, b in px if abs(r - 0x1f) < 40 and abs(g - 0x77) < 40 and abs(b - 0xb4) < 40)
    print("screenshot %dx%d: %.1f%% ink, %d blue pixels" % (w, h, 100 * ink, blue))
    if ink < 0.01 or blue < 50:
        print("FAIL: the screenshot is (nearly) blank", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
