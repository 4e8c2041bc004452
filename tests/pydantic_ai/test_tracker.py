"""pydantic/pydantic-ai#530, "Ability to persist messages in external stores": a
history kept outside the process, picked up later by another replica, with two runs
racing on one conversation.

What people store today (the issue's thread): ``result.all_messages()`` dumped to JSON
and written back whole, or ``result.new_messages()`` appended to a table without any
condition. Against a real store (a JSON file, a SQLite table) the first loses a run's
messages and the second interleaves two runs that never saw each other and stores a
retried save twice. Pydantic AI's own store class, ``InMemoryConversationStore``, holds
a history in one process only: another replica never sees it. The bridge keeps the
history on every backend, refuses the run that started from a stale history with a typed
error, and stores a retried save once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import InMemoryConversationStore
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter
from pydantic_ai.run import AgentRunResult

from agentstores import StaleWriteError, open_stores
from agentstores_pydantic_ai import AgentStoresHistory
from tests.servers.backends import BACKENDS, Servers, fresh_tenant

from .agents import tool_agent

pytestmark = pytest.mark.timeout(120)


def exact(messages: list[ModelMessage]) -> bytes:
    return ModelMessagesTypeAdapter.dump_json(messages)


class JsonFileHistory:
    """The whole history as one JSON file: load it, run, write ``all_messages()`` back."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> list[ModelMessage]:
        if not self.path.exists():
            return []
        return ModelMessagesTypeAdapter.validate_json(self.path.read_bytes())

    def save(self, result: AgentRunResult[str]) -> None:
        self.path.write_bytes(result.all_messages_json())


class TableHistory:
    """One row per message in a table, as the issue's thread stores it: ``load`` reads
    the conversation's rows in order, ``append`` inserts ``new_messages()``."""

    async def rows(self) -> list[str]:
        raise NotImplementedError

    async def insert(self, data: str) -> None:
        raise NotImplementedError

    async def load(self) -> list[ModelMessage]:
        return ModelMessagesTypeAdapter.validate_json("[" + ",".join(await self.rows()) + "]")

    async def append(self, messages: list[ModelMessage]) -> None:
        for data in json.loads(ModelMessagesTypeAdapter.dump_json(messages)):
            await self.insert(json.dumps(data))


class SqliteTable(TableHistory):
    """The table in a SQLite file."""

    def __init__(self, path: Path) -> None:
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute(
            "CREATE TABLE conversation_messages (id INTEGER PRIMARY KEY, "
            "conversation_id TEXT NOT NULL, message_data TEXT NOT NULL)"
        )

    async def rows(self) -> list[str]:
        found = self.db.execute(
            "SELECT message_data FROM conversation_messages WHERE conversation_id = 'c' ORDER BY id"
        ).fetchall()
        return [r[0] for r in found]

    async def insert(self, data: str) -> None:
        self.db.execute(
            "INSERT INTO conversation_messages (conversation_id, message_data) VALUES ('c', ?)",
            (data,),
        )


class PostgresTable(TableHistory):
    """The table on the PostgreSQL server (``jsonb`` rows ordered by ``created_at``)."""

    def __init__(self, db: Any, table: str) -> None:
        self.db, self.table = db, table

    @classmethod
    @contextlib.asynccontextmanager
    async def made(cls, admin_url: str) -> AsyncIterator[PostgresTable]:
        import asyncpg

        table = f"conversation_messages_{uuid.uuid4().hex[:10]}"
        db = await asyncpg.connect(admin_url)
        await db.execute(
            f"CREATE TABLE {table} (id bigserial PRIMARY KEY, conversation_id text NOT NULL, "
            "message_data jsonb NOT NULL, created_at timestamptz NOT NULL DEFAULT now())"
        )
        try:
            yield cls(db, table)
        finally:
            await db.execute(f"DROP TABLE {table}")
            await db.close()

    async def rows(self) -> list[str]:
        found = await self.db.fetch(
            f"SELECT message_data::text FROM {self.table} WHERE conversation_id = 'c' "
            "ORDER BY created_at, id"
        )
        return [r[0] for r in found]

    async def insert(self, data: str) -> None:
        await self.db.execute(
            f"INSERT INTO {self.table} (conversation_id, message_data) VALUES ('c', $1::jsonb)",
            data,
        )


@contextlib.asynccontextmanager
async def table(engine: str, tmp_path: Path, pg_admin: str) -> AsyncIterator[TableHistory]:
    if engine == "sqlite":
        yield SqliteTable(tmp_path / "chat.sqlite")
    else:
        async with PostgresTable.made(pg_admin) as made:
            yield made


async def race(
    agent: Agent[None, str], a: list[ModelMessage], b: list[ModelMessage]
) -> tuple[AgentRunResult[str], AgentRunResult[str]]:
    """Two requests of one conversation served at once, each from the history it loaded."""
    return await asyncio.gather(
        agent.run("from a", message_history=a), agent.run("from b", message_history=b)
    )


async def test_a_json_file_written_back_whole_loses_a_run(tmp_path: Path) -> None:
    agent = tool_agent()
    store = JsonFileHistory(tmp_path / "chat.json")
    store.save(await agent.run("hello"))
    run_a, run_b = await race(agent, store.load(), store.load())
    store.save(run_a)
    store.save(run_b)
    kept = store.load()
    assert exact(kept) == exact(run_b.all_messages())
    assert not any(exact([m]) == exact([n]) for m in kept for n in run_a.new_messages())


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
async def test_a_table_appended_without_a_condition_interleaves_and_duplicates(
    engine: str, tmp_path: Path, pg_admin: str
) -> None:
    agent = tool_agent()
    async with table(engine, tmp_path, pg_admin) as store:
        await store.append((await agent.run("hello")).all_messages())
        base = await store.load()
        run_a, run_b = await race(agent, await store.load(), await store.load())
        await store.append(run_a.new_messages())
        await store.append(run_b.new_messages())
        kept = await store.load()
        # Both runs are kept, one after the other, though b never saw a's answer: the
        # history holds a conversation that never happened.
        assert exact(kept) == exact([*base, *run_a.new_messages(), *run_b.new_messages()])
        assert exact(kept) not in (exact(run_a.all_messages()), exact(run_b.all_messages()))
        # A save retried after a timeout (the first one did land) stores the run twice.
        await store.append(run_b.new_messages())
        assert len(await store.load()) == len(kept) + len(run_b.new_messages())


async def test_pydantic_ais_own_store_keeps_a_history_in_one_process_only() -> None:
    """``InMemoryConversationStore`` refuses a stale save within its process (revisions),
    but a second replica, with its own store, never sees the conversation."""
    agent = tool_agent()
    replica_one, replica_two = InMemoryConversationStore(), InMemoryConversationStore()
    result = await agent.run("hello", conversation=Conversation(conversation_id="c"))
    await replica_one.save(result)
    assert await replica_one.load("c") is not None
    assert await replica_two.load("c") is None


CHILD = """
import asyncio, sys, warnings
from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel
from agentstores import open_stores
from agentstores_pydantic_ai import AgentStoresHistory

async def main(url, tenant):
    agent = Agent(TestModel(custom_output_text="from the other process"))
    async with open_stores(url) as stores:
        history = AgentStoresHistory(stores, tenant=tenant, principal="alice")
        result = await history.run(agent, "c", "continue, please")
    sys.stdout.buffer.write(result.all_messages_json())

warnings.simplefilter("ignore")
asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


@pytest.mark.parametrize("backend", [b for b in BACKENDS if b != "memory"])
def test_a_history_one_process_stored_is_continued_by_another(
    backend: str, bridge_servers: Servers, tmp_path: Path
) -> None:
    """Another process (its own interpreter, stores and agent) loads the history this one
    stored, continues it, and this one sees the continuation: the issue's "pick things up
    later" across replicas and restarts. (memory:// lives in one process by design.)"""
    url = bridge_servers.url(backend)
    tenant = fresh_tenant()

    async def first() -> list[ModelMessage]:
        async with open_stores(url) as stores:
            history = AgentStoresHistory(stores, tenant=tenant, principal="alice")
            return (await history.run(tool_agent(), "c", "hello")).all_messages()

    before = asyncio.run(first())
    child = subprocess.run(
        [sys.executable, "-c", CHILD, url, tenant], capture_output=True, timeout=120
    )
    assert child.returncode == 0, child.stderr.decode()
    continued = ModelMessagesTypeAdapter.validate_json(child.stdout)
    assert exact(continued[: len(before)]) == exact(before)
    assert len(continued) > len(before)

    async def reread() -> list[ModelMessage]:
        async with open_stores(url) as stores:
            history = AgentStoresHistory(stores, tenant=tenant, principal="alice")
            return list(await history.load("c"))

    assert exact(asyncio.run(reread())) == exact(continued)


async def test_the_bridge_refuses_the_stale_run_and_stores_a_retry_once(
    backend: str, bridge_servers: Servers
) -> None:
    url = bridge_servers.url(backend)
    tenant = fresh_tenant()
    agent = tool_agent()
    async with open_stores(url) as one, open_stores(url) as two:
        replica_a = AgentStoresHistory(one, tenant=tenant, principal="alice")
        replica_b = AgentStoresHistory(two, tenant=tenant, principal="alice")
        await replica_a.run(agent, "c", "hello")
        a, b = await asyncio.gather(replica_a.load("c"), replica_b.load("c"))
        run_a, run_b = await race(agent, a, b)
        results = await asyncio.gather(
            replica_a.append("c", run_a.new_messages(), after=a),
            replica_b.append("c", run_b.new_messages(), after=b),
            return_exceptions=True,
        )
        refused = [r for r in results if isinstance(r, BaseException)]
        assert len(refused) == 1 and isinstance(refused[0], StaleWriteError), results
        winner = run_a if not isinstance(results[0], BaseException) else run_b
        stored = await replica_b.load("c")
        assert exact(stored) == exact(winner.all_messages())
        # The winner's save retried after a timeout: stored once.
        started = a if winner is run_a else b
        await replica_a.append("c", winner.new_messages(), after=started)
        assert exact(await replica_a.load("c")) == exact(winner.all_messages())
        # The refused request, served again from the history as it now is, continues it.
        again = await replica_b.run(agent, "c", "from the refused one")
        assert exact(again.all_messages()[: len(stored)]) == exact(stored)
        assert exact(await replica_a.load("c")) == exact(again.all_messages())
