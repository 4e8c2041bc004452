"""The raw floor: what a backend's bare driver can do, measured beside its adapter.

``agentstores bench`` reports an adapter's compare-and-swap throughput next to a *raw
floor*: the same single-key compare-and-swap done directly with the backend's driver,
with no adapter in between (no key codec, no ownership or fence checks, no error
translation). The ratio adapter/floor is the adapter's overhead on this machine, in this
run; absolute numbers drift between runs, the ratio much less.

A backend offers its floor through :attr:`agentstores.plugins.BackendInfo.bench_floor`,
a lazy ``"module:callable"`` path. The callable takes no arguments and returns a fresh,
unopened :class:`RawFloor`. Discovery never imports it; the bench does, only for the
backend it measures.

Writing one (the harness drives it; see the method docs for the exact protocol)::

    class PostgresFloor(RawFloor):
        async def setup(self, url, clients):
            self.pool = await asyncpg.create_pool(dsn_from(url), min_size=clients, ...)
            # create a scratch table and one row per client with value 0
        async def cas(self, client, op):
            done = await self.pool.fetchval(
                "UPDATE floor SET v = $3, at = now() WHERE k = $1 AND v = $2 RETURNING 1",
                client, op, op + 1)
            return done is not None
        async def close(self):
            # drop the scratch table, close the pool
"""

from __future__ import annotations

import asyncio
import importlib
from abc import ABC, abstractmethod

from ..errors import UsageError
from ..plugins import BackendInfo, get_registry, scheme_of, unknown_scheme

BUILTIN_FLOORS: dict[str, str] = {"memory": "agentstores.bench.floor:MemoryFloor"}
"""Floors for backends whose ``BackendInfo`` does not name one (the built-in memory backend)."""


class RawFloor(ABC):
    """One raw single-key compare-and-swap per call, on the calling client's own key.

    Protocol (the harness keeps to it, so an implementation may rely on it):

    - ``setup(url, clients)`` is awaited once, before any ``cas``. It connects to the
      backend ``url`` names (the same URL the adapter gets) and prepares ``clients``
      keys, one per client ``0 .. clients-1``, each holding the value ``0``. Use
      scratch names that cannot collide with adapter data or another concurrent run
      (a random prefix, a temporary table or directory); the URL may carry a
      least-privilege runtime role that cannot create tables in the adapter's schema,
      so prefer what that role can always do (e.g. a ``TEMP`` table per connection, or
      rows in the adapter's own table under a scratch key). Open connections the way
      ``clients`` separate adapter clients would (one connection each, or a pool with
      at least ``clients`` connections), so the comparison with the adapter is fair.
    - ``cas(client, op)`` does ONE atomic compare-and-swap on client ``client``'s key:
      if the stored value is ``op``, store ``op + 1`` and return True; otherwise change
      nothing and return False. Do what the adapter's CAS does at its core and nothing
      more: one conditional statement or script, one locked read-modify-write of one
      file with the same durability (fsync) the adapter promises, stamping the store's
      clock if the adapter does. For each client the harness calls with ``op`` =
      0, 1, 2, ... in order, never two calls for one client at once; calls for different
      clients run concurrently. A correct floor therefore returns True every time.
    - ``close()`` is awaited once at the end, also after a failure: remove the scratch
      data and close every connection.

    Driver errors may propagate; the harness reports them and stops.
    """

    name: str = ""
    """Short label for reports, e.g. ``"asyncpg UPDATE ... WHERE v = $2"``."""

    @abstractmethod
    async def setup(self, url: str, clients: int) -> None:
        """Connect and give clients ``0 .. clients-1`` one key each, holding ``0``."""

    @abstractmethod
    async def cas(self, client: int, op: int) -> bool:
        """Atomically replace ``op`` with ``op + 1`` on ``client``'s key; True if it did."""

    @abstractmethod
    async def close(self) -> None:
        """Remove scratch data and close connections."""


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


def floor_path(info: BackendInfo) -> str | None:
    """The ``"module:callable"`` of a backend's floor, or None when it has none."""
    return info.bench_floor or BUILTIN_FLOORS.get(info.name)


def load_floor(info: BackendInfo) -> RawFloor | None:
    """A fresh, unopened floor for ``info``'s backend (None when it offers none)."""
    path = floor_path(info)
    if path is None:
        return None
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise UsageError(f"bench_floor must look like 'module:callable', got {path!r}")
    make = getattr(importlib.import_module(module_name), attr)
    floor = make()
    if not isinstance(floor, RawFloor):
        raise UsageError(f"{path} returned {type(floor).__name__}, not a RawFloor")
    return floor


def floor_for_url(url: str) -> RawFloor | None:
    """The floor of the backend ``url`` names (None when it offers none)."""
    scheme = scheme_of(url)
    registry = get_registry()
    info = registry.by_scheme(scheme)
    if info is None:
        raise UsageError(unknown_scheme(scheme, registry))
    return load_floor(info)


__all__ = [
    "BUILTIN_FLOORS",
    "MemoryFloor",
    "RawFloor",
    "floor_for_url",
    "floor_path",
    "load_floor",
]
