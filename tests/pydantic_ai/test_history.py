"""AgentStoresHistory on every backend: exact round trips of real runs and of generated
histories holding every part kind, a retried store stored once, atomicity (also when
cancelled mid-append), fencing under the turn lease, owner-only access, erasure."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelResponse, TextPart

from agentstores import (
    ConversationKey,
    ErasedError,
    FencedError,
    LeaseLostError,
    NotOwnedError,
    StaleWriteError,
    Stores,
    UsageError,
    open_stores,
)
from agentstores_pydantic_ai import AgentStoresHistory, StoredHistory
from tests.servers.backends import Servers, fresh_tenant

from .agents import multimodal_prompt, rich_agent, tool_agent
from .strategies import histories

pytestmark = pytest.mark.timeout(120)


def exact(messages: list[ModelMessage]) -> bytes:
    return ModelMessagesTypeAdapter.dump_json(messages)


def adapted(messages: list[ModelMessage]) -> list[ModelMessage]:
    """``messages`` through the adapter's own round trip: what a load must equal (the
    adapter itself narrows some classes, such as image ``BinaryContent`` to
    ``BinaryImage``, and translates the deprecated ``RetryPromptPart``)."""
    return ModelMessagesTypeAdapter.validate_json(exact(messages))


async def count(stores: Stores, tenant: str, session: str) -> int:
    info = await stores.conversations.get_conversation(ConversationKey(tenant, session), "alice")
    return 0 if info is None else info.message_count


async def test_runs_round_trip_exactly_and_a_retried_store_is_a_no_op(
    backend: str, bridge_servers: Servers
) -> None:
    """Two runs of a real agent (a multimodal prompt; thinking, text, native tool call and
    return, file, tool call, a retried tool, tool return) load back as the very messages
    the run holds, byte for byte through the adapter; every row is the adapter's JSON."""
    async with bridge_servers.open(backend) as stores:
        tenant = fresh_tenant()
        history = AgentStoresHistory(stores, tenant=tenant, principal="alice")
        agent = rich_agent()
        first = await history.run(agent, "s", multimodal_prompt("cats?"))
        second = await history.run(agent, "s", "and dogs?")
        loaded = await history.load("s")
        assert loaded == adapted(second.all_messages())
        assert exact(loaded) == exact(second.all_messages())
        assert exact(second.all_messages()[: len(first.all_messages())]) == exact(
            first.all_messages()
        )
        rows = await history.conversation("s").messages()
        assert [r.content for r in rows] == json.loads(exact(second.all_messages()))
        run_roles = ["assistant", "tool", "assistant", "tool", "assistant"]
        assert [r.role for r in rows] == ["user", *run_roles, "user", *run_roles]
        kinds = {p.part_kind for m in loaded for p in m.parts}
        assert kinds >= {"system-prompt", "user-prompt", "tool-return", "thinking", "text"}
        assert kinds >= {"builtin-tool-call", "builtin-tool-return", "file", "tool-call"}
        # A retried store of the second run's messages (its outcome unknown): nothing new.
        before = await history.load("s", limit=len(second.new_messages()))
        assert before == adapted(second.new_messages())
        start = StoredHistory(loaded[: len(first.all_messages())], session_id="s", tail=rows[5].id)
        again = await history.append("s", second.new_messages(), after=start)
        assert again.tail == loaded.tail
        assert await count(stores, tenant, "s") == len(loaded)


async def test_an_append_extends_the_history_it_continues_in_place(
    backend: str, bridge_servers: Servers
) -> None:
    """``append`` returns ``after`` itself, extended (no copy of a long history per run);
    the same message objects appended again are a retry and store nothing; equal but new
    messages are a new append; a refused append leaves ``after`` as it was."""
    async with bridge_servers.open(backend) as stores:
        tenant = fresh_tenant()
        history = AgentStoresHistory(stores, tenant=tenant, principal="alice")
        held = await history.load("s")
        said = [ModelResponse([TextPart("one")], model_name="m")]
        returned = await history.append("s", said, after=held)
        assert returned is held and list(held) == said
        tail = held.tail
        assert tail is not None and tail == (await history.load("s")).tail
        again = await history.append("s", said, after=held)  # retried after it landed
        assert again is held and list(held) == said and held.tail == tail
        assert await count(stores, tenant, "s") == 1
        equal = [ModelResponse([TextPart("one")], model_name="m")]  # a new message, equal
        await history.append("s", equal, after=held)
        assert await count(stores, tenant, "s") == 2 and len(held) == 2
        other = await history.load("s")
        await history.append("s", [ModelResponse([TextPart("two")], model_name="m")], after=other)
        snapshot, snapshot_tail = list(held), held.tail
        with pytest.raises(StaleWriteError):
            await history.append("s", [ModelResponse([TextPart("late")])], after=held)
        assert list(held) == snapshot and held.tail == snapshot_tail
        assert await count(stores, tenant, "s") == 3


async def test_a_windowed_load_is_one_tail_read(backend: str, bridge_servers: Servers) -> None:
    """load(limit=n) is one ``tail`` read of the store (no read by position, no separate
    metadata read), whatever the messages are; the history is the last n messages ending
    at the tail, also when a writer races the read."""
    from pydantic_ai.messages import ModelRequest, ToolReturnPart, UserPromptPart

    async with bridge_servers.open(backend) as stores:
        history = AgentStoresHistory(stores, tenant=fresh_tenant(), principal="alice")
        messages: list[ModelMessage] = [
            ModelRequest([UserPromptPart("a")]),
            ModelResponse([TextPart("b")]),
            ModelRequest([ToolReturnPart("f", {"ok": True}, tool_call_id="c1")]),
            ModelResponse([TextPart("c")]),
            ModelRequest([UserPromptPart("d")]),
        ]
        held = await history.append("s", messages, after=await history.load("s"))
        conv = stores.conversations
        calls: dict[str, int] = {"tail": 0, "read_messages": 0, "get_conversation": 0}
        race = {"armed": False}
        real = {name: getattr(conv, name) for name in calls}

        def counted(name: str) -> Any:
            async def call(*args: object, **kwargs: object) -> object:
                nonlocal held
                calls[name] += 1
                if name == "tail" and race["armed"]:
                    race["armed"] = False
                    racing = ModelResponse([TextPart(f"race {len(messages)}")])
                    held = await history.append("s", [racing], after=held)
                    messages.append(racing)
                return await real[name](*args, **kwargs)

            return call

        for name in calls:
            setattr(conv, name, counted(name))
        try:
            for n in (1, 2, 3, 5, 50):
                calls.update(tail=0, read_messages=0, get_conversation=0)
                loaded = await history.load("s", limit=n)
                assert exact(loaded) == exact(messages[-n:])
                assert loaded.tail == held.tail
                assert calls == {"tail": 1, "read_messages": 0, "get_conversation": 0}
            for n in (1, 2):
                race["armed"] = True
                loaded = await history.load("s", limit=n)
                assert not race["armed"]
                assert exact(loaded) == exact(messages[-n:])
                assert loaded.tail == held.tail
        finally:
            for name in calls:
                delattr(conv, name)


@pytest.mark.parametrize("use_turn", [False, True])
async def test_a_run_from_a_stale_history_is_refused(
    use_turn: bool, backend: str, bridge_servers: Servers
) -> None:
    """Two runs started from the same history: the second to store is refused with
    StaleWriteError and lands nothing; the first's messages are stored once."""
    async with bridge_servers.open(backend) as stores:
        tenant = fresh_tenant()
        history = AgentStoresHistory(stores, tenant=tenant, principal="alice")
        agent = tool_agent()
        await history.run(agent, "s", "hello")
        a, b = await asyncio.gather(history.load("s"), history.load("s"))
        run_a, run_b = await asyncio.gather(
            agent.run("from a", message_history=a), agent.run("from b", message_history=b)
        )
        await history.append("s", run_a.new_messages(), after=a)
        with pytest.raises(StaleWriteError):
            await history.append("s", run_b.new_messages(), after=b)
        loaded = await history.load("s")
        assert loaded == run_a.all_messages()
        await history.append("s", run_a.new_messages(), after=a)  # a retry: a no-op
        assert await history.load("s") == run_a.all_messages()
        # Reloaded, b's request runs on what a stored.
        if use_turn:
            async with history.conversation("s").turn("answer-b", expected_tail=loaded.tail):
                run = await history.run(agent, "s", "from b")
        else:
            run = await history.run(agent, "s", "from b")
        assert await history.load("s") == run.all_messages()
        assert run.all_messages()[: len(loaded)] == loaded


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(messages=histories, split=histories)
def test_every_part_kind_round_trips(
    messages: list[ModelMessage], split: list[ModelMessage], backend: str, bridge_servers: Servers
) -> None:
    """Generated histories holding every request and response part kind load back as the
    adapter validates their JSON, byte for byte; stored in two runs, or in one."""

    async def check() -> None:
        async with bridge_servers.open(backend) as stores:
            history = AgentStoresHistory(stores, tenant=fresh_tenant(), principal="alice")
            start = await history.load("s")
            middle = await history.append("s", messages, after=start)
            await history.append("s", split, after=middle)
            whole = [*messages, *split]
            expected = ModelMessagesTypeAdapter.validate_json(exact(whole))
            loaded = await history.load("s")
            assert loaded == expected
            assert exact(loaded) == exact(expected)
            rows = await history.conversation("s").messages()
            assert [r.content for r in rows] == json.loads(exact(whole))
            assert await history.load("s", limit=len(split)) == expected[len(messages) :]

    asyncio.run(check())


async def test_an_append_is_all_or_nothing_even_when_cancelled(
    backend: str, bridge_servers: Servers
) -> None:
    """A run's messages cancelled mid-append are all stored or none; the retried append
    stores what is missing, once."""
    async with bridge_servers.open(backend) as stores:
        tenant = fresh_tenant()
        history = AgentStoresHistory(stores, tenant=tenant, principal="alice")
        agent = rich_agent()
        runs = [await agent.run(multimodal_prompt(f"q{i}")) for i in range(2)]
        outcomes = set()
        for i, steps in enumerate([0, 1, 2, 3, 5, 8, 13, 40]):
            session = f"s{i}"
            start = await history.load(session)
            messages = [*runs[0].all_messages(), *runs[1].all_messages()]
            task = asyncio.create_task(history.append(session, messages, after=start))
            for _ in range(steps):
                await asyncio.sleep(0)
            task.cancel()
            try:
                await task
                outcomes.add("stored")
            except asyncio.CancelledError:
                outcomes.add("cancelled")
            stored = await count(stores, tenant, session)
            assert stored in (0, len(messages)), (steps, stored)
            await history.append(session, messages, after=start)
            assert await history.load(session) == adapted(messages)
        assert "cancelled" in outcomes
        # A run whose last message the store refuses (over 8 MiB) lands none of them.
        start = await history.load("big")
        huge = ModelResponse([TextPart("x" * (9 * 1024 * 1024))])
        with pytest.raises(UsageError):
            await history.append("big", [*runs[0].all_messages(), huge], after=start)
        assert await count(stores, tenant, "big") == 0


async def test_a_taken_over_run_cannot_store(backend: str, bridge_servers: Servers) -> None:
    """A run inside conv.turn() stores under the lease's epoch; once another worker takes
    the turn over, the first run's store is fenced and lands nothing."""
    async with bridge_servers.open(backend) as stores:
        tenant = fresh_tenant()
        history = AgentStoresHistory(stores, tenant=tenant, principal="alice")
        agent = tool_agent()
        await history.run(agent, "s", "hello")
        conv = history.conversation("s")
        started = await history.load("s")
        with pytest.raises((FencedError, LeaseLostError)):
            async with conv.turn("answer-1"):
                old = await agent.run("slow", message_history=started)
                async with conv.turn("answer-1") as takeover:  # another worker resumes it
                    assert takeover.reason == "resume"
                    new = await history.run(agent, "s", "slow")
                await history.append("s", old.new_messages(), after=started)
        assert await history.load("s") == new.all_messages()
        with pytest.raises(FencedError):  # and an explicit stale epoch, without a lease
            await history.append("s", old.new_messages(), after=started, epoch=1)


async def test_only_the_owner_writes_and_others_see_nothing(
    backend: str, bridge_servers: Servers
) -> None:
    async with bridge_servers.open(backend) as stores:
        tenant = fresh_tenant()
        alice = AgentStoresHistory(stores, tenant=tenant, principal="alice")
        agent = tool_agent()
        result = await alice.run(agent, "s", "hello")
        for name in ("mallory", "bob"):
            other = AgentStoresHistory(stores, tenant=tenant, principal=name)
            seen = await other.load("s")
            absent = await other.load("never-made")
            assert (list(seen), seen.tail) == (list(absent), absent.tail) == ([], None)
            assert await other.conversation("s").info() is None
            with pytest.raises(NotOwnedError):
                await other.run(agent, "s", "let me in")
        await alice.conversation("s").share("bob")
        bob = AgentStoresHistory(stores, tenant=tenant, principal="bob")
        shared = await bob.load("s")
        assert shared == result.all_messages()
        run = await agent.run("me too", message_history=shared)
        with pytest.raises(NotOwnedError):
            await bob.append("s", run.new_messages(), after=shared)
        assert await alice.load("s") == result.all_messages()
        assert await alice.delete("s")
        assert list(await alice.load("s")) == []
        with pytest.raises(ErasedError):
            await alice.append("s", run.new_messages(), after=shared)


async def test_a_second_replica_continues_the_history(
    backend: str, bridge_servers: Servers
) -> None:
    """A history stored by one process's stores is continued through another's (its own
    connections, agent and history object), and each sees the other's runs."""
    url = bridge_servers.url(backend)
    tenant = fresh_tenant()
    async with open_stores(url) as one, open_stores(url) as two:
        first = AgentStoresHistory(one, tenant=tenant, principal="alice")
        second = AgentStoresHistory(two, tenant=tenant, principal="alice")
        r1 = await first.run(rich_agent(), "s", "first")
        r2 = await second.run(rich_agent(), "s", "second")
        assert exact(r2.all_messages()[: len(r1.all_messages())]) == exact(r1.all_messages())
        r3 = await first.run(tool_agent(), "s", "third")
        assert await second.load("s") == adapted(r3.all_messages())
        assert exact(r3.all_messages()[: len(r2.all_messages())]) == exact(r2.all_messages())
        assert len(r3.all_messages()) > len(r2.all_messages()) > len(r1.all_messages())


async def test_a_run_over_one_appends_limit_is_stored_in_chained_appends(
    backend: str, bridge_servers: Servers, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run larger than one append (here: 2 rows an append) is stored in appends each
    on the previous one's tail; a process that dies between them leaves a prefix of
    whole appends, and the retried store completes it, each row once."""
    import agentstores_pydantic_ai.history as module

    monkeypatch.setattr(module, "MAX_BATCH", 2)
    async with bridge_servers.open(backend) as stores:
        tenant = fresh_tenant()
        history = AgentStoresHistory(stores, tenant=tenant, principal="alice")
        messages = (await rich_agent().run("five messages, and one more")).all_messages()
        assert len(messages) == 6
        append = stores.conversations.append_messages
        for landed in range(4):
            session = f"s{landed}"
            start = await history.load(session)
            calls = 0

            async def dies_after(*args: Any, landed: int = landed, **kwargs: Any) -> Any:
                nonlocal calls
                calls += 1
                if calls > landed:
                    raise ConnectionError("the process died here")
                return await append(*args, **kwargs)

            monkeypatch.setattr(stores.conversations, "append_messages", dies_after)
            if landed < 3:
                with pytest.raises(ConnectionError):
                    await history.append(session, messages, after=start)
            else:
                await history.append(session, messages, after=start)
            monkeypatch.setattr(stores.conversations, "append_messages", append)
            assert await count(stores, tenant, session) == 2 * landed
            done = await history.append(session, messages, after=start)
            loaded = await history.load(session)
            assert loaded == adapted(messages)
            assert done.tail == loaded.tail
