"""Who a run acts as comes from the application: a fixed identity or its resolver, never
a message's ``metadata``, which Pydantic AI's UI adapters fill from what a browser sends."""

from __future__ import annotations

import contextvars

import pytest

from agentstores import UsageError, open_stores
from agentstores_pydantic_ai import CLIENT_IDENTITY_KEYS, AgentStoresHistory

from .agents import tool_agent

CURRENT_USER: contextvars.ContextVar[tuple[str, str]] = contextvars.ContextVar("user")
"""What an application's authentication sets for the request it serves."""


@pytest.mark.parametrize("key", CLIENT_IDENTITY_KEYS)
async def test_a_message_naming_an_identity_is_refused(key: str) -> None:
    async with open_stores("memory://pyai-identity") as stores:
        history = AgentStoresHistory(stores, tenant="acme", principal="mallory")
        start = await history.load("s")
        run = await tool_agent().run("hi", metadata={"x": 1})
        messages = run.new_messages()
        messages[0].metadata = {key: "alice"}
        with pytest.raises(UsageError, match=key):
            await history.append("s", messages, after=start)
        assert await history.conversation("s").info() is None


async def test_a_resolver_decides_whose_history_a_call_touches() -> None:
    async with open_stores("memory://pyai-resolver") as stores:
        history = AgentStoresHistory(stores, identity=lambda session: CURRENT_USER.get())
        agent = tool_agent()
        CURRENT_USER.set(("acme", "alice"))
        result = await history.run(agent, "s", "hello")
        assert await history.load("s") == result.all_messages()
        CURRENT_USER.set(("acme", "bob"))
        assert list(await history.load("s")) == []
        CURRENT_USER.set(("other", "alice"))
        assert list(await history.load("s")) == []
        CURRENT_USER.set(("acme", "alice"))
        assert history.conversation("s").principal == "alice"


def test_an_identity_is_the_applications_and_well_formed() -> None:
    stores = object()
    with pytest.raises(UsageError):
        AgentStoresHistory(stores, principal="alice")  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        AgentStoresHistory(
            stores,  # type: ignore[arg-type]
            tenant="acme",
            principal="alice",
            identity=lambda s: ("acme", "alice"),
        )
    with pytest.raises(UsageError):
        AgentStoresHistory(stores, tenant="", principal="alice")  # type: ignore[arg-type]
    bad = AgentStoresHistory(stores, identity=lambda s: "alice")  # type: ignore[arg-type,return-value]
    with pytest.raises(UsageError):
        bad.conversation("s")


async def test_the_history_argument_is_the_stores() -> None:
    async with open_stores("memory://pyai-args") as stores:
        history = AgentStoresHistory(stores, tenant="acme", principal="alice")
        with pytest.raises(UsageError):
            await history.run(tool_agent(), "s", "hi", message_history=[])
        other = await history.load("other")
        with pytest.raises(UsageError):
            await history.append("s", [], after=other)
        with pytest.raises(UsageError):
            await history.append("s", [], after=[])  # type: ignore[arg-type]
