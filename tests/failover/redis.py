"""The Redis failover drill: a Valkey primary, two replicas and three Sentinels; the
primary killed (SIGKILL) mid-run and a replica promoted by the Sentinels, the clients
following through ``redis+sentinel://``.

Replication in Redis is asynchronous; what the adapter can add is to wait after each
write (README, Durability): ``wait_replicas=1`` (``WAIT 1``: one replica has received
it) or ``wait_aof_replicas=1`` (``WAITAOF 0 1``: one replica has written it to its
append-only file and fsynced it), a write the wait does not confirm in time being
reported as an unknown outcome. Sentinel promotes the replica with the largest
replication offset it last saw, so a write one replica confirmed is normally on the
one promoted.

Everyone reaches the first primary through a :class:`ReplicationLink`: its replicas,
the Sentinels (which announce the link's port) and so the clients. The link delays only
the replication stream (5 ms each way, as to a replica on another machine); the clients
and Sentinels get their replies at loopback speed, as next to the primary. Over bare
loopback a replica has every write within microseconds and the kill almost never
catches one in flight. The fault severs the link (what was on the way to the replicas
is lost with the host) and kills the primary; the Sentinels notice after
``down_after_ms`` (1 s), elect a leader and promote a replica, which clients then reach
directly. Clients keep trying to connect for ``reconnect_window`` (10 s here, 3 s by
default) meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

from tests.servers.valkey import ValkeySentinelGroup

from .drills import Target
from .link import Delay, DelayedLink


class ReplicationLink(DelayedLink):
    """A :class:`~tests.failover.link.DelayedLink` that delays only replication: the bytes
    of a connection that has sent ``PSYNC`` or ``REPLCONF`` (a replica's), both ways, from
    then on; every other connection's pass at once."""

    def delays(self) -> tuple[Delay, Delay]:
        replica = False

        def requests(data: bytes) -> float:
            nonlocal replica
            if not replica:
                upper = data.upper()
                replica = b"PSYNC" in upper or b"REPLCONF" in upper
            return self.delay if replica else 0.0

        def replies(data: bytes) -> float:
            return self.delay if replica else 0.0

        return requests, replies


LINK_DELAY = 0.005
"""Seconds each way between the first primary and everyone else (as the PostgreSQL link
drills)."""
OPTIONS = {
    "async": "",
    "wait": "&wait_replicas=1&wait_timeout_ms=2000",
    "waitaof": "&wait_aof_replicas=1&wait_timeout_ms=2000",
}
"""Each configuration's adapter options (``wait_timeout_ms``: how long a write waits for
the replica before it is reported as an unknown outcome)."""


@contextlib.asynccontextmanager
async def sentinel_group(mode: str, *, link_delay: float = LINK_DELAY) -> AsyncIterator[Target]:
    """A Sentinel group and the adapter options of ``mode`` (:data:`OPTIONS`), and the
    fault that loses the primary's host. Every node runs the AOF (``everysec``), which
    ``wait_aof_replicas`` needs; what a failover loses does not depend on it."""
    if mode not in OPTIONS:
        raise ValueError(f"unknown Redis drill mode {mode!r}; expected one of {sorted(OPTIONS)}")
    links: list[ReplicationLink] = []

    def front(port: int) -> int:
        link = ReplicationLink(port, link_delay).start()
        links.append(link)
        return link.port

    group = ValkeySentinelGroup(
        replicas=2, appendonly=True, appendfsync="everysec", front=front if link_delay else None
    )
    try:
        await asyncio.to_thread(group.start)
        url = f"{group.url}?reconnect_window=10{OPTIONS[mode]}"

        async def fault() -> dict[str, Any]:
            started = time.monotonic()
            old = group.primary
            for link in links:  # the host is lost: what it sent and was not received too
                link.sever()
            try:
                new = await asyncio.to_thread(group.kill_primary)
            except RuntimeError as exc:
                return {"failovers": 0, "error": str(exc)[:300]}
            return {
                "failovers": 1 if new is not old else 0,
                "seconds": round(time.monotonic() - started, 3),
            }

        waits = {
            "async": "no wait (asynchronous)",
            "wait": "wait_replicas=1 (WAIT)",
            "waitaof": "wait_aof_replicas=1 (WAITAOF)",
        }[mode]
        over = (
            f", replicas over a {link_delay * 1000:g} ms link, host lost"
            if link_delay
            else ", loopback"
        )
        yield Target(
            url=url,
            fault=fault,
            description=f"Valkey 9, Sentinel, 2 replicas, {waits}{over}",
        )
    finally:
        await asyncio.to_thread(group.close)  # first: the link's connections end by EOF
        for link in links:
            link.close()


FAR_DELAY = 0.05
"""Seconds each way to replicas in another region: the window in which an acknowledged
write exists on the primary only is ten times the near drills'."""


def async_far_drill() -> contextlib.AbstractAsyncContextManager[Target]:
    """No wait, replicas 50 ms away."""
    return sentinel_group("async", link_delay=FAR_DELAY)


def wait_far_drill() -> contextlib.AbstractAsyncContextManager[Target]:
    """``wait_replicas=1``, replicas 50 ms away."""
    return sentinel_group("wait", link_delay=FAR_DELAY)


def async_drill() -> contextlib.AbstractAsyncContextManager[Target]:
    """No wait: acknowledged once the primary ran the write."""
    return sentinel_group("async")


def wait_drill() -> contextlib.AbstractAsyncContextManager[Target]:
    """``wait_replicas=1``: acknowledged once a replica has received the write."""
    return sentinel_group("wait")


def waitaof_drill() -> contextlib.AbstractAsyncContextManager[Target]:
    """``wait_aof_replicas=1``: acknowledged once a replica has fsynced the write."""
    return sentinel_group("waitaof")
