"""A loopback TCP proxy in front of a MongoDB server that can lose or hold the reply to
one chosen command: the fault "the server applied it, then the connection died before
the answer arrived", and a stalled connection (to exhaust a pool).

A request is chosen by its command name (the first key of an OP_MSG body, e.g.
``update``) and, optionally, the collection it names; only the connection that sent it
is affected. Everything else, the driver's monitoring included, passes untouched.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from tests.servers.relay import Relay


@dataclass
class _Trap:
    marker: bytes
    collection: bytes | None
    mode: str  # "cut", "hold" or "hold_then_cut"
    fired: asyncio.Event = field(default_factory=asyncio.Event)


class FaultProxy(Relay):
    """Forward 127.0.0.1:<port> to ``(host, port)``."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(host, port)
        self._trap: _Trap | None = None
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

    def request(self, data: bytes, marks: list[Any]) -> bool:
        trap = self._trap
        if trap is None or trap.marker not in data:
            return True
        if trap.collection is not None and trap.collection not in data:
            return True
        self._trap = None
        marks.append(trap)
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


def _marker(command: str) -> bytes:
    """How an OP_MSG body starts when ``command`` is its command: a BSON string element."""
    return b"\x02" + command.encode() + b"\x00"


def _coll(collection: str | None) -> bytes | None:
    return None if collection is None else collection.encode() + b"\x00"
