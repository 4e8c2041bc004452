"""The session service on every backend: exact round trips of a real Runner turn, ADK's
state scopes, owner-only access, fencing, all-or-nothing appends, paged reads."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import pytest
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions.base_session_service import GetSessionConfig
from google.genai import types

from agentstores import ConversationKey, ErasedError, FencedError, UsageError
from agentstores.stores.ambient import fenced_as
from agentstores_adk import (
    AgentStoresSessionService,
    EventPage,
    StaleSessionWriteError,
    UserMismatchError,
)
from agentstores_adk.events import to_message
from tests.servers.backends import Servers, fresh_tenant

from .counting import CountingStores
from .scripted import APP, run_turn, runner, said, tool_turn, usage

pytestmark = pytest.mark.timeout(120)


def dumped(events: list[Event]) -> list[dict[str, object]]:
    return [event.model_dump() for event in events]


async def test_runner_turn_round_trips_every_event(backend: str, bridge_servers: Servers) -> None:
    """A real Runner turn (user text, function call, function response with state deltas
    in every scope, model text with usage metadata) reads back field for field, and a
    hand-made event with every kind of part and action does too."""
    async with bridge_servers.open(backend) as stores:
        tenant = fresh_tenant()
        service = AgentStoresSessionService(stores, tenant=tenant, principal="alice")
        session = await service.create_session(app_name=APP, user_id="alice", state={"k": None})
        yielded = await run_turn(
            runner(service, tool_turn()), "alice", session.id, "where is A-17?"
        )
        got = await service.get_session(app_name=APP, user_id="alice", session_id=session.id)
        assert got is not None
        assert [e.author for e in got.events] == ["user", "clerk", "clerk", "clerk"]
        assert got.events[0].content == said("where is A-17?")
        assert dumped(got.events[1:]) == dumped(yielded)
        assert got.events[1].content.parts[0].function_call.args == {"order_id": "A-17"}
        assert got.events[3].usage_metadata == usage(20, 4)
        # temp: is applied in memory during the turn and never stored
        assert got.state == {
            "k": None,
            "last_order": "A-17",
            "user:orders_seen": 1,
            "app:lookups": 1,
        }
        assert "temp:scratch" not in got.events[2].actions.state_delta

        rich = Event(
            invocation_id="inv-x",
            author="clerk",
            branch="a.b",
            timestamp=1_700_000_000.123456,
            content=types.Content(
                role="model",
                parts=[
                    types.Part(text="ünïcode ✓", thought=True),
                    types.Part(
                        inline_data=types.Blob(mime_type="image/png", data=bytes(range(256)))
                    ),
                    types.Part(
                        function_response=types.FunctionResponse(
                            id="c9", name="f", response={"nested": {"list": [1, 2.5, None, "x"]}}
                        )
                    ),
                ],
            ),
            actions=EventActions(
                state_delta={"a": {"deep": [1]}, "user:u": "v"},
                transfer_to_agent="other",
                escalate=True,
                skip_summarization=True,
            ),
            usage_metadata=usage(1, 2),
            custom_metadata={"trace": "t-1"},
            long_running_tool_ids={"c9", "c1"},
            turn_complete=True,
        )
        # the stored content is the event's JSON as ADK's own database service stores it
        assert to_message(rich).content == json.loads(rich.model_dump_json(exclude_none=True))
        await service.append_event(got, rich)
        again = await service.get_session(app_name=APP, user_id="alice", session_id=session.id)
        assert again is not None
        assert dumped(again.events) == dumped(got.events)
        assert again.events[-1] == rich
        assert again.last_update_time == rich.timestamp


async def test_state_scopes(backend: str, bridge_servers: Servers) -> None:
    """app: state is shared by every user of the app, user: state by one user's sessions,
    session state by one session; temp: state is never stored."""
    async with bridge_servers.open(backend) as stores:
        tenant = fresh_tenant()
        alice = AgentStoresSessionService(stores, tenant=tenant, principal="alice")
        bob = AgentStoresSessionService(stores, tenant=tenant, principal="bob")
        first = await alice.create_session(
            app_name=APP,
            user_id="alice",
            state={"app:motd": "hi", "user:lang": "fr", "s": 1, "temp:t": 2},
        )
        assert first.state == {"app:motd": "hi", "user:lang": "fr", "s": 1}
        await alice.append_event(
            first,
            Event(
                author="user",
                actions=EventActions(state_delta={"user:n": 1, "app:m": 2, "temp:x": 3}),
            ),
        )
        second = await alice.create_session(app_name=APP, user_id="alice")
        assert second.state == {"app:motd": "hi", "app:m": 2, "user:lang": "fr", "user:n": 1}
        theirs = await bob.create_session(app_name=APP, user_id="bob")
        assert theirs.state == {"app:motd": "hi", "app:m": 2}
        assert await alice.get_user_state(app_name=APP, user_id="alice") == {"lang": "fr", "n": 1}
        assert await bob.get_user_state(app_name=APP, user_id="bob") == {}
        stored = await alice.get_session(app_name=APP, user_id="alice", session_id=first.id)
        assert stored is not None
        assert "temp:x" not in stored.state and "temp:t" not in stored.state
        assert stored.events[0].actions.state_delta == {"user:n": 1, "app:m": 2}
        listed = await alice.list_sessions(app_name=APP, user_id="alice")
        assert {s.id for s in listed.sessions} == {first.id, second.id}
        assert all(not s.events for s in listed.sessions)
        assert [s.state for s in listed.sessions if s.id == first.id] == [stored.state]


async def test_another_users_session_is_absent_and_unwritable(
    backend: str, bridge_servers: Servers
) -> None:
    """Identity comes from the application: a user_id other than the acting principal
    is refused; another user's session reads as absent (at the service and at the
    store) and cannot be written, listed or deleted."""
    async with bridge_servers.open(backend) as stores:
        tenant = fresh_tenant()
        alice = AgentStoresSessionService(stores, tenant=tenant, principal="alice")
        bob = AgentStoresSessionService(stores, tenant=tenant, principal="bob")
        mine = await alice.create_session(app_name=APP, user_id="alice", session_id="s1")
        await alice.append_event(mine, Event(author="user", content=said("secret")))

        with pytest.raises(UserMismatchError):
            await bob.get_session(app_name=APP, user_id="alice", session_id="s1")
        with pytest.raises(UserMismatchError):
            await bob.append_event(mine, Event(author="user", content=said("intrusion")))
        with pytest.raises(UserMismatchError):
            await bob.delete_session(app_name=APP, user_id="alice", session_id="s1")
        with pytest.raises(UserMismatchError):
            await bob.list_sessions(app_name=APP, user_id="alice")
        assert await bob.get_session(app_name=APP, user_id="bob", session_id="s1") is None
        assert (await bob.list_sessions(app_name=APP)).sessions == []
        key = alice.session_key(app_name=APP, user_id="alice", session_id="s1")
        assert await stores.conversations.get_conversation(key, "bob") is None
        assert await stores.conversations.read_messages(key, "bob") == []
        # bob's own "s1" is his own session: no collision, no leak
        his = await bob.create_session(app_name=APP, user_id="bob", session_id="s1")
        assert his.events == [] and his.id == "s1"
        # the resolver's answer is what counts, never the call's user_id
        resolved = AgentStoresSessionService(stores, identity=lambda app, user: (tenant, "bob"))
        with pytest.raises(UserMismatchError):
            await resolved.get_session(app_name=APP, user_id="alice", session_id="s1")
        with pytest.raises(UsageError):
            AgentStoresSessionService(
                stores, identity=lambda app, user: (tenant, "bob"), principal="x"
            )
        got = await alice.get_session(app_name=APP, user_id="alice", session_id="s1")
        assert got is not None and [e.content for e in got.events] == [said("secret")]


async def test_create_and_delete(backend: str, bridge_servers: Servers) -> None:
    async with bridge_servers.open(backend) as stores:
        service = AgentStoresSessionService(stores, tenant=fresh_tenant(), principal="alice")
        created = await service.create_session(app_name=APP, user_id="alice", session_id=" s ")
        assert created.id == "s"
        assert await service.get_session(app_name=APP, user_id="alice", session_id="s") == created
        with pytest.raises(AlreadyExistsError):
            await service.create_session(app_name=APP, user_id="alice", session_id="s")
        await service.delete_session(app_name=APP, user_id="alice", session_id="s")
        assert await service.get_session(app_name=APP, user_id="alice", session_id="s") is None
        with pytest.raises(SessionNotFoundError):
            await service.append_event(created, Event(author="user", content=said("late")))
        with pytest.raises(ErasedError):  # erasure is final: the id stays taken
            await service.create_session(app_name=APP, user_id="alice", session_id="s")


async def test_fenced_producer_cannot_write(backend: str, bridge_servers: Servers) -> None:
    """A producer whose turn lease was taken over (its epoch below the fence) has its
    append refused, and nothing of it lands: not the event, not its state."""
    async with bridge_servers.open(backend) as stores:
        service = AgentStoresSessionService(stores, tenant=fresh_tenant(), principal="alice")
        session = await service.create_session(app_name=APP, user_id="alice")
        key = service.session_key(app_name=APP, user_id="alice", session_id=session.id)
        old = await service.get_session(app_name=APP, user_id="alice", session_id=session.id)
        assert old is not None
        with fenced_as(key, 1):
            await service.append_event(session, Event(author="user", content=said("first")))
        assert old is not None
        with fenced_as(key, 2):  # the takeover
            await service.append_event(session, Event(author="user", content=said("second")))
        late = Event(
            author="clerk", actions=EventActions(state_delta={"late": True, "user:late": 1})
        )
        stale = await service.get_session(app_name=APP, user_id="alice", session_id=session.id)
        assert stale is not None
        with fenced_as(key, 1), pytest.raises(FencedError):
            await service.append_event(stale, late)
        after = await service.get_session(app_name=APP, user_id="alice", session_id=session.id)
        assert after is not None
        assert [e.content for e in after.events] == [said("first"), said("second")]
        assert "late" not in after.state and "user:late" not in after.state


@pytest.mark.parametrize("ticks", [0, 1, 2, 4, 8])
async def test_append_is_all_or_nothing_when_cancelled(
    backend: str, bridge_servers: Servers, ticks: int
) -> None:
    """Cancelling append_event at any point leaves the event and all its state (session,
    user, app) stored together or none of it; an append too big for the store leaves
    nothing at all."""
    async with bridge_servers.open(backend) as stores:
        service = AgentStoresSessionService(stores, tenant=fresh_tenant(), principal="alice")
        session = await service.create_session(app_name=APP, user_id="alice")
        event = Event(
            author="clerk",
            content=said("answer"),
            actions=EventActions(state_delta={"s": 1, "user:u": 2, "app:a": 3}),
        )
        task = asyncio.ensure_future(service.append_event(session, event))
        for _ in range(ticks):
            await asyncio.sleep(0)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        got = await service.get_session(app_name=APP, user_id="alice", session_id=session.id)
        assert got is not None
        landed = [e.id for e in got.events] == [event.id]
        shared = {k: got.state.get(k) for k in ("s", "user:u", "app:a")}
        assert shared == (
            {"s": 1, "user:u": 2, "app:a": 3}
            if landed
            else {"s": None, "user:u": None, "app:a": None}
        )
        if not landed:
            assert got.events == []

        huge = Event(
            author="clerk",
            content=said("x" * (9 * 1024 * 1024)),
            actions=EventActions(state_delta={"big": 1}),
        )
        fresh = await service.get_session(app_name=APP, user_id="alice", session_id=session.id)
        assert fresh is not None
        with pytest.raises(UsageError):
            await service.append_event(fresh, huge)
        after = await service.get_session(app_name=APP, user_id="alice", session_id=session.id)
        assert (
            after is not None and "big" not in after.state and len(after.events) == len(got.events)
        )


async def test_reads_are_paged(backend: str, bridge_servers: Servers) -> None:
    """get_session reads only the events asked for (counted at the real store): the last
    n, a page from the start (the first user event in one row), the events after a time
    (one page back from the tail), none; list_sessions reads no event at all."""
    async with bridge_servers.open(backend) as real:
        stores = CountingStores(real)
        service = AgentStoresSessionService(stores, tenant=fresh_tenant(), principal="alice")  # type: ignore[arg-type]
        session = await service.create_session(app_name=APP, user_id="alice")
        key = service.session_key(app_name=APP, user_id="alice", session_id=session.id)
        events = [
            Event(
                author="user" if n % 2 == 0 else "clerk",
                invocation_id=f"inv{n // 2}",
                timestamp=1_000.0 + n,
                content=said(f"message {n}"),
            )
            for n in range(600)
        ]
        for first in range(0, 600, 300):  # bulk build: the messages append_event writes
            await real.conversations.append_messages(
                key, "alice", [to_message(e) for e in events[first : first + 300]]
            )
        conv = stores.conversations

        async def read(config: GetSessionConfig | None) -> list[Event]:
            conv.reset()
            got = await service.get_session(
                app_name=APP, user_id="alice", session_id=session.id, config=config
            )
            assert got is not None
            return got.events

        assert dumped(await read(GetSessionConfig(num_recent_events=3))) == dumped(events[-3:])
        assert conv.rows["tail"] == 3 and conv.calls["read_messages"] == 0
        first_page = await read(EventPage(start=0, limit=1))
        assert first_page == events[:1] and first_page[0].author == "user"
        assert conv.rows["read_messages"] == 1
        assert await read(EventPage(start=250, limit=5)) == events[250:255]
        assert conv.rows["read_messages"] == 5
        assert await read(GetSessionConfig(after_timestamp=1_000.0 + 590)) == events[590:]
        assert conv.rows["read_messages"] <= 100
        assert await read(GetSessionConfig(num_recent_events=0)) == []
        assert conv.calls["read_messages"] == 0
        assert await read(None) == events

        for n in range(3):
            await service.create_session(app_name=APP, user_id="alice", session_id=f"more-{n}")
        conv.reset()
        listed = await service.list_sessions(app_name=APP, user_id="alice")
        assert len(listed.sessions) == 4
        assert conv.calls["read_messages"] == 0 and conv.calls["list_conversations"] == 1
        conv.reset()
        page = await service.list_sessions_page(app_name=APP, user_id="alice", page_size=2)
        assert len(page.sessions) <= 2 and page.next_page_token is not None
        assert conv.rows["list_conversations"] == 2
        rest = await service.list_sessions_page(
            app_name=APP, user_id="alice", page_size=10, page_token=page.next_page_token
        )
        assert {s.id for s in page.sessions + rest.sessions} == {s.id for s in listed.sessions}


async def test_recent_events_are_one_tail_read(backend: str, bridge_servers: Servers) -> None:
    """num_recent_events: the session's metadata and its last n events are one ``tail``
    read of the store (no read by position, no separate metadata read), whatever the
    events are; they are exactly the last n and end at the marker, also when a writer
    races the read."""
    async with bridge_servers.open(backend) as stores:
        service = AgentStoresSessionService(stores, tenant=fresh_tenant(), principal="alice")
        session = await service.create_session(app_name=APP, user_id="alice")
        answered = types.Content(
            role="user",
            parts=[types.Part.from_function_response(name="f", response={"ok": True})],
        )
        events = [
            Event(author="user", content=said("a")),
            Event(author="clerk", content=said("b")),
            Event(author="clerk", content=answered),
            Event(author="clerk", content=said("c")),
            Event(author="user", content=said("d")),
        ]
        for event in events:
            await service.append_event(session, event)
        conv = stores.conversations
        calls: dict[str, int] = {"tail": 0, "read_messages": 0, "recent": 0}
        race = {"armed": False}
        real = {name: getattr(conv, name) for name in calls}

        def counted(name: str) -> Any:
            async def call(*args: object, **kwargs: object) -> object:
                calls[name] += 1
                if name == "tail" and race["armed"]:
                    race["armed"] = False
                    racing = Event(author="user", content=said(f"race {len(events)}"))
                    await service.append_event(session, racing)
                    events.append(racing)
                return await real[name](*args, **kwargs)

            return call

        for name in calls:
            setattr(conv, name, counted(name))
        try:
            for n in (1, 2, 3, 5, 6, 50):
                calls.update(tail=0, read_messages=0, recent=0)
                got = await service.get_session(
                    app_name=APP,
                    user_id="alice",
                    session_id=session.id,
                    config=GetSessionConfig(num_recent_events=n),
                )
                assert got is not None
                assert dumped(got.events) == dumped(events[-n:])
                assert got._storage_update_marker == events[-1].id
                assert calls == {"tail": 1, "read_messages": 0, "recent": 0}
            for n in (1, 2):
                race["armed"] = True
                got = await service.get_session(
                    app_name=APP,
                    user_id="alice",
                    session_id=session.id,
                    config=GetSessionConfig(num_recent_events=n),
                )
                assert got is not None and not race["armed"]
                assert got._storage_update_marker == got.events[-1].id == events[-1].id
                assert dumped(got.events) == dumped(events[-n:])
        finally:
            for name in calls:
                delattr(conv, name)


async def test_stale_handle_is_refused(backend: str, bridge_servers: Servers) -> None:
    """A session object another writer got ahead of is refused with a clear error that
    is both ADK's StaleSessionError and agentstores' StaleWriteError; nothing lands; a
    reload continues. Sequential appends through one object never are."""
    async with bridge_servers.open(backend) as stores:
        service = AgentStoresSessionService(stores, tenant=fresh_tenant(), principal="alice")
        session = await service.create_session(app_name=APP, user_id="alice")
        a = await service.get_session(app_name=APP, user_id="alice", session_id=session.id)
        b = await service.get_session(app_name=APP, user_id="alice", session_id=session.id)
        assert a is not None and b is not None
        for n in range(3):  # equal and decreasing timestamps: no false refusal
            await service.append_event(
                a, Event(author="user", timestamp=5.0 - (n // 2), content=said(f"a{n}"))
            )
        with pytest.raises(StaleSessionWriteError) as refused:
            await service.append_event(b, Event(author="user", content=said("b")))
        assert refused.value.expected == "adk-session" and refused.value.tail == a.events[-1].id
        assert isinstance(refused.value, ValueError)
        b = await service.get_session(app_name=APP, user_id="alice", session_id=session.id)
        assert b is not None
        await service.append_event(b, Event(author="user", content=said("b")))
        got = await service.get_session(app_name=APP, user_id="alice", session_id=session.id)
        assert got is not None
        assert [e.content.parts[0].text for e in got.events] == ["a0", "a1", "a2", "b"]
        assert ConversationKey  # (imported for the reader: the session is this key)


async def test_a_read_racing_a_writer_is_consistent(backend: str, bridge_servers: Servers) -> None:
    """A writer that appends while get_session reads: the session object still holds
    exactly the events up to its marker (the read is retried, or bounded by the metadata
    it read first), and its next append lands iff nothing landed after its marker."""
    async with bridge_servers.open(backend) as real:
        tenant = fresh_tenant()
        writer = AgentStoresSessionService(real, tenant=tenant, principal="alice")
        session = await writer.create_session(app_name=APP, user_id="alice")
        await writer.append_event(session, Event(author="user", content=said("one")))
        latest = GetSessionConfig(num_recent_events=0)

        stores = CountingStores(real)
        race = {"armed": False}
        read_messages = stores.conversations.__getattr__("read_messages")
        tail = stores.conversations.__getattr__("tail")

        async def race_once() -> None:
            if race["armed"]:
                race["armed"] = False
                handle = await writer.get_session(
                    app_name=APP, user_id="alice", session_id=session.id, config=latest
                )
                assert handle is not None
                await writer.append_event(handle, Event(author="clerk", content=said("race")))

        async def racing_read(*args: object, **kwargs: object) -> object:
            await race_once()
            return await read_messages(*args, **kwargs)

        async def racing_tail(*args: object, **kwargs: object) -> object:
            await race_once()
            return await tail(*args, **kwargs)

        stores.conversations.read_messages = racing_read  # type: ignore[method-assign]
        stores.conversations.tail = racing_tail  # type: ignore[method-assign]
        reader = AgentStoresSessionService(stores, tenant=tenant, principal="alice")  # type: ignore[arg-type]
        configs = [
            None,
            GetSessionConfig(num_recent_events=2),
            GetSessionConfig(after_timestamp=0.0),
        ]
        outcomes: list[str] = []
        for config in configs:
            race["armed"] = True
            got = await reader.get_session(
                app_name=APP, user_id="alice", session_id=session.id, config=config
            )
            assert got is not None and not race["armed"]
            assert got._storage_update_marker == got.events[-1].id
            now = await writer.get_session(
                app_name=APP, user_id="alice", session_id=session.id, config=latest
            )
            assert now is not None
            if got._storage_update_marker == now._storage_update_marker:
                await reader.append_event(got, Event(author="user", content=said("next")))
                outcomes.append("landed")
            else:
                with pytest.raises(StaleSessionWriteError):
                    await reader.append_event(got, Event(author="user", content=said("next")))
                outcomes.append("refused")
        # reads to the tail saw the racing event (re-read); the walk back from the tail
        # is bounded by the metadata it read first, so its object predates the race
        assert outcomes == ["landed", "landed", "refused"]
