"""Which tests run which server-side file: counters planted in a copy, read around each test.

A mutant in one SQL function or Lua script can only be killed by a test that runs it, so
a mutant's run needs only those tests, fastest first. The map is made by one run of the
suite on a copy of the adapter with a probe at the top of every mutated file: a counter
the server keeps whatever becomes of the call (a PostgreSQL sequence, since ``nextval``
is never rolled back; a Valkey ``INCR`` outside every key prefix). The guard plugin reads
the counters before and after each test (subprocesses a test starts count too: the
counters are on the server) and writes, per test, its duration and the files it ran.

Only where the adapter's tests take the run's one server (``tests/servers/shared.py``):
PostgreSQL and Redis. A Lua fragment's probe runs wherever a script includes it, so a
fragment maps to the tests of every script that includes it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import re
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

PROBED = ("postgres", "redis")
"""The adapters with a map: their mutated files are server-side and their tests share
the run's server."""
SCHEMA = "agentstores_probe"
"""PostgreSQL: the schema holding one sequence per function file."""
KEY_PREFIX = "agentstores-probe:"
"""Valkey: the counters' keys, outside every key prefix a test uses."""
_BEGIN = re.compile(r"^BEGIN$", re.MULTILINE)


def probe_name(relative: str) -> str:
    """The counter's name for a mutated file: ``sql/functions/lock_header.sql`` gives
    ``lock_header``, ``scripts/include/header.lua`` gives ``include_header``."""
    path = Path(relative)
    parts = [p for p in path.parent.parts if p not in ("sql", "functions", "scripts")]
    return "_".join([*parts, path.stem])


def probed_text(adapter: str, relative: str, text: str) -> str:
    """``text`` of the mutated file ``relative`` with its probe planted."""
    name = probe_name(relative)
    if adapter == "postgres":
        found = _BEGIN.search(text)
        if found is None:
            raise RuntimeError(f"{relative}: no line 'BEGIN' to probe after")
        probe = f"\n    PERFORM nextval('{SCHEMA}.{name}');"
        return text[: found.end()] + probe + text[found.end() :]
    if adapter == "redis":
        probe = f"redis.call('INCR', '{KEY_PREFIX}{name}')"
        first, _, rest = text.partition("\n")
        if first.startswith("#!lua"):  # a script: a read-only one must be allowed to count
            return f"#!lua\n{probe}\n{rest}"
        return f"{probe}\n{text}"  # a fragment: runs where a script includes it
    raise ValueError(f"no probes for {adapter!r}")


def prepare(adapter: str, url: str, names: list[str]) -> None:
    """Make the counters ``names`` exist on the run's server, at zero."""
    if adapter == "postgres":

        async def create() -> None:
            import asyncpg

            conn = await asyncpg.connect(url)
            try:
                await conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
                await conn.execute(f"CREATE SCHEMA {SCHEMA}")
                for name in names:
                    await conn.execute(f"CREATE SEQUENCE {SCHEMA}.{name}")
                await conn.execute(f"GRANT USAGE ON SCHEMA {SCHEMA} TO PUBLIC")
                await conn.execute(f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA {SCHEMA} TO PUBLIC")
            finally:
                await conn.close()

        _off_loop(create())
    else:
        import redis

        client = redis.Redis.from_url(url)
        try:
            stale = list(client.scan_iter(match=f"{KEY_PREFIX}*"))
            if stale:
                client.delete(*stale)
        finally:
            client.close()


def read(adapter: str, url: str) -> dict[str, int]:
    """Every counter's value now (a counter never moved reads 0)."""
    if adapter == "postgres":

        async def fetch() -> dict[str, int]:
            import asyncpg

            conn = await asyncpg.connect(url)
            try:
                rows = await conn.fetch(
                    "SELECT sequencename, coalesce(last_value, 0) AS n FROM pg_sequences"
                    " WHERE schemaname = $1",
                    SCHEMA,
                )
            finally:
                await conn.close()
            return {row["sequencename"]: int(row["n"]) for row in rows}

        return _off_loop(fetch())
    import redis

    client = redis.Redis.from_url(url, decode_responses=True)
    try:
        keys = sorted(client.scan_iter(match=f"{KEY_PREFIX}*"))
        values = client.mget(keys) if keys else []
    finally:
        client.close()
    return {k.removeprefix(KEY_PREFIX): int(v or 0) for k, v in zip(keys, values, strict=True)}


def _off_loop(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` on a loop of its own in another thread: the test process's loop
    (pytest-asyncio's) is left alone."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()
