"""openai/openai-agents-python#1658, "Session ``add_items`` gets cancelled before state is
saved": a streamed run's cleanup cancelled the run task while ``add_items`` was writing,
and the turn's items were lost.

The SDK at the locked version answers it in its own stores by shielding the write
(``_await_mutation``): a cancelled ``add_items`` runs to completion anyway. So the write
is no longer cut short, but it now lands whenever it settles, after the caller was told
it was cancelled. The scenario, on two replicas of a service holding one session:

1. replica A stores turn 1's input; its answer's ``add_items`` is in flight (A's
   connection pool is busy) when A's run is cancelled (#1658);
2. the user retries; replica B runs the turn again and stores its input and answer;
3. A's shielded write settles.

``SQLAlchemySession`` on a real PostgreSQL ends with A's stale answer *after* B's turn:
the turns interleave, and every later turn sends the model that history. The bridge
(the write carries the epoch of A's turn, which B's takeover raised) refuses A's write
on every backend: the history is A's input and B's turn, nothing after.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from agents.extensions.memory import SQLAlchemySession
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from agentstores import FencedError, LeaseLostError
from tests.servers.backends import Servers

from .test_turn import replicas

pytestmark = pytest.mark.timeout(120)

U1 = {"role": "user", "content": "what is my balance?"}
A1 = {"role": "assistant", "content": "turn 1's answer (cancelled)"}
U2 = {"role": "user", "content": "what is my balance? (retried)"}
B2 = {"role": "assistant", "content": "turn 2's answer"}


async def test_1658_sqlalchemy_session_lands_a_cancelled_write_after_the_next_turn(
    pg_admin: str,
) -> None:
    url = pg_admin.replace("postgresql://", "postgresql+asyncpg://", 1)
    engine_a = create_async_engine(url, pool_size=1, max_overflow=0)  # replica A
    engine_b = create_async_engine(url)  # replica B
    suffix = uuid.uuid4().hex[:8]
    tables = {"sessions_table": f"s_{suffix}", "messages_table": f"m_{suffix}"}
    a = SQLAlchemySession("chat", engine=engine_a, create_tables=True, **tables)
    b = SQLAlchemySession("chat", engine=engine_b, **tables)
    try:
        await a.add_items([U1])
        async with engine_a.connect() as busy:  # A's only connection is taken
            await busy.execute(text("SELECT 1"))
            write = asyncio.ensure_future(a.add_items([A1]))
            await asyncio.sleep(0.3)  # the write waits for a connection
            write.cancel()  # the run is cancelled mid add_items (#1658)
            await b.add_items([U2])  # the user retried: replica B runs the turn
            await b.add_items([B2])
            assert await b.get_items() == [U1, U2, B2]
        with pytest.raises(asyncio.CancelledError):
            await write  # the caller hears "cancelled" once the shielded write settled
        # The failure: the cancelled turn's answer lands after the newer turn.
        assert await b.get_items() == [U1, U2, B2, A1]
    finally:
        async with engine_b.begin() as conn:
            await conn.execute(text(f"DROP TABLE IF EXISTS m_{suffix}, s_{suffix}"))
        await engine_a.dispose()
        await engine_b.dispose()


async def test_1658_the_bridge_refuses_a_cancelled_write_after_a_takeover(
    backend: str, bridge_servers: Servers
) -> None:
    async with bridge_servers.open(backend) as stores:
        a, b = replicas(stores)
        in_flight, taken_over = asyncio.Event(), asyncio.Event()

        async def replica_a() -> None:
            async with a.turn("turn-1"):
                await a.add_items([U1])

                async def answer() -> None:
                    in_flight.set()
                    await taken_over.wait()  # the write reaches the store after B's turn
                    await a.add_items([A1])

                # The write is issued inside A's turn: it carries that turn's epoch.
                write = asyncio.ensure_future(answer())
                await in_flight.wait()
                await taken_over.wait()
                await asyncio.sleep(0)
                write.cancel()  # the run is cancelled mid add_items (#1658)
                with pytest.raises((asyncio.CancelledError, FencedError)):
                    await write

        task = asyncio.ensure_future(replica_a())
        await in_flight.wait()
        async with b.turn("turn-1"):  # the user retried: B takes the turn over
            await b.add_items([U2])
            await b.add_items([B2])
            taken_over.set()
            with pytest.raises((LeaseLostError, FencedError)):
                await task
        assert await b.get_items() == [U1, U2, B2]
