"""The raw floor: what a backend's bare driver can do, measured beside its adapter.

``agentstores bench`` reports an adapter's compare-and-swap throughput next to a *raw
floor*: the same single-key compare-and-swap done directly with the backend's driver,
with no adapter in between (no key codec, no ownership or fence checks, no error
translation). The ratio adapter/floor is the adapter's overhead on this machine, in this
run; absolute numbers drift between runs, the ratio much less.

A floor is found by its backend's name (``BackendInfo.name``) as a lazy
``"module:callable"`` path whose callable takes no arguments and returns a fresh,
unopened :class:`RawFloor`. The floors of the backends this project ships are in
:data:`FLOORS`, one module each under ``agentstores_tools.floors``; any other distribution
declares its own in the :data:`FLOOR_GROUP` entry-point group, so neither core nor this
distribution needs to know it::

    [project.entry-points."agentstores.floors"]
    mybackend = "agentstores_mybackend_bench:MyFloor"

Nothing imports a floor until the bench measures its backend, and a floor module may
import its adapter and driver freely.

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

import importlib
import importlib.metadata
from abc import ABC, abstractmethod

from agentstores.errors import UsageError
from agentstores.plugins import DISTRIBUTIONS, get_registry, scheme_of, unknown_scheme

FLOOR_GROUP = "agentstores.floors"
"""The entry-point group of floors: each entry's name is a backend's name, its value the
``"module:callable"`` making that backend's floor."""

FLOORS: dict[str, str] = {
    "memory": "agentstores_tools.floors.memory:MemoryFloor",
    "file": "agentstores_tools.floors.file:FileFloor",
    "postgres": "agentstores_tools.floors.postgres:PostgresFloor",
    "redis": "agentstores_tools.floors.redis:RedisFloor",
    "mongo": "agentstores_tools.floors.mongo:MongoFloor",
    "s3": "agentstores_tools.floors.s3:S3Floor",
}
"""The floors of the backends this project ships, by backend name. Each module imports
its adapter, so it is imported only when that backend is measured."""


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


def floor_path(backend: str) -> str | None:
    """The ``"module:callable"`` of the floor of the backend named ``backend``: a
    distribution's entry in :data:`FLOOR_GROUP`, else :data:`FLOORS`; None when it has none.

    Raises:
        UsageError: more than one distribution declares a floor for ``backend``.
    """
    declared = sorted(
        {ep.value for ep in importlib.metadata.entry_points(group=FLOOR_GROUP, name=backend)}
    )
    if len(declared) > 1:
        raise UsageError(
            f"more than one floor is declared for backend {backend!r} in the "
            f"{FLOOR_GROUP!r} entry-point group: {', '.join(declared)}"
        )
    return declared[0] if declared else FLOORS.get(backend)


def _not_installed(backend: str, path: str, missing: str) -> str:
    """Why the floor at ``path`` cannot load: module ``missing`` (its adapter, most
    often) is not installed; with the distribution to install when it is one of ours."""
    top = missing.partition(".")[0]
    message = f"backend {backend!r} has no floor here: {path} needs {top}, which is not installed"
    distribution = {d.replace("-", "_"): d for d in DISTRIBUTIONS.values()}.get(top)
    if distribution is not None:
        message += f"; install it with: pip install {distribution}"
    return message


def load_floor(backend: str) -> RawFloor | None:
    """A fresh, unopened floor for the backend named ``backend`` (None when it has none).

    Raises:
        UsageError: the floor's path is malformed, its module (or the adapter it
            imports) is not installed, or it does not make a :class:`RawFloor`.
    """
    path = floor_path(backend)
    if path is None:
        return None
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise UsageError(
            f"the floor of backend {backend!r} must be named 'module:callable', got {path!r}"
        )
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise UsageError(_not_installed(backend, path, exc.name or module_name)) from exc
    make = getattr(module, attr, None)
    if not callable(make):
        raise UsageError(f"the floor of backend {backend!r}: {path} names no callable")
    floor = make()
    if not isinstance(floor, RawFloor):
        raise UsageError(f"{path} returned {type(floor).__name__}, not a RawFloor")
    return floor


def floor_for_url(url: str) -> RawFloor | None:
    """The floor of the backend ``url`` names (None when it offers none).

    Raises:
        UsageError: no installed backend handles the URL's scheme, or :func:`load_floor`'s.
    """
    scheme = scheme_of(url)
    registry = get_registry()
    info = registry.by_scheme(scheme)
    if info is None:
        raise UsageError(unknown_scheme(scheme, registry))
    return load_floor(info.name)


__all__ = [
    "FLOORS",
    "FLOOR_GROUP",
    "RawFloor",
    "floor_for_url",
    "floor_path",
    "load_floor",
]
