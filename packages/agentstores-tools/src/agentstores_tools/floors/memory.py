"""The raw floor of core's in-memory backend: a dict compare-and-set under a lock."""

from __future__ import annotations

import asyncio

from ..bench.floor import RawFloor


class MemoryFloor(RawFloor):
    """The floor of the in-memory backend: a dict compare-and-set under an asyncio lock."""

    name = "dict compare-and-set under asyncio.Lock"

    def __init__(self) -> None:
        self._values: list[int] = []
        self._lock = asyncio.Lock()

    async def setup(self, url: str, clients: int) -> None:
        """Give each of the ``clients`` clients a slot holding ``0`` (the URL is not needed)."""
        self._values = [0] * clients

    async def cas(self, client: int, op: int) -> bool:
        """Replace ``op`` with ``op + 1`` in ``client``'s slot under the lock; True if it did."""
        async with self._lock:
            if self._values[client] != op:
                return False
            self._values[client] = op + 1
            return True

    async def close(self) -> None:
        """Drop the slots."""
        self._values = []
