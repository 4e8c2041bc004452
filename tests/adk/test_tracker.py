"""google/adk-python's tracker issues, reproduced: ADK's own DatabaseSessionService (on
sqlite+aiosqlite and on PostgreSQL) fails them, the bridge passes them on every backend.

- #4751: two servers run ``run_async`` on one session at once; the second writer must
  be refused, not interleave its events with the first's.
- #917 (stale-session errors): the refusal must be exact: every write through an
  outdated session object is refused, with a clear error, and no other write is.
- #4917 and #4621: ``get_session`` and ``list_sessions`` load everything; here reads are
  paged (counted in rows the store hands back, never in seconds).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from google.adk.errors import StaleSessionError
from google.adk.events.event import Event
from google.adk.sessions.base_session_service import BaseSessionService
from google.genai import types

from agentstores_adk import AgentStoresSessionService, EventPage, StaleSessionWriteError
from agentstores_adk.events import to_message
from tests.servers.backends import Servers, fresh_tenant

from .counting import CountingStores, GatedStores
from .peers import PEERS, gate_first_write, loaded_rows, peer_services
from .scripted import APP, run_turn, runner, said, tool_turn

pytestmark = pytest.mark.timeout(180)

USER = "alice"


async def concurrent_turns(
    first: BaseSessionService, second: BaseSessionService, session_id: str
) -> tuple[list[Any], list[Event], list[Any]]:
    """Two runners (two servers) each run a turn on ``session_id`` at once. Returns each
    run's outcome (its events, or the exception it raised), the session as stored
    afterwards, and what each run's model was sent."""
    models = [tool_turn("answer for A"), tool_turn("answer for B")]
    outcomes = await asyncio.gather(
        run_turn(runner(first, models[0]), USER, session_id, "question from A"),
        run_turn(runner(second, models[1]), USER, session_id, "question from B"),
        return_exceptions=True,
    )
    stored = await first.get_session(app_name=APP, user_id=USER, session_id=session_id)
    assert stored is not None
    return list(outcomes), stored.events, [m.seen for m in models]


def texts(events: list[Event]) -> list[str]:
    return [
        part.text
        for event in events
        for part in (event.content.parts if event.content and event.content.parts else [])
        if part.text
    ]


# --- #4751: concurrent run_async ------------------------------------------------------


@pytest.mark.parametrize("kind", PEERS)
async def test_4751_peer_store(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """ADK's DatabaseSessionService: on sqlite both servers pass the stale check before
    either writes, and both turns land interleaved in one session (the corruption of
    #4751: every later turn replays two conversations as one). On PostgreSQL
    its row lock serializes the two and the second is refused (that case it gets right)."""
    pg = request.getfixturevalue("pg_admin") if kind == "postgres" else None
    async with peer_services(kind, tmp_path, pg) as (a, b):
        session = await a.create_session(app_name=APP, user_id=USER)
        barrier = asyncio.Barrier(2)
        for service in (a, b):
            gate_first_write(service, barrier, timeout=1.0)
        outcomes, stored, _ = await concurrent_turns(a, b, session.id)
    questions = [t for t in texts(stored) if t.startswith("question")]
    if kind == "sqlite":
        assert sorted(questions) == ["question from A", "question from B"]  # the failure
        # the failure: neither first append was refused, so both servers' turns are in
        # one session (whether a later append of one is then refused depends on timing:
        # either way the session already holds both questions)
        assert sorted(questions) == ["question from A", "question from B"]
        answered = [t for t in texts(stored) if t.startswith("answer")]
        assert answered and all(isinstance(o, (list, StaleSessionError)) for o in outcomes)
    else:
        assert len(questions) == 1
        assert sum(isinstance(o, StaleSessionError) for o in outcomes) == 1


async def test_4751_bridge(backend: str, bridge_servers: Servers) -> None:
    """The bridge, with both servers held until both loaded the session: exactly one
    turn is stored, whole; the other server is refused at its first append, before its
    model is called, with StaleSessionWriteError."""
    async with bridge_servers.open(backend) as stores:
        tenant = fresh_tenant()
        barrier = asyncio.Barrier(2)
        a, b = (
            AgentStoresSessionService(
                GatedStores(stores, barrier, 5.0), tenant=tenant, principal=USER
            )  # type: ignore[arg-type]
            for _ in range(2)
        )
        session = await AgentStoresSessionService(
            stores, tenant=tenant, principal=USER
        ).create_session(app_name=APP, user_id=USER)
        outcomes, stored, seen = await concurrent_turns(a, b, session.id)
    refused = [i for i, o in enumerate(outcomes) if isinstance(o, StaleSessionWriteError)]
    assert len(refused) == 1, outcomes
    winner = "AB"[1 - refused[0]]
    assert texts(stored) == [f"question from {winner}", f"answer for {winner}"]
    assert len(stored) == 4 and len({e.invocation_id for e in stored}) == 1
    assert seen[refused[0]] == []  # the refused server never called its model
    assert isinstance(outcomes[1 - refused[0]], list)


# --- #917: stale-session detection, made exact ----------------------------------------


async def same_instant_writer(service: BaseSessionService) -> tuple[Any, list[Event]]:
    """Two session objects load a session whose last event is stamped T; the first
    appends an event also stamped T (timestamps are the writer's clock: a coarse clock,
    two servers, or a caller-set stamp); then the second, now outdated, appends."""
    instant = 1_800_000_000.25
    session = await service.create_session(app_name=APP, user_id=USER)
    await service.append_event(
        session, Event(author="user", timestamp=instant, content=said("one"))
    )
    first = await service.get_session(app_name=APP, user_id=USER, session_id=session.id)
    second = await service.get_session(app_name=APP, user_id=USER, session_id=session.id)
    assert first is not None and second is not None
    await service.append_event(first, Event(author="clerk", timestamp=instant, content=said("two")))
    try:
        outcome: Any = await service.append_event(
            second, Event(author="clerk", timestamp=instant + 1, content=said("stale"))
        )
    except Exception as exc:
        outcome = exc
    stored = await service.get_session(app_name=APP, user_id=USER, session_id=session.id)
    assert stored is not None
    return outcome, stored.events


@pytest.mark.parametrize("kind", PEERS)
async def test_917_peer_store(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """ADK's DatabaseSessionService marks a session's revision with its last event's
    timestamp: a writer that appended at the same instant leaves the mark unchanged, and
    the outdated object's write is accepted after an event it never saw."""
    pg = request.getfixturevalue("pg_admin") if kind == "postgres" else None
    async with peer_services(kind, tmp_path, pg, count=1) as (service,):
        outcome, stored = await same_instant_writer(service)
    assert isinstance(outcome, Event)  # the failure: no refusal
    assert sorted(texts(stored)) == ["one", "stale", "two"]  # (ties on time: in id order)


async def test_917_bridge(backend: str, bridge_servers: Servers) -> None:
    """The bridge marks a revision with the transcript tail (an event id, unique in the
    session): the outdated write is refused, clearly, and nothing of it lands."""
    async with bridge_servers.open(backend) as stores:
        service = AgentStoresSessionService(stores, tenant=fresh_tenant(), principal=USER)
        outcome, stored = await same_instant_writer(service)
    assert isinstance(outcome, StaleSessionWriteError)
    assert isinstance(outcome, StaleSessionError)
    assert "another writer" in str(outcome) and outcome.tail == stored[-1].id
    assert texts(stored) == ["one", "two"]


# --- #4917 and #4621: paged reads -----------------------------------------------------

EVENTS = 300
SESSIONS = 40


def events(count: int) -> list[Event]:
    return [
        Event(
            author="user" if n % 2 else "clerk",
            invocation_id=f"inv{n}",
            timestamp=1_000.0 + n,
            content=types.Content(
                role="user" if n % 2 else "model", parts=[types.Part(text=f"message {n}")]
            ),
        )
        for n in range(count)
    ]


async def test_4917_4621_peer_store(tmp_path: Path) -> None:
    """ADK's DatabaseSessionService: the first user event is found only by loading every
    event (get_session has no page from the start), and list_sessions loads every
    session row (it takes no page size)."""
    async with peer_services("sqlite", tmp_path, None, count=1) as (service,):
        session = await service.create_session(app_name=APP, user_id=USER)
        schema = service._get_schema_classes()
        async with service._rollback_on_exception_session() as sql:
            sql.add_all([schema.StorageEvent.from_event(session, e) for e in events(EVENTS)])
            await sql.commit()
        for n in range(SESSIONS - 1):
            await service.create_session(app_name=APP, user_id=USER, session_id=f"s{n}")
        with loaded_rows() as rows:
            got = await service.get_session(app_name=APP, user_id=USER, session_id=session.id)
        assert got is not None
        first = next(e for e in got.events if e.author == "user")
        assert first.invocation_id == "inv1"
        assert rows["events"] == EVENTS  # the failure: every event, to find the second
        with loaded_rows() as rows:
            listed = await service.list_sessions(app_name=APP, user_id=USER)
        assert len(listed.sessions) == SESSIONS
        assert rows["sessions"] == SESSIONS  # the failure: every session, no page


async def test_4917_4621_bridge(backend: str, bridge_servers: Servers) -> None:
    """The bridge, counted at the real store: the first user event is one indexed read of
    one row (the store's user view), a page of events from the start reads that page,
    and a page of sessions reads that page, never an event."""
    async with bridge_servers.open(backend) as real:
        stores = CountingStores(real)
        service = AgentStoresSessionService(stores, tenant=fresh_tenant(), principal=USER)  # type: ignore[arg-type]
        session = await service.create_session(app_name=APP, user_id=USER)
        key = service.session_key(app_name=APP, user_id=USER, session_id=session.id)
        built = events(EVENTS)
        await real.conversations.append_messages(key, USER, [to_message(e) for e in built])
        for n in range(SESSIONS - 1):
            await service.create_session(app_name=APP, user_id=USER, session_id=f"s{n}")
        conv = stores.conversations

        conv.reset()
        page = await service.get_session(
            app_name=APP, user_id=USER, session_id=session.id, config=EventPage(start=0, limit=2)
        )
        assert page is not None
        assert next(e for e in page.events if e.author == "user").invocation_id == "inv1"
        assert conv.rows["read_messages"] == 2

        conv.reset()  # the events are role-tagged: the store's user view finds it too
        first = await stores.conversations.get_transcript(key, USER, index=0, speaker="user")
        assert [m.id for m in first] == [built[1].id] and conv.rows["get_transcript"] == 1

        conv.reset()
        listed = await service.list_sessions_page(app_name=APP, user_id=USER, page_size=10)
        assert len(listed.sessions) == 10 and listed.next_page_token is not None
        assert conv.rows["list_conversations"] == 10 and conv.calls["read_messages"] == 0

        conv.reset()
        everything = await service.list_sessions(app_name=APP, user_id=USER)
        assert len(everything.sessions) == SESSIONS
        assert conv.calls["read_messages"] == 0
