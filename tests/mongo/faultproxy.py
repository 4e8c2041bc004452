"""A loopback TCP proxy in front of a MongoDB server that can lose or hold the reply to
one chosen command: the fault "the server applied it, then the connection died before
the answer arrived", and a stalled connection (to exhaust a pool).

A request is chosen by its command name (the first key of an OP_MSG body, e.g.
``update``) and, optionally, the collection it names; only the connection that sent it
is affected. Everything else, the driver's monitoring included, passes untouched.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field


@dataclass
class _Trap:
    marker: bytes
    collection: bytes | None
    mode: str  # "cut", "hold" or "hold_then_cut"
    fired: asyncio.Event = field(default_factory=asyncio.Event)


class FaultProxy:
    """Forward 127.0.0.1:<port> to ``(host, port)``."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.server: asyncio.Server | None = None
        self.port = 0
        self._trap: _Trap | None = None
        self.release = asyncio.Event()
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> FaultProxy:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    def url(self) -> str:
        return f"mongodb://127.0.0.1:{self.port}/?directConnection=true"

    def cut_reply_to(self, command: str, collection: str | None = None) -> asyncio.Event:
        """The reply to the next ``command`` (on ``collection``) is dropped and its
        connection closed on both sides; the returned event is set when that happened."""
        self._trap = _Trap(_marker(command), _coll(collection), "cut")
        return self._trap.fired

    def hold_reply_to(self, command: str, collection: str | None = None) -> asyncio.Event:
        """The reply to the next ``command`` waits until :attr:`release` is set."""
        self.release.clear()
        self._trap = _Trap(_marker(command), _coll(collection), "hold")
        return self._trap.fired

    def hold_then_cut_reply_to(self, command: str, collection: str | None = None) -> asyncio.Event:
        """The reply to the next ``command`` waits until :attr:`release` is set, then is
        dropped with its connection (the server applied it long before the loss)."""
        self.release.clear()
        self._trap = _Trap(_marker(command), _coll(collection), "hold_then_cut")
        return self._trap.fired

    def _matches(self, data: bytes) -> _Trap | None:
        trap = self._trap
        if trap is None or trap.marker not in data:
            return None
        if trap.collection is not None and trap.collection not in data:
            return None
        self._trap = None
        return trap

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            server_r, server_w = await asyncio.open_connection(*self.target)
        except OSError:
            client_w.close()
            return
        self._writers.update({client_w, server_w})
        pending: list[_Trap] = []

        async def upstream() -> None:
            while data := await client_r.read(1 << 20):
                trap = self._matches(data)
                if trap is not None:
                    pending.append(trap)
                server_w.write(data)
                await server_w.drain()

        async def downstream() -> None:
            while data := await server_r.read(1 << 20):
                if pending:
                    trap = pending.pop(0)
                    trap.fired.set()
                    if trap.mode == "cut":
                        return
                    await self.release.wait()
                    if trap.mode == "hold_then_cut":
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
        self.release.set()
        if self.server is not None:
            self.server.close()
            for writer in list(self._writers):
                with contextlib.suppress(Exception):
                    writer.close()
            with contextlib.suppress(Exception):
                await self.server.wait_closed()


def _marker(command: str) -> bytes:
    """How an OP_MSG body starts when ``command`` is its command: a BSON string element."""
    return b"\x02" + command.encode() + b"\x00"


def _coll(collection: str | None) -> bytes | None:
    return None if collection is None else collection.encode() + b"\x00"
