"""A resent non-streamed request through the SDK's own app stores its user turn once.

A client whose ``POST /chat/response`` failed (the model timed out: 500) or whose answer
was lost on the way resends the same request. The server gives every request a new
turn id, so only the client can say it is the same message: a user message that carries
its own ``message_id`` is stored once however often it is sent, and a different message
under a used id is refused (400) rather than dropped. Served: ``setup_app(**zav_stores(url))``
over ASGI with its lifespan, on memory and file.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest
from zav.agents_sdk import ChatAgent, ChatMessage
from zav.agents_sdk.domain.chat_agent_registry import ChatAgentClassRegistry
from zav.agents_sdk.domain.chat_message import ChatMessageSender

from agentstores import ConversationKey, open_stores
from tests.zav.sdk_app import bridged_app

TENANT = "retry"
USER = "retry-user"


class Timeouts:
    """How many more times the model times out, and how many answers it gave."""

    model: ClassVar[int] = 0
    answers: ClassVar[int] = 0


@ChatAgentClassRegistry.register()
class FlakyAgent(ChatAgent):
    """Answers ``answer <n>`` (n counts every answer given), after its model timed out
    as often as :class:`Timeouts` says."""

    agent_name = "flaky_answerer"

    async def execute(self, conversation: list[ChatMessage]) -> ChatMessage | None:
        if Timeouts.model:
            Timeouts.model -= 1
            raise TimeoutError("the model did not answer in time")
        Timeouts.answers += 1
        return ChatMessage(sender=ChatMessageSender.BOT, content=f"answer {Timeouts.answers}")


@pytest.fixture
async def client(url: str, tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    """The SDK's app on ``url`` through the bridge, over ASGI."""
    Timeouts.model = Timeouts.answers = 0
    setup = {"agent_identifier": "flaky", "agent_name": "flaky_answerer", "agent_configuration": {}}
    setups = tmp_path / "agent_setups.json"
    setups.write_text(json.dumps([setup]))
    app = bridged_app(str(setups), url)
    # As uvicorn serves it: the app's lifespan runs around the requests, and its state
    # (the SDK keeps its message bus there) is in every request's scope.
    async with app.router.lifespan_context(app) as state:

        async def served(scope: Any, receive: Any, send: Any) -> None:
            await app({**scope, "state": dict(state or {})}, receive, send)

        transport = httpx.ASGITransport(app=served, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as http:
            yield http


async def send(
    client: httpx.AsyncClient, user_message: dict[str, Any], session_id: str
) -> httpx.Response:
    """One stateful ``POST /chat/response`` turn with ``user_message``."""
    body = {
        "agent_identifier": "flaky",
        "conversation": [{"sender": "user", **user_message}],
        "stateful": True,
        "session_id": session_id,
    }
    return await client.post(
        "/chat/response",
        params={"tenant": TENANT},
        json=body,
        headers={"requester-uuid": USER},
        timeout=60,
    )


async def held(url: str, session_id: str) -> tuple[str | None, list[tuple[str, Any]]]:
    """The conversation's last turn status and its transcript (role, content)."""
    async with open_stores(url) as stores:
        key = ConversationKey(TENANT, session_id)
        info = await stores.conversations.get_conversation(key, USER)
        assert info is not None
        rows = await stores.conversations.read_messages(key, USER)
        return info.last_turn_status, [(m.role, m.content) for m in rows]


async def test_a_resent_named_user_turn_is_stored_once(client: httpx.AsyncClient, url: str) -> None:
    sid = uuid.uuid4().hex
    hello = {"content": "hello", "message_id": "client-1"}
    Timeouts.model = 1  # the first send stores the user turn, then the model times out
    assert (await send(client, hello, sid)).status_code == 500
    assert await held(url, sid) == ("errored", [("user", "hello")])
    resent = await send(client, hello, sid)
    assert resent.status_code == 201, resent.text
    assert resent.json()["conversation"][-1]["content"] == "answer 1"
    assert await held(url, sid) == ("complete", [("user", "hello"), ("assistant", "answer 1")])
    # Its answer lost on the way, the client sends it once more: the user turn is still
    # stored once; the server ran the turn again (a new turn id) and stored its answer.
    again = await send(client, hello, sid)
    assert again.status_code == 201, again.text
    assert await held(url, sid) == (
        "complete",
        [("user", "hello"), ("assistant", "answer 1"), ("assistant", "answer 2")],
    )


async def test_unnamed_user_turns_with_the_same_words_are_each_kept(
    client: httpx.AsyncClient, url: str
) -> None:
    sid = uuid.uuid4().hex
    for _ in range(2):
        assert (await send(client, {"content": "yes"}, sid)).status_code == 201
    assert await held(url, sid) == (
        "complete",
        [("user", "yes"), ("assistant", "answer 1"), ("user", "yes"), ("assistant", "answer 2")],
    )


async def test_another_message_under_a_used_id_is_refused_not_dropped(
    client: httpx.AsyncClient, url: str
) -> None:
    sid = uuid.uuid4().hex
    assert (await send(client, {"content": "hello", "message_id": "c-1"}, sid)).status_code == 201
    before = await held(url, sid)
    clash = await send(client, {"content": "goodbye", "message_id": "c-1"}, sid)
    assert clash.status_code == 400, clash.text
    assert "c-1" in clash.json()["detail"]
    assert await held(url, sid) == before
