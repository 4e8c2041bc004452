"""``python -m tests.bench.peers``: start the servers, measure every system, write the
table (``peers.md``), the figures (``peers.json``) and the plot (``peers.png``).

MongoDB: ``langgraph-checkpoint-mongodb`` and the OpenAI SDK's ``MongoDBSession`` are the
peers there; adding them next to an agentstores MongoDB adapter is one entry in
:func:`_systems` (and a server from ``tests/servers`` in :func:`_servers`). S3 has no peer
session store.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg

from .adk_bridge import ADKBridge
from .adk_peer import ADKPeer
from .langgraph_peer import LangGraphPeer
from .measure import measure, measure_listing, summarize
from .openai_bridge import OpenAIBridge
from .openai_peer import RedisSessionPeer, SQLAlchemyPeer
from .pydantic_ai_bridge import PydanticAIBridge
from .report import markdown, plot
from .systems import AgentStores, System, postgres_bytes, redis_bytes

DATABASES = ("agentstores", "langgraph", "openai", "adk")


def _with_db(url: str, db: str) -> str:
    return url.rsplit("/", 1)[0] + f"/{db}"


@contextlib.contextmanager
def _servers() -> Iterator[tuple[str, str]]:
    """An embedded PostgreSQL 18 and a Valkey 9 (AOF on, fsync every second)."""
    from tests.servers.postgres import EmbeddedPostgres
    from tests.servers.valkey import ValkeyServer

    with EmbeddedPostgres() as pg, ValkeyServer(appendonly=True, appendfsync="everysec") as vk:
        yield pg.url, vk.url


async def _systems(pg_admin: str, redis_url: str, stack: contextlib.AsyncExitStack) -> list[System]:
    """One database each, so each one's storage is measured alone."""
    from tests.servers.postgres import Installation

    conn = await asyncpg.connect(pg_admin)
    try:
        for db in DATABASES:
            await conn.execute(f'CREATE DATABASE "{db}"')
    finally:
        await conn.close()
    inst = await stack.enter_async_context(Installation(_with_db(pg_admin, "agentstores")))
    ours_pg = _with_db(pg_admin, "agentstores")

    import redis.asyncio as aioredis

    ours_redis = aioredis.from_url(_with_db(redis_url, "1"))
    stack.push_async_callback(ours_redis.aclose)
    ours = {
        "postgres": ("agentstores-postgres", inst.url, lambda: postgres_bytes(ours_pg)),
        "redis": ("agentstores-redis", _with_db(redis_url, "1"), lambda: redis_bytes(ours_redis)),
    }

    def bridges(server: str) -> list[System]:
        """Each framework bridge on agentstores' own store on ``server`` (the same database:
        storage growth is measured per system, around its own timed appends)."""
        name, url, measure = ours[server]
        label = "PostgreSQL" if server == "postgres" else "Redis"
        pydantic = PydanticAIBridge(f"agentstores-pydantic-ai ({label})", server, url, measure)
        pydantic.over = name
        openai = OpenAIBridge(f"agentstores-openai-agents ({label})", server, url, measure, name)
        return [openai, ADKBridge(server, url, measure, over=name), pydantic]

    return [
        AgentStores("agentstores-postgres", "postgres", *ours["postgres"][1:]),
        *bridges("postgres"),
        LangGraphPeer(_with_db(pg_admin, "langgraph")),
        SQLAlchemyPeer(_with_db(pg_admin, "openai"), _with_db(pg_admin, "openai")),
        ADKPeer(_with_db(pg_admin, "adk")),
        AgentStores("agentstores-redis", "redis", *ours["redis"][1:]),
        *bridges("redis"),
        RedisSessionPeer(_with_db(redis_url, "2")),
    ]


async def _run(args: argparse.Namespace, pg_admin: str, redis_url: str) -> dict[str, Any]:
    def note(msg: str) -> None:
        print(f"bench-peers: {msg}", file=sys.stderr, flush=True)

    async with contextlib.AsyncExitStack() as stack:
        systems = await _systems(pg_admin, redis_url, stack)
        if args.server:
            systems = [s for s in systems if s.server == args.server]
        if args.only:
            wanted = [w.strip() for w in args.only.split(",") if w.strip()]
            systems = [
                s for s in systems if isinstance(s, AgentStores) or any(w in s.name for w in wanted)
            ]
        for s in systems:
            await s.open()
            stack.push_async_callback(s.close)
        timing = (args.rounds, args.samples, args.budget)
        results = await measure(systems, args.lengths, *timing, note)
        await measure_listing(systems, args.lengths, *timing, results, note)
    servers: dict[str, list[str]] = {}
    for s in systems:
        label = "PostgreSQL 18" if s.server == "postgres" else "Valkey 9"
        servers.setdefault(label, []).append(s.name)
    bridges = {s.name: s.over for s in systems if s.over is not None}
    # The first of each server is agentstores' own; the peers are the rest but the bridges.
    pairs = {group[0]: [n for n in group[1:] if n not in bridges] for group in servers.values()}
    names = {s.name for s in systems}
    natives = {s.native: s.name for s in systems if s.native is not None and s.native in names}
    summary = summarize(results, pairs, bridges, natives)
    meta = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": f"{os.cpu_count()} cpus, Python {platform.python_version()}",
        "rounds": args.rounds,
        "samples": args.samples,
        "servers": servers,
        "versions": "; ".join(f"{s.name}: {s.version}" for s in systems if s.version),
    }
    return {"meta": meta, **summary}


def _lengths(value: str) -> list[int]:
    return [int(v.replace("_", "")) for v in value.split(",") if v.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.peers", description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("docs/bench"), help="output directory")
    parser.add_argument("--lengths", type=_lengths, default=[10, 1_000, 10_000])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--samples", type=int, default=10, help="calls per op per round")
    parser.add_argument(
        "--budget", type=float, default=0.5, help="seconds per op per round (then stop early)"
    )
    parser.add_argument(
        "--server",
        choices=("postgres", "redis"),
        help="measure only the systems on this server (default: both)",
    )
    parser.add_argument(
        "--only",
        help="measure only the systems whose name holds one of these comma-separated words "
        "(agentstores' own stores always; e.g. --only pydantic-ai,adk)",
    )
    args = parser.parse_args(argv)
    with _servers() as (pg_admin, redis_url):
        result = asyncio.run(_run(args, pg_admin, redis_url))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "peers.json").write_text(json.dumps(result, indent=2) + "\n")
    table = markdown(result, result["meta"])
    (args.out / "peers.md").write_text(table)
    plot(result, result["meta"], args.out / "peers.png")
    print(table)
    print(f"bench-peers: wrote {args.out}/peers.md, peers.json, peers.png", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
