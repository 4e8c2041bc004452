"""A loopback TCP link with latency: every byte arrives ``delay`` seconds after it was
sent, in both directions, as between two machines; throughput is not limited.

Used between a primary and its replica so that replication lags as it does over a real
network (over loopback a replica receives the WAL within microseconds, and a failover
almost never catches a write in flight). The link runs its own event loop in a thread,
so a busy drill process does not stretch the delay. Bytes on the way when one side
dies are still delivered, as packets already on the wire are; :meth:`DelayedLink.sever`
drops them instead and cuts every connection, as when a host is lost with its network.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable
from typing import Self

Delay = Callable[[bytes], float]
"""How long a chunk of one direction of a connection takes on the way, given the chunk."""


class DelayedLink:
    """Forward 127.0.0.1:<port> to 127.0.0.1:``target``, ``delay`` seconds each way."""

    def __init__(self, target: int, delay: float) -> None:
        if delay < 0:
            raise ValueError("delay must be >= 0")
        self.target, self.delay = target, delay
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.severed = False

    def start(self) -> Self:
        """Listen on a free loopback port (:attr:`port`) and serve from a thread."""
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(self._listen(), self._loop)
        future.result(timeout=10)
        return self

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            server_r, server_w = await asyncio.open_connection("127.0.0.1", self.target)
        except OSError:
            client_w.close()
            return
        if self.severed:
            client_w.close()
            server_w.close()
            return
        self._writers.update({client_w, server_w})
        requests, replies = self.delays()
        await asyncio.gather(
            self._pump(client_r, server_w, requests),
            self._pump(server_r, client_w, replies),
            return_exceptions=True,
        )

    def delays(self) -> tuple[Delay, Delay]:
        """For a new connection: how long each chunk it sends, and each chunk it gets
        back, takes on the way (here :attr:`delay`, always)."""

        def always(data: bytes) -> float:
            return self.delay

        return always, always

    async def _pump(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay_of: Delay
    ) -> None:
        """Read everything ``reader`` gets and write each chunk ``delay_of(chunk)`` after
        it came, in the order they came."""
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def deliver() -> None:
            while True:
                due, data = await queue.get()
                if not data:
                    return
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                if self.severed:
                    return
                writer.write(data)
                await writer.drain()

        sender = asyncio.create_task(deliver())
        try:
            with contextlib.suppress(OSError):
                while data := await reader.read(1 << 20):
                    queue.put_nowait((time.monotonic() + delay_of(data), data))
            queue.put_nowait((time.monotonic() + self.delay, b""))
            with contextlib.suppress(OSError):
                await sender
        finally:
            sender.cancel()
            with contextlib.suppress(Exception):
                writer.close()

    def sever(self) -> None:
        """Cut every connection at once, dropping every byte still on the way, and refuse
        new ones: the far side gets nothing more of what was sent."""

        async def cut() -> None:
            self.severed = True
            for writer in list(self._writers):
                with contextlib.suppress(Exception):
                    writer.transport.abort()

        asyncio.run_coroutine_threadsafe(cut(), self._loop).result(timeout=10)

    def close(self) -> None:
        """Stop listening, drop every connection and stop the thread."""

        async def stop() -> None:
            if self._server is not None:
                self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(stop(), self._loop).result(timeout=10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
