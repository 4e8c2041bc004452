"""The PostgreSQL failover drill: a primary and a streaming standby, the primary killed
(SIGKILL to every one of its processes, as a crashed machine) mid-run and the standby
promoted with ``pg_ctl promote``.

The standby is a ``pg_basebackup -R`` of the primary over a physical replication slot,
on the embedded server's binaries. Replication is asynchronous (``async``), or
synchronous with ``synchronous_standby_names='*'`` and ``synchronous_commit=on``
(``sync``: a commit waits for the standby to flush its WAL) or ``remote_apply`` (it
waits for the standby to apply it). Clients connect through one multi-host URL with
``target_session_attrs=read-write``, so a new connection finds whichever server
currently takes writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

from tests.servers.postgres import SYSTEM_USER, EmbeddedPostgres, Installation, _traversable

from .drills import Target
from .link import DelayedLink

MODES = {"async": None, "sync": "on", "remote_apply": "remote_apply"}
"""Each replication mode and the ``synchronous_commit`` it runs with (None: asynchronous)."""
SLOT = "failover_standby"


class Standby(EmbeddedPostgres):
    """A streaming standby of ``primary``: its data directory is a ``pg_basebackup -R``
    over the replication slot ``slot`` instead of an ``initdb``."""

    def __init__(
        self, primary: EmbeddedPostgres, slot: str, *, upstream: int | None = None
    ) -> None:
        super().__init__(bindir=None if primary.owns_binaries else primary.bin)
        self.primary, self.slot = primary, slot
        self.upstream = upstream or primary.port
        """The port the standby streams from: the primary's, or a link's in front of it."""

    def _prepare(self) -> None:
        if os.geteuid() == 0:
            self.user = SYSTEM_USER
            _traversable(self.root)
            shutil.chown(self.root, SYSTEM_USER, SYSTEM_USER)
        self._run(
            "pg_basebackup",
            *("-D", str(self.pgdata), "-h", "127.0.0.1", "-p", str(self.upstream)),
            *("-U", "postgres", "-R", "-S", self.slot, "-X", "stream", "-c", "fast"),
            timeout=120,
        )

    def promote(self) -> None:
        """Make the standby a primary, waiting until it takes writes."""
        self._run("pg_ctl", "-D", str(self.pgdata), "-w", "-t", "60", "promote", timeout=90)


def crash(server: EmbeddedPostgres) -> int:
    """SIGKILL the server's postmaster and every process it started; how many were killed.
    The postmaster's pid is the first line of ``postmaster.pid``."""
    pid = int((server.pgdata / "postmaster.pid").read_text().split()[0])
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                children.append(int(stat.parent.name))
    killed = 0
    for target in (pid, *children):
        with contextlib.suppress(ProcessLookupError):
            os.kill(target, signal.SIGKILL)
            killed += 1
    server._running = False  # it is gone: cleanup must not wait for it to stop
    return killed


async def _sql(url: str, *statements: str) -> list[Any]:
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        return [await conn.fetchval(sql) for sql in statements]
    finally:
        await conn.close()


async def _wait_streaming(primary: EmbeddedPostgres, *, sync: bool, within: float = 60) -> None:
    """Wait until the standby streams from the primary (as a synchronous standby if
    ``sync``)."""
    wanted = "sync" if sync else "async"
    deadline = time.monotonic() + within
    while True:
        (state,) = await _sql(
            primary.url,
            "SELECT sync_state FROM pg_stat_replication WHERE state = 'streaming' LIMIT 1",
        )
        if state == wanted:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the standby never streamed as {wanted} (saw {state!r})")
        await asyncio.sleep(0.1)


def multi_host_url(installation: Installation, *servers: EmbeddedPostgres) -> str:
    """The runtime URL naming every server, taking the one that accepts writes."""
    hosts = ",".join(f"127.0.0.1:{s.port}" for s in servers)
    return (
        f"postgresql://{quote(installation.role, safe='')}@{hosts}/postgres"
        f"?schema={installation.schema}&target_session_attrs=read-write"
    )


@contextlib.asynccontextmanager
async def replicated(
    mode: str, *, link_delay: float = 0.0, promote_after: float = 0.2
) -> AsyncIterator[Target]:
    """A primary and its standby in replication ``mode`` (:data:`MODES`), a fresh schema,
    and the fault that crashes the primary and promotes the standby. With ``link_delay``
    the standby streams through a :class:`~tests.failover.link.DelayedLink` (seconds
    each way), as from another machine."""
    if mode not in MODES:
        raise ValueError(f"unknown replication mode {mode!r}; expected one of {sorted(MODES)}")
    commit = MODES[mode]
    primary = EmbeddedPostgres(settings={"wal_level": "replica", "max_wal_senders": "5"})
    standby: Standby | None = None
    link: DelayedLink | None = None
    try:
        await asyncio.to_thread(primary.start)
        await _sql(primary.url, f"SELECT pg_create_physical_replication_slot('{SLOT}')")
        if link_delay:
            link = DelayedLink(primary.port, link_delay).start()
        standby = Standby(primary, SLOT, upstream=link.port if link else None)
        await asyncio.to_thread(standby.start)
        if commit is not None:
            await _sql(
                primary.url,
                "ALTER SYSTEM SET synchronous_standby_names = '*'",
                f"ALTER SYSTEM SET synchronous_commit = '{commit}'",
                "SELECT pg_reload_conf()",
            )
        await _wait_streaming(primary, sync=commit is not None)
        installation = await Installation(primary.url).acreate()
        url = multi_host_url(installation, primary, standby)
        promoted = standby

        async def fault() -> dict[str, Any]:
            started = time.monotonic()
            if link is not None:  # the host is lost: what it sent and was not received too
                link.sever()
            killed = await asyncio.to_thread(crash, primary)
            await asyncio.sleep(promote_after)
            await asyncio.to_thread(promoted.promote)
            (recovering,) = await _sql(promoted.url, "SELECT pg_is_in_recovery()")
            return {
                "failovers": 0 if recovering else 1,
                "killed_processes": killed,
                "seconds": round(time.monotonic() - started, 3),
            }

        over = (
            f", {link_delay * 1000:g} ms link, host lost"
            if link_delay
            else ", loopback, processes killed"
        )
        yield Target(url=url, fault=fault, description=f"PostgreSQL 18, {mode} standby{over}")
    finally:
        if link is not None:
            link.close()
        for server in (standby, primary):
            if server is not None:
                await asyncio.to_thread(server.cleanup)


def async_drill() -> contextlib.AbstractAsyncContextManager[Target]:
    """Asynchronous streaming replication."""
    return replicated("async")


def sync_drill() -> contextlib.AbstractAsyncContextManager[Target]:
    """Synchronous replication, ``synchronous_commit=on``."""
    return replicated("sync")


def remote_apply_drill() -> contextlib.AbstractAsyncContextManager[Target]:
    """Synchronous replication, ``synchronous_commit=remote_apply``."""
    return replicated("remote_apply")


LINK_DELAY = 0.005
"""Seconds each way on the link drills' replication stream (10 ms round trip: another
availability zone, or a loaded network)."""


def async_link_drill() -> contextlib.AbstractAsyncContextManager[Target]:
    """Asynchronous replication over a link with latency."""
    return replicated("async", link_delay=LINK_DELAY)


def sync_link_drill() -> contextlib.AbstractAsyncContextManager[Target]:
    """Synchronous replication (``on``) over a link with latency."""
    return replicated("sync", link_delay=LINK_DELAY)
