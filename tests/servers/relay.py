"""A loopback TCP relay in front of a real server, for network faults no server-side kill
can time: a reply lost after the server applied the request, a request lost before it
arrived, a reply held back.

:class:`Relay` forwards every byte both ways, one upstream connection per client
connection. A backend's fault proxy subclasses it and judges each chunk in
:meth:`Relay.request` and :meth:`Relay.reply`; a chunk judged ``False`` is dropped and
its connection closed on both sides. Everything else passes through untouched.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import Any, Self

CHUNK = 1 << 20


class Relay:
    """Forward 127.0.0.1:<port> to ``(host, port)``."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.server: asyncio.Server | None = None
        self.port = 0
        self._writers: set[asyncio.StreamWriter] = set()
        self._handlers: set[asyncio.Task[Any]] = set()

    async def start(self) -> Self:
        """Listen on a free loopback port (:attr:`port`); returns the relay itself."""
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    def request(self, data: bytes, marks: list[Any]) -> bool | Awaitable[bool]:
        """Judge a chunk a client sent, before it goes to the server. ``marks`` belongs
        to this connection: what is put there is handed to :meth:`reply` with the next
        chunk the server sends back on it, oldest first. An awaitable verdict holds this
        connection's requests back until it is done."""
        return True

    async def reply(self, data: bytes, mark: Any | None) -> bool:
        """Judge a chunk the server sent, before it goes to the client; ``mark`` is the
        oldest mark :meth:`request` left on this connection (``None``: none left)."""
        return True

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            server_r, server_w = await asyncio.open_connection(*self.target)
        except OSError:
            client_w.close()
            return
        handler = asyncio.current_task()
        assert handler is not None
        self._handlers.add(handler)
        self._writers.update({client_w, server_w})
        marks: list[Any] = []

        async def upstream() -> None:
            while data := await client_r.read(CHUNK):
                verdict = self.request(data, marks)
                if not isinstance(verdict, bool):
                    verdict = await verdict
                if not verdict:
                    return
                server_w.write(data)
                await server_w.drain()

        async def downstream() -> None:
            while data := await server_r.read(CHUNK):
                if not await self.reply(data, marks.pop(0) if marks else None):
                    return
                client_w.write(data)
                await client_w.drain()

        pumps = [asyncio.create_task(upstream()), asyncio.create_task(downstream())]
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pump in pumps:
                pump.cancel()
            # A pump that died of a reset connection is the fault itself, not an error.
            await asyncio.gather(*pumps, return_exceptions=True)
            for writer in (client_w, server_w):
                self._writers.discard(writer)
                with contextlib.suppress(Exception):
                    writer.close()
            self._handlers.discard(handler)

    async def close(self) -> None:
        """Stop listening and close every relayed connection."""
        if self.server is None:
            return
        self.server.close()
        for writer in list(self._writers):
            with contextlib.suppress(Exception):
                writer.close()
        for handler in list(self._handlers):
            handler.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        with contextlib.suppress(Exception):
            await self.server.wait_closed()
