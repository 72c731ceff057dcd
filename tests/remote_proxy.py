#!/usr/bin/env python3
"""A TCP proxy for the remote tests: forwards 127.0.0.1:PORT to a server, adding DELAY_MS to
every piece of data in each direction (network latency), and optionally cutting every connection
once CUT_AFTER bytes have come from the server (a network failure mid-transfer), and optionally
appending every byte it forwards to FILE (what an eavesdropper sees). Prints its port on the first
line of stdout.
    remote_proxy.py SERVER_HOST:PORT [--delay-ms N] [--cut-after BYTES] [--port PORT] [--record FILE]
"""
import argparse
import asyncio
import sys


async def pipe(reader, writer, delay, budget, record):
    """Forwards reader to writer; each piece leaves `delay` seconds after it arrived (pieces in
    flight overlap, as on a network with that one-way latency)."""
    loop = asyncio.get_running_loop()
    queue = asyncio.Queue()

    async def deliver():
        while True:
            due, data = await queue.get()
            if data is None:
                return "closed"
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if budget is not None:
                if budget[0] <= len(data):
                    writer.write(data[: budget[0]])
                    await writer.drain()
                    writer.transport.abort()
                    return "cut"
                budget[0] -= len(data)
            writer.write(data)
            await writer.drain()

    sender = asyncio.create_task(deliver())
    try:
        while not sender.done():
            data = await reader.read(65536)
            if record is not None and data:
                record.write(data)
                record.flush()
            await queue.put((loop.time() + delay, data if data else None))
            if not data:
                break
        return await sender
    except (ConnectionError, asyncio.CancelledError):
        sender.cancel()
        return "closed"
    finally:
        try:
            writer.close()
        except Exception:
            pass


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("server")
    ap.add_argument("--delay-ms", type=float, default=0)
    ap.add_argument("--cut-after", type=int, default=None)
    ap.add_argument("--port", type=int, default=0, help="listen on this port (default: a free one)")
    ap.add_argument("--record", default=None, help="append every byte forwarded, both ways, to this file")
    args = ap.parse_args()
    record = open(args.record, "ab") if args.record else None
    host, port = args.server.rsplit(":", 1)
    delay = args.delay_ms / 1000.0

    async def handle(client_reader, client_writer):
        server_reader, server_writer = await asyncio.open_connection(host, int(port))
        budget = [args.cut_after] if args.cut_after is not None else None
        up = asyncio.create_task(pipe(client_reader, server_writer, delay, None, record))
        down = asyncio.create_task(pipe(server_reader, client_writer, delay, budget, record))
        done, pending = await asyncio.wait({up, down}, return_when=asyncio.FIRST_COMPLETED)
        if down in done and down.result() == "cut":
            server_writer.transport.abort()
            up.cancel()
        await asyncio.gather(up, down, return_exceptions=True)

    server = await asyncio.start_server(handle, "127.0.0.1", args.port, reuse_address=True)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
