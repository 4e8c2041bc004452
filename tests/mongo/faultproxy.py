"""A loopback TCP proxy in front of a MongoDB server that can lose or hold the reply to
one chosen command: the fault "the server applied it, then the connection died before
the answer arrived", and a stalled connection (to exhaust a pool); or deliver one
request late: "the connection died, the client gave up on the call, and the request,
still in the network, landed afterwards".

A request is chosen by its command name (the first key of an OP_MSG body, e.g.
``update``) and, optionally, the collection it names; only the connection that sent it
is affected. Everything else, the driver's monitoring included, passes untouched.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any

from tests.servers.relay import Relay


@dataclass
class _Trap:
    marker: bytes
    collection: bytes | None
    mode: str  # "cut", "hold", "hold_then_cut", "late" or "stall"
    fired: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class _Late:
    """A request held back, waiting for the next request ``marker`` on ``collection``."""

    data: bytes
    marker: bytes
    collection: bytes | None
    delivered: asyncio.Event


class FaultProxy(Relay):
    """Forward 127.0.0.1:<port> to ``(host, port)``."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(host, port)
        self._trap: _Trap | None = None
        self._late: _Late | None = None
        self.release = asyncio.Event()

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

    def deliver_late(self, command: str, collection: str | None = None) -> asyncio.Event:
        """The next ``command`` (on ``collection``) is held back and its connection closed
        before it reaches the server, so the client sees the call fail with nothing
        applied yet; the request reaches the server on a connection of its own just
        before the next ``command`` on ``collection`` (from any connection) does, and
        is applied first. The returned event is set once it has been applied.

        Timed that way it lands inside a reconciliation's window: after the client read
        the record back and found no trace of it, before its next conditional write."""
        self._trap = _Trap(_marker(command), _coll(collection), "late")
        return self._trap.fired

    def stall_request_to(self, command: str, collection: str | None = None) -> asyncio.Event:
        """The next ``command`` (on ``collection``) never reaches the server: it waits
        until :attr:`release` is set, then is dropped with its connection. The caller,
        waiting for a reply, can be cancelled there: a process dying between the writes
        it made and the one that would have committed them."""
        self.release.clear()
        self._trap = _Trap(_marker(command), _coll(collection), "stall")
        return self._trap.fired

    def request(self, data: bytes, marks: list[Any]) -> bool | Awaitable[bool]:
        late = self._late
        if late is not None and _matches(data, late.marker, late.collection):
            self._late = None
            return self._deliver(late)
        trap = self._trap
        if trap is None or not _matches(data, trap.marker, trap.collection):
            return True
        self._trap = None
        if trap.mode == "late":
            self._late = _Late(data, trap.marker, trap.collection, trap.fired)
            return False
        if trap.mode == "stall":
            return self._stall(trap)
        marks.append(trap)
        return True

    async def _stall(self, trap: _Trap) -> bool:
        trap.fired.set()
        await self.release.wait()
        return False

    async def _deliver(self, late: _Late) -> bool:
        """Send the held request on a fresh connection and wait for the server's reply
        (so it is applied before the request that released it); then let that one pass."""
        reader, writer = await asyncio.open_connection(*self.target)
        try:
            writer.write(late.data)
            await writer.drain()
            (length,) = struct.unpack("<i", await reader.readexactly(4))
            await reader.readexactly(length - 4)
        finally:
            writer.close()
        late.delivered.set()
        return True

    async def reply(self, data: bytes, mark: Any | None) -> bool:
        if not isinstance(mark, _Trap):
            return True
        mark.fired.set()
        if mark.mode == "cut":
            return False
        await self.release.wait()
        return mark.mode != "hold_then_cut"

    async def close(self) -> None:
        self.release.set()
        await super().close()


def _matches(data: bytes, marker: bytes, collection: bytes | None) -> bool:
    return marker in data and (collection is None or collection in data)


def _marker(command: str) -> bytes:
    """How an OP_MSG body starts when ``command`` is its command: a BSON string element."""
    return b"\x02" + command.encode() + b"\x00"


def _coll(collection: str | None) -> bytes | None:
    return None if collection is None else collection.encode() + b"\x00"
