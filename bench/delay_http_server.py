#!/usr/bin/env python3
"""An HTTP/1.1 keep-alive server on 127.0.0.1 that answers every GET after a fixed delay.

For bench/reply_batch_latency.sh: with every answer held the same time, any spread in the
client's reported median beyond the delay is the client's own timing.
Usage: delay_http_server.py PORT DELAY_US (runs until killed)."""
import asyncio
import sys

RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok"


async def serve(reader, writer, delay_s):
    loop = asyncio.get_running_loop()
    buffered = b""
    try:
        while True:
            chunk = await reader.read(65536)
            if not chunk:
                break
            buffered += chunk
            while True:
                end = buffered.find(b"\r\n\r\n")
                if end < 0:
                    break
                buffered = buffered[end + 4:]
                # Each request its own timer: replies leave delay_s after their request came in.
                loop.call_later(delay_s, writer.write, RESPONSE)
    finally:
        writer.close()


async def main(port, delay_us):
    server = await asyncio.start_server(lambda r, w: serve(r, w, delay_us / 1e6), "127.0.0.1", port)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2])))
