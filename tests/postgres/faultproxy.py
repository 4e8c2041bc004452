"""A loopback TCP proxy that can lose a response: the network fault "it committed, then
the connection died before the answer arrived", which no server-side kill can time.

Everything else passes through untouched to the real server.
"""

from __future__ import annotations

import asyncio
import contextlib


class FaultProxy:
    """Forward 127.0.0.1:<port> to ``(host, port)``; :meth:`cut_next_response` arms it."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.server: asyncio.Server | None = None
        self.port = 0
        self._armed = False
        self.cut = asyncio.Event()
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> FaultProxy:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    def cut_next_response(self) -> None:
        """The next bytes the server sends on any connection are dropped, and that
        connection is closed on both sides."""
        self.cut.clear()
        self._armed = True

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            server_r, server_w = await asyncio.open_connection(*self.target)
        except OSError:
            client_w.close()
            return
        self._writers.update({client_w, server_w})

        async def upstream() -> None:
            while data := await client_r.read(65536):
                server_w.write(data)
                await server_w.drain()

        async def downstream() -> None:
            while data := await server_r.read(65536):
                if self._armed:
                    self._armed = False
                    self.cut.set()
                    return
                client_w.write(data)
                await client_w.drain()

        tasks = [asyncio.create_task(upstream()), asyncio.create_task(downstream())]
        with contextlib.suppress(Exception):
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in tasks:
            task.cancel()
        for writer in (client_w, server_w):
            self._writers.discard(writer)
            with contextlib.suppress(Exception):
                writer.close()

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            for writer in list(self._writers):
                with contextlib.suppress(Exception):
                    writer.close()
            with contextlib.suppress(Exception):
                await self.server.wait_closed()
