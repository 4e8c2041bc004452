"""The Session protocol on every backend: exact round trips of every item type (also from
real ``Runner`` turns, against the SDK's own ``SQLiteSession``), ``get_items`` limits,
``pop_item`` and ``clear_session`` exactly, ``pop_item`` racing ``add_items`` losing
nothing, ``add_items`` all or nothing (also when cancelled mid-call), owner-only,
identity from the application, and the SDK's own ``EncryptedSession`` wrapping the
bridge."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import copy
from typing import Any

import pytest
from agents import Runner, SQLiteSession
from agents.extensions.memory import EncryptedSession
from cryptography.fernet import Fernet

from agentstores import (
    ConversationKey,
    ErasedError,
    Message,
    NotOwnedError,
    UsageError,
)
from agentstores_openai_agents import AgentStoresSession, list_sessions, run_turn
from tests.servers.backends import Servers, fresh_tenant

from .support import ITEMS, script_turn, session, two_agents

pytestmark = pytest.mark.timeout(120)


async def test_every_item_type_round_trips(backend: str, bridge_servers: Servers) -> None:
    """Every kind of item reads back equal: all at once, by limit, and popped one by one."""
    async with bridge_servers.open(backend) as stores:
        batch, single = session(stores, "batch"), session(stores, "single")
        await batch.add_items(copy.deepcopy(ITEMS))
        for item in ITEMS:
            await single.add_items([copy.deepcopy(item)])
        for s in (batch, single):
            assert await s.get_items() == ITEMS
            for limit in (1, 2, 3, len(ITEMS) - 1, len(ITEMS), len(ITEMS) + 5):
                assert await s.get_items(limit) == ITEMS[-limit:]
            assert await s.get_items(0) == []
        popped = [await batch.pop_item() for _ in ITEMS]
        assert popped == ITEMS[::-1]
        assert await batch.pop_item() is None
        assert await batch.get_items() == []
        # the speaker views hold the messages of that speaker only
        user = await single.conversation().transcript(speaker="user")
        assert [row.content for row in user] == [i for i in ITEMS if i.get("role") == "user"]


async def test_runner_turns_store_what_sqlitesession_stores(
    backend: str, bridge_servers: Servers
) -> None:
    """Two real ``Runner`` turns (reasoning, a tool call and its output, a handoff, the
    answer) leave in the bridge exactly the items the SDK's own ``SQLiteSession`` holds
    after the same turns, and the second turn's model call sees the first turn."""
    async with bridge_servers.open(backend) as stores:
        bridge = session(stores)
        reference = SQLiteSession("reference")
        for store in (reference, bridge):
            agent, model = two_agents()
            for n in (1, 2):
                script_turn(model, n)
                if store is bridge:
                    result = await run_turn(bridge, agent, f"question {n}")
                else:
                    result = await Runner.run(agent, f"question {n}", session=store)
                assert result.final_output == f"answer {n}"
            first_turn = model.calls[3].input
            assert isinstance(first_turn, list)
            assert any(
                item.get("content") == "answer 1" or "answer 1" in str(item) for item in first_turn
            )
        expected = await reference.get_items()
        assert {i.get("type") for i in expected} >= {
            "reasoning",
            "function_call",
            "function_call_output",
            "message",
        }
        assert await bridge.get_items() == expected
        assert await bridge.get_items(3) == expected[-3:]
        reference.close()


async def test_pop_and_clear_are_exact(backend: str, bridge_servers: Servers) -> None:
    """``pop_item`` removes exactly the last item whatever precedes it (a user message,
    another item, nothing); ``clear_session`` removes every item and the session stays
    usable, also when its first item is not a user message."""
    async with bridge_servers.open(backend) as stores:
        s = session(stores)
        assert await s.pop_item() is None
        await s.clear_session()
        u, a, t = {"role": "user", "content": "q"}, {"role": "assistant", "content": "r"}, ITEMS[5]
        await s.add_items([a])
        assert await s.pop_item() == a and await s.get_items() == []
        await s.add_items([u, a])
        assert await s.pop_item() == a and await s.get_items() == [u]
        await s.add_items([t, u])
        assert await s.pop_item() == u and await s.get_items() == [u, t]
        assert await s.pop_item() == t and await s.get_items() == [u]
        await s.clear_session()
        assert await s.get_items() == [] and await s.pop_item() is None
        await s.add_items([a, u, a])
        await s.clear_session()
        assert await s.get_items() == []
        await s.add_items([u])
        assert await s.get_items() == [u]
        assert await s.delete() is True  # erasure, unlike clear: the id refuses writes
        with pytest.raises(ErasedError):
            await s.add_items([u])
        # a conversation written other than through the session: its rows are items too
        other = session(stores, "written-elsewhere")
        await other.conversation().append(Message.assistant("hi"), Message.user("q"))
        assert await other.pop_item() == "q"
        assert await other.get_items() == ["hi"]
        await other.conversation().append(Message.assistant("again"))
        await other.clear_session()
        assert await other.get_items() == [] and await other.pop_item() is None


async def test_pops_racing_adds_lose_nothing(backend: str, bridge_servers: Servers) -> None:
    """Writers add items while poppers pop, each through a session object of its own on
    one session: afterwards it holds everything added minus exactly the items the pops
    returned (each popped once), every writer's items in its order; no added item is lost
    with a pop that raced its add."""
    async with bridge_servers.open(backend) as stores:
        tenant = fresh_tenant()
        writers, poppers, rounds = 3, 3, 8
        seed = [{"role": "user", "content": f"seed {i}"} for i in range(poppers)]
        await session(stores, "raced", tenant=tenant).add_items(copy.deepcopy(seed))
        added: list[dict[str, Any]] = list(seed)
        popped: list[Any] = []

        async def write(w: int) -> None:
            s = session(stores, "raced", tenant=tenant)
            for r in range(rounds):
                batch = [
                    {"role": "assistant", "content": f"w{w} {r} {x}"} for x in range(1 + r % 2)
                ]
                await s.add_items(copy.deepcopy(batch))
                added.extend(batch)

        async def pop() -> None:
            s = session(stores, "raced", tenant=tenant)
            for _ in range(rounds):
                item = await s.pop_item()
                if item is not None:
                    popped.append(item)

        await asyncio.gather(*(write(w) for w in range(writers)), *(pop() for _ in range(poppers)))
        taken = [i["content"] for i in popped]
        assert len(taken) == len(set(taken)), f"an item was popped twice: {taken}"
        assert set(taken) <= {i["content"] for i in added}, f"popped what was not added: {taken}"
        left = [i for i in added if i["content"] not in taken]
        stored = await session(stores, "raced", tenant=tenant).get_items()
        lost = [i["content"] for i in left if i not in stored]
        assert not lost, f"added, never popped, and gone: {lost}"
        assert len(stored) == len(left), f"{len(stored)} items stored, {len(left)} expected"
        for w in range(writers):
            mine = [i for i in stored if str(i.get("content")).startswith(f"w{w} ")]
            assert mine == [i for i in left if i["content"].startswith(f"w{w} ")], f"writer {w}"


async def test_add_items_is_all_or_nothing_when_cancelled(
    backend: str, bridge_servers: Servers
) -> None:
    """A batch cancelled at any point of the call lands whole or not at all, and nothing
    of it lands after the call ended; a batch over one append's limit is refused whole."""
    async with bridge_servers.open(backend) as stores:
        s = session(stores)
        batch = [
            {"role": "user" if i % 2 else "assistant", "content": f"{i} " + "x" * 500}
            for i in range(60)
        ]
        for steps in range(0, 24, 3):
            await s.clear_session()
            task = asyncio.ensure_future(s.add_items(copy.deepcopy(batch)))
            for _ in range(steps):
                await asyncio.sleep(0)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            items = await s.get_items()
            assert items in ([], batch), f"cancelled after {steps} steps: {len(items)} items"
            await asyncio.sleep(0.02)
            assert await s.get_items() == items, "a cancelled add landed after it ended"
        before = await s.get_items()
        with pytest.raises(UsageError):  # over one append's 1,000 rows: refused whole
            await s.add_items([{"role": "user", "content": str(i)} for i in range(1001)])
        assert await s.get_items() == before
        with pytest.raises(UsageError):  # not a JSON mapping: refused whole
            await s.add_items([{"role": "user", "content": "ok"}, {"content": float("nan")}])
        with pytest.raises(UsageError):
            await s.add_items(["not an item"])  # type: ignore[list-item]
        await s.clear_session()
        await s.add_items(batch[:2])
        assert await s.get_items() == batch[:2]


async def test_another_principal_sees_nothing_and_writes_nothing(
    backend: str, bridge_servers: Servers
) -> None:
    """Bob names Alice's session id in Alice's tenant: it reads as absent (no items, no
    pop, clear a no-op, not listed), and his add is refused; Alice's items are intact."""
    async with bridge_servers.open(backend) as stores:
        tenant = fresh_tenant()
        alice = session(stores, "s", tenant=tenant, principal="alice")
        bob = session(stores, "s", tenant=tenant, principal="bob")
        await alice.add_items(ITEMS[:6])
        assert await bob.get_items() == [] and await bob.get_items(2) == []
        assert await bob.pop_item() is None
        await bob.clear_session()
        with pytest.raises(NotOwnedError):
            await bob.add_items([{"role": "user", "content": "mine now"}])
        assert await alice.get_items() == ITEMS[:6]
        assert (await list_sessions(stores, tenant=tenant, principal="bob")).session_ids == []
        listed = await list_sessions(stores, tenant=tenant, principal="alice")
        assert listed.session_ids == ["s"]
        # shared read-only: reads work, writes are still refused
        await alice.conversation().share("bob")
        assert await bob.get_items() == ITEMS[:6]
        with pytest.raises(NotOwnedError):
            await bob.pop_item()
        with pytest.raises(NotOwnedError):
            await bob.clear_session()
        assert await alice.get_items() == ITEMS[:6]


CURRENT_USER: contextvars.ContextVar[tuple[str, str]] = contextvars.ContextVar("user")
"""What an application's authentication sets for the request it serves."""


async def test_identity_comes_from_the_application(backend: str, bridge_servers: Servers) -> None:
    """One session object serves every request; each call acts as the user the
    application's resolver names, never as anything the session id says."""
    async with bridge_servers.open(backend) as stores:
        tenant = fresh_tenant()
        shared = AgentStoresSession("alice", stores, identity=CURRENT_USER.get)
        CURRENT_USER.set((tenant, "alice"))
        await shared.add_items([{"role": "user", "content": "alice's"}])
        CURRENT_USER.set((tenant, "bob"))
        assert await shared.get_items() == []  # the id "alice" gives bob nothing
        with pytest.raises(NotOwnedError):
            await shared.add_items([{"role": "user", "content": "bob's"}])
        CURRENT_USER.set((tenant, "alice"))
        assert await shared.get_items() == [{"role": "user", "content": "alice's"}]
        CURRENT_USER.set(("", "alice"))  # type: ignore[arg-type]
        with pytest.raises(UsageError):
            await shared.get_items()
        for bad in (
            {},
            {"tenant": "t", "identity": CURRENT_USER.get},
            {"identity": CURRENT_USER.get, "principal": "p"},
        ):
            with pytest.raises(UsageError):
                AgentStoresSession("s", stores, **bad)  # type: ignore[arg-type]
        CURRENT_USER.set((tenant, "alice"))
        assert shared.conversation().key == ConversationKey(tenant, "alice")


async def test_runner_run_sync_in_a_worker_thread(backend: str, bridge_servers: Servers) -> None:
    """``Runner.run_sync`` runs its own loop in a worker thread; the session's calls run on
    the loop that owns the stores."""
    async with bridge_servers.open(backend) as stores:
        s = session(stores)
        agent, model = two_agents()
        script_turn(model, 1)

        def in_thread() -> object:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            try:
                return Runner.run_sync(agent, "question 1", session=s).final_output
            finally:
                loop.close()

        assert await asyncio.to_thread(in_thread) == "answer 1"
        items = await s.get_items()
        assert items[0] == {"content": "question 1", "role": "user"} and len(items) == 7


async def test_the_sdks_encrypted_session_wraps_the_bridge(
    backend: str, bridge_servers: Servers
) -> None:
    """``EncryptedSession`` over the bridge: items round-trip, and the store holds only
    Fernet envelopes (encryption at rest until core has its own)."""
    async with bridge_servers.open(backend) as stores:
        inner = session(stores)
        key = Fernet.generate_key().decode("ascii")
        encrypted = EncryptedSession(inner.session_id, inner, encryption_key=key, ttl=600)
        await encrypted.add_items(copy.deepcopy(ITEMS[:10]))
        assert await encrypted.get_items() == ITEMS[:10]
        assert await encrypted.get_items(2) == ITEMS[8:10]
        assert await encrypted.pop_item() == ITEMS[9]
        stored = await inner.get_items()
        assert len(stored) == 9
        assert all(row.get("__enc__") == 1 for row in stored), stored[0]
        assert "Paris" not in str(stored) and "Paris" in str(await encrypted.get_items())
        agent, model = two_agents()  # a turn under the bridge's lease, through the wrapper
        script_turn(model, 1)
        result = await run_turn(inner, agent, "question 1", session=encrypted)
        assert result.final_output == "answer 1"
        assert len(await inner.get_items()) == 9 + 7
        assert (await encrypted.get_items())[9] == {"content": "question 1", "role": "user"}


async def test_a_windowed_read_sees_what_another_session_object_did(
    backend: str, bridge_servers: Servers
) -> None:
    """``get_items(limit)`` is one snapshot of the conversation's end, whoever wrote
    last: another object's adds, pops and clears (another replica's) are seen at once."""
    async with bridge_servers.open(backend) as stores:
        tenant = fresh_tenant()
        here, there = session(stores, tenant=tenant), session(stores, tenant=tenant)
        said = [{"role": "user", "content": f"q{n}"} for n in range(6)]
        answered = [{"role": "assistant", "content": f"a{n}"} for n in range(6)]
        await here.add_items([said[0], answered[0]])
        assert await here.get_items(limit=2) == [said[0], answered[0]]
        await there.add_items([said[1], answered[1], said[2]])
        assert await here.get_items(limit=2) == [answered[1], said[2]]
        assert await there.pop_item() == said[2]
        assert await here.get_items(limit=3) == [answered[0], said[1], answered[1]]
        await there.clear_session()
        assert await here.get_items(limit=2) == []
        await there.add_items([said[3]])
        assert await here.get_items(limit=5) == [said[3]]
        await here.add_items([answered[3]])  # here's own write moves its tail
        assert await there.get_items(limit=1) == [answered[3]]
        assert await here.get_items(limit=1) == [answered[3]]
        # another writer adds more than one read from here's old tail may bring
        many = [{"role": "assistant", "content": f"b{n}"} for n in range(40)]
        await there.add_items(many)
        assert await here.get_items(limit=2) == many[-2:]
        assert await here.get_items(limit=2) == many[-2:]  # and from the new tail
