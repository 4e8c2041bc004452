"""CheckpointTranscript against symfonic-core 9.12 itself, over generated conversations.

symfonic-core's ``SymfonicAgent.get_transcript`` and its working layer's
``rehydrate_from_messages`` run unchanged over the same saver (the agent method is
called on a host object holding only the saver, since building a full agent needs a
model provider); every query shape is compared row for row.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import SimpleNamespace
from typing import Any

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from symfonic.agent.engine import SymfonicAgent
from symfonic.core.scope import TenantScope
from symfonic.memory.layers.working import WorkingLayer

from agentstores import UsageError
from agentstores_langgraph import AgentStoresSaver, CheckpointTranscript
from tests.servers.backends import BACKENDS, Servers, fresh_tenant

from .conversations import run_conversation
from .pgsaver import postgres_saver

pytestmark = pytest.mark.timeout(240)

SEEDS = range(6)
TURNS = 4
SCOPE = TenantScope(tenant_id="acme")
SESSION = "sess"
THREAD = "acme:_:sess"  # symfonic-core's thread id for (SCOPE, SESSION)
SAVERS = ("InMemorySaver", "PostgresSaver", *(f"AgentStoresSaver[{b}]" for b in BACKENDS))


def symfonic_host(saver: BaseCheckpointSaver) -> Any:
    """What ``SymfonicAgent.get_transcript`` reads from ``self``: the saver, and its own
    thread-id and timestamp helpers."""

    async def ready() -> None:
        return None

    host = SimpleNamespace(
        _checkpointer=saver,
        _ensure_checkpointer_ready=ready,
        _thread_id_for=SymfonicAgent._thread_id_for,
    )
    host._checkpoint_ts_by_message_id = SymfonicAgent._checkpoint_ts_by_message_id.__get__(host)
    return host


def rows(found: list[Any]) -> list[tuple[Any, ...]]:
    return [(r.index, r.role, r.content, r.message_id, r.timestamp) for r in found]


@asynccontextmanager
async def open_saver(name: str, bridge_servers: Servers) -> AsyncIterator[BaseCheckpointSaver]:
    pg_admin = bridge_servers.pg_admin
    if name == "InMemorySaver":
        yield InMemorySaver()
    elif name == "PostgresSaver":
        async with postgres_saver(pg_admin) as saver:
            yield saver
    else:
        backend = name.removeprefix("AgentStoresSaver[").removesuffix("]")
        async with bridge_servers.open(backend) as stores:
            yield AgentStoresSaver(stores, tenant=fresh_tenant(), principal="alice")


@pytest.fixture(params=SAVERS)
def saver_name(request: pytest.FixtureRequest, bridge_servers: Servers) -> str:
    name = str(request.param)
    bridge_servers.pg_admin  # noqa: B018 - started here, outside the event loop
    if name.startswith("AgentStoresSaver["):
        bridge_servers.url(name.removeprefix("AgentStoresSaver[").removesuffix("]"))
    return name


async def compare(saver: BaseCheckpointSaver, seed: int, *, full: bool, turns: int = TURNS) -> int:
    """Run conversation ``seed`` onto ``saver`` and compare every query shape (``full``)
    or one of each kind; returns how many queries were compared."""
    await run_conversation(saver, THREAD, seed, turns)
    ours = CheckpointTranscript(saver)
    host = symfonic_host(saver)

    async def check(**query: Any) -> list[tuple[Any, ...]]:
        theirs = rows(await SymfonicAgent.get_transcript(host, SCOPE, SESSION, **query))
        got = rows(await ours.get_transcript(THREAD, **query))
        assert got == theirs, (seed, query)
        return got

    compared = 1
    everything = await check()
    assert {r[1] for r in everything} == {"user", "assistant", "tool", "system"}
    stamps = sorted({r[4] for r in everything if r[4] is not None})
    assert len(stamps) >= turns  # checkpoint-granular: several distinct ts
    ranges = [(stamps[1], stamps[2])]
    if full:
        ranges += [(stamps[0], stamps[-1]), (stamps[-1], stamps[-1])]
    for speaker in ("all", "user", "assistant") if full else ("user",):
        for index in (0, 1, 3, -1, -2, 99, -99) if full else (0, -1):
            await check(index=index, speaker=speaker)
            compared += 1
        for time_range, limit in itertools.product(ranges, (None, 0, 2) if full else (None,)):
            await check(time_range=time_range, speaker=speaker, limit=limit)
            compared += 1
        for limit in (None, 1, 4) if full else (2,):
            await check(speaker=speaker, limit=limit)
            compared += 1
    messages = await ours.messages(THREAD)
    for n in (1, 3, 50) if full else (3,):
        layer = WorkingLayer(max_entries=100)
        await layer.rehydrate_from_messages(SCOPE, messages, max_turns=n)
        want = [
            (e.metadata["speaker"], e.content, e.metadata["turn_id"])
            for e in await layer.get_context(SCOPE)
        ]
        got = [(t.speaker, t.content, t.message_id) for t in await ours.rehydrate(THREAD, n)]
        assert got == want, (seed, n)
        compared += 1
    assert await ours.get_transcript("no-such-thread") == []
    return compared


async def test_every_query_matches_symfonic_over_generated_conversations() -> None:
    """Every query shape, over several generated conversations (InMemorySaver)."""
    compared = 0
    for seed in SEEDS:
        compared += await compare(InMemorySaver(), seed, full=True)
    assert compared == len(SEEDS) * (1 + 3 * (7 + 9 + 3) + 3)


async def test_each_saver_gives_symfonic_rows(saver_name: str, bridge_servers: Servers) -> None:
    """One conversation per saver (ours on every backend, and LangGraph's own), one query
    of each kind: the same checkpoints read back give the same rows."""
    async with open_saver(saver_name, bridge_servers) as saver:
        assert await compare(saver, 7, full=False, turns=3) == 6


async def test_index_with_time_range_is_a_usage_error() -> None:
    ours = CheckpointTranscript(InMemorySaver())
    with pytest.raises(UsageError):
        await ours.get_transcript(THREAD, index=0, time_range=(None, None))  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        await ours.get_transcript(THREAD, speaker="robot")  # type: ignore[arg-type]
