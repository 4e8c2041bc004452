"""The proof with the SDK's own server: two real perf servers (uvicorn) share one store.

Per backend, two rounds on the same pair of servers:

- **SIGSTOP**: a long stateful turn runs on server A; A is frozen; the client recovers on
  B as the perf client does (follow, the dead verdict, ``resume=true``); A is woken after
  B finished, and none of its writes lands (state, recording, transcript).
- **kill**: the same on a new conversation, with A killed by ``POST /perf/kill`` while a
  second screen follows on B; the answer is complete, no stream rolled back, the
  transcript holds each turn once, the second screen saw the whole answer, and another
  requester trying to resume gets 403. Detect, takeover and finish times are printed
  (measured on a loaded machine; never asserted).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agentstores import ConversationKey, open_stores
from tests.zav.perf_client import TENANT, Recovery, Stream, consume, recover, turn_body
from tests.zav.perf_project.counting_agent import answer
from tests.zav.servers import BACKENDS, WORDS, PerfServer, Zygote, store_url
from tests.zav.timings import KILL_ROUND_TIMES

USER = "perf-user"


@pytest.fixture(scope="module")
def zygote() -> Iterator[Zygote]:
    made = Zygote()
    yield made
    made.close()


@pytest.fixture(scope="module", params=BACKENDS)
def backend(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, zygote: Zygote
) -> Iterator[tuple[str, str, list[PerfServer]]]:
    tmp = tmp_path_factory.mktemp(request.param)
    with store_url(request.param, tmp) as url:
        servers = [PerfServer(label, url, tmp, zygote) for label in ("server-a", "server-b")]
        try:
            for server in servers:
                server.wait_ready()
            yield request.param, url, servers
        finally:
            for server in servers:
                server.stop()


async def start_turn(
    client: httpx.AsyncClient, server: PerfServer, words: int
) -> tuple[asyncio.Task[Stream], Stream]:
    """POST a new stateful turn on ``server``; return once ``words`` words have streamed."""
    sink = Stream(0)
    task = asyncio.create_task(
        consume(
            client,
            "POST",
            f"{server.base}/chat/stream",
            user=USER,
            params={"tenant": TENANT},
            body=turn_body(),
            sink=sink,
        )
    )
    deadline = time.monotonic() + 120
    while not (sink.contents and len(sink.contents[-1].split()) >= words):
        if task.done():
            raise AssertionError(f"the turn ended early: {task.result()}")
        assert time.monotonic() < deadline, "the turn did not progress"
        await asyncio.sleep(0.05)
    assert sink.message_id and sink.session_id
    return task, sink


async def durable(url: str, session_id: str) -> dict[str, Any]:
    """What the stores hold for the conversation, read as the owner."""
    async with open_stores(url) as stores:
        key = ConversationKey(TENANT, session_id)
        messages = await stores.conversations.read_messages(key, USER)
        recording = await stores.recording.read(key, USER)
        return {
            "transcript": [(m.role, m.content) for m in messages],
            "state": await stores.state.load(key, USER),
            "recording": None if recording is None else (recording.epoch, recording.message),
            "info": await stores.conversations.get_conversation(key, USER),
        }


async def wait_until(predicate: Any, within: float = 60.0) -> None:
    deadline = time.monotonic() + within
    while not await predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.2)


def assert_complete(recovery: Recovery, first: Stream) -> None:
    assert recovery.final == answer(), recovery.final[-80:]
    for stream in [first, *recovery.streams]:
        assert stream.monotonic(), "a stream rolled back"
        assert stream.reason is None or not stream.reason.startswith("error"), stream.reason


async def test_sigstop_then_kill(backend: tuple[str, str, list[PerfServer]]) -> None:
    name, url, (a, b) = backend
    async with httpx.AsyncClient() as client:
        # --- round 1: SIGSTOP the producer, take over on B, wake it --------------------
        task, first = await start_turn(client, a, words=55)  # past the 5 s checkpoint
        a.freeze()
        try:
            recovery = await recover(
                client,
                b.base,
                user=USER,
                message_id=first.message_id or "",
                session_id=first.session_id or "",
                start_index=first.last_index + 1,
            )
        finally:
            a.wake()
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
        assert recovery.resumed is not None, "B never took the turn over"
        assert_complete(recovery, first)
        resumed_from = len(recovery.resumed.contents[0].split())
        assert resumed_from > 1, "the takeover did not resume from a checkpoint"
        sid = first.session_id or ""

        async def finished() -> bool:
            held = await durable(url, sid)
            return len(held["transcript"]) == 2

        await wait_until(finished)
        before = await durable(url, sid)
        await asyncio.sleep(5.0)  # A runs again: heartbeat refused, its last writes fenced
        after = await durable(url, sid)
        assert (
            after["transcript"]
            == before["transcript"]
            == [("user", "count for me"), ("assistant", answer())]
        )
        assert after["state"] == before["state"]
        assert list(after["state"].values()) == [{"done": WORDS}]  # B's final checkpoint
        assert after["recording"] is None or after["recording"] == before["recording"]
        assert after["info"].last_turn_status == "complete"

        # --- round 2: kill the producer, a second screen on B, recover on B ------------
        task, first = await start_turn(client, a, words=55)
        mid, sid = first.message_id or "", first.session_id or ""
        screen = asyncio.create_task(
            recover(
                client,
                b.base,
                user=USER,
                message_id=mid,
                session_id=sid,
                start_index=0,
                resume=False,
            )
        )
        await asyncio.sleep(0.5)
        with contextlib.suppress(httpx.HTTPError):
            await client.post(f"{a.base}/perf/kill", timeout=5)
        killed_at = time.monotonic()
        with contextlib.suppress(BaseException):
            await task
        recovery = await recover(
            client,
            b.base,
            user=USER,
            message_id=mid,
            session_id=sid,
            start_index=first.last_index + 1,
        )
        finished_at = time.monotonic()
        assert recovery.resumed is not None and recovery.resumed.first_event_at is not None
        assert_complete(recovery, first)
        seen = await asyncio.wait_for(screen, 120)
        assert seen.final == answer(), "the second screen missed part of the answer"
        assert all(s.monotonic() for s in seen.streams)

        async def stored() -> bool:
            held = await durable(url, sid)
            return len(held["transcript"]) == 2

        await wait_until(stored)
        held = await durable(url, sid)
        assert held["transcript"] == [("user", "count for me"), ("assistant", answer())]

        # Another requester trying to resume the conversation is refused.
        intruder = await consume(
            client,
            "POST",
            f"{b.base}/chat/stream",
            user="intruder",
            params={"tenant": TENANT, "resume": "true", "message_id": mid},
            body=turn_body(sid),
        )
        assert intruder.status == 403, (intruder.status, intruder.body)
        assert USER not in str(intruder.body), "the 403 named an owner the intruder cannot see"

        times = {
            "backend": name,
            "detect_s": round((recovery.detected_at or finished_at) - killed_at, 3),
            "takeover_s": round(recovery.resumed.first_event_at - killed_at, 3),
            "finish_s": round(finished_at - killed_at, 3),
            "resumed_from_word": len(recovery.resumed.contents[0].split()),
            "words": WORDS,
        }
        KILL_ROUND_TIMES.append(times)
