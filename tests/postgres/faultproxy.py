"""A loopback TCP proxy that can lose a response: the network fault "it committed, then
the connection died before the answer arrived", which no server-side kill can time.

Everything else passes through untouched to the real server.
"""

from __future__ import annotations

import asyncio
from typing import Any

from tests.servers.relay import Relay


class FaultProxy(Relay):
    """Forward 127.0.0.1:<port> to ``(host, port)``; :meth:`cut_next_response` arms it."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(host, port)
        self._armed = False
        self.cut = asyncio.Event()

    def cut_next_response(self) -> None:
        """The next bytes the server sends on any connection are dropped, and that
        connection is closed on both sides."""
        self.cut.clear()
        self._armed = True

    async def reply(self, data: bytes, mark: Any | None) -> bool:
        if not self._armed:
            return True
        self._armed = False
        self.cut.set()
        return False
