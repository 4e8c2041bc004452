"""The SDK's records through the bridge lose nothing (ChatMessage, OAuth), on memory and file."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cryptography.fernet import Fernet
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.shared.auth import OAuthToken
from zav.agents_sdk.domain.chat_conversation_store import ConversationNotOwnedError
from zav.agents_sdk.domain.chat_message import ChatMessage, ConversationContext, DocumentContext
from zav.agents_sdk.domain.chat_stream_recording_store import RecordedStreamEvent
from zav.agents_sdk.domain.chat_stream_supervision_store import (
    ChatStreamStatus,
    ChatStreamSupervision,
)

from agentstores import ConversationKey, UsageError
from agentstores_zav import (
    AgentStoresConversationStore,
    AgentStoresMCPOAuthRepository,
    AgentStoresRecordingStore,
    AgentStoresStateStore,
    AgentStoresSupervisionStore,
)
from agentstores_zav.conversation_fields import fields_of
from agentstores_zav.errors import ANOTHER_USER
from agentstores_zav.oauth import tokens_from_json, tokens_to_json
from tests.zav.strategies import TENANT, client_infos, full_messages, user_records

RUNNING, DONE = ChatStreamStatus.RUNNING, ChatStreamStatus.DONE
SETTINGS = settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def session() -> str:
    return uuid.uuid4().hex


def _named(message: ChatMessage) -> object:
    """Messages of one role under one ``message_id`` are one message (sent again, a
    no-op); the property is over distinct messages."""
    return (message.sender, message.message_id) if message.message_id else id(message)


@SETTINGS
@given(batch=st.lists(full_messages, min_size=1, max_size=4, unique_by=_named))
async def test_chat_messages_round_trip_through_the_transcript(bundles: Any, batch: list) -> None:
    store = AgentStoresConversationStore(bundles())
    sid = session()
    await store.append_messages(TENANT, "u1", sid, "agent", batch[:1])
    await store.append_messages(TENANT, "u1", sid, "agent", batch[1:], create_if_absent=False)
    got = await store.get_transcript(TENANT, "u1", sid)
    assert got == batch
    assert [m.model_fields_set for m in got] == [m.model_fields_set for m in batch]


@SETTINGS
@given(message=full_messages, index=st.integers(0, 2**40))
async def test_chat_messages_round_trip_through_the_recording(
    bundles: Any, message: ChatMessage, index: int
) -> None:
    store = AgentStoresRecordingStore(bundles())
    sid = session()
    await store.put(TENANT, "u1", sid, RecordedStreamEvent(index, message, "m1", 0))
    got = await store.read(TENANT, "u1", sid)
    assert got == RecordedStreamEvent(index, message, "m1", 0)


async def test_a_retried_publication_stores_nothing_twice(bundles: Any) -> None:
    bundle = bundles()
    store = AgentStoresConversationStore(bundle)
    supervision = AgentStoresSupervisionStore(bundle)
    sid = session()
    question = ChatMessage.as_user("same words")
    answer = ChatMessage.as_bot("an answer")

    async def send(turn: str, *, answered: bool) -> None:
        # As the SDK's handler does it: claim the slot, then record the user turn.
        await supervision.compare_and_swap(
            TENANT, "u1", sid, None, ChatStreamSupervision(RUNNING, 0.0, turn, 0)
        )
        await store.append_messages(TENANT, "u1", sid, "agent", [question])
        if answered:
            await store.append_messages(
                TENANT, "u1", sid, "agent", [answer], create_if_absent=False
            )
            await supervision.compare_and_swap(
                TENANT, "u1", sid, 0, ChatStreamSupervision(DONE, 0.0, turn, 0)
            )
            await supervision.delete(TENANT, "u1", sid, turn, 0)

    await asyncio.create_task(send("turn-1", answered=False))
    # The client retries the same turn (same message id) after losing the answer.
    await supervision.delete(TENANT, "u1", sid, "turn-1", 1)
    await asyncio.create_task(send("turn-1", answered=True))
    assert await store.get_transcript(TENANT, "u1", sid) == [question, answer]
    # The same words in a later turn are a new message.
    await asyncio.create_task(send("turn-2", answered=False))
    assert await store.get_transcript(TENANT, "u1", sid) == [question, answer, question]


async def test_the_bot_turn_does_not_resurrect_a_deleted_conversation(bundles: Any) -> None:
    bundle = bundles()
    store = AgentStoresConversationStore(bundle)
    sid = session()
    await store.append_messages(TENANT, "u1", sid, "agent", [ChatMessage.as_user("q")])
    stores = await bundle.stores()
    await stores.conversations.delete(ConversationKey(TENANT, sid), "u1")
    await store.append_messages(
        TENANT, "u1", sid, "agent", [ChatMessage.as_bot("a")], create_if_absent=False
    )
    assert await store.get_transcript(TENANT, "u1", sid) == []
    never = session()
    await store.append_messages(
        TENANT, "u1", never, "agent", [ChatMessage.as_bot("a")], create_if_absent=False
    )
    assert await store.get_transcript(TENANT, "u1", never) == []


async def test_another_requester_gets_conversation_not_owned(bundles: Any) -> None:
    bundle = bundles()
    store = AgentStoresConversationStore(bundle)
    sid = session()
    await store.append_messages(TENANT, "owner-7", sid, "agent", [ChatMessage.as_user("q")])
    with pytest.raises(ConversationNotOwnedError) as caught:
        await store.append_messages(TENANT, "intruder", sid, "agent", [ChatMessage.as_user("x")])
    assert caught.value.requester == "intruder" and caught.value.session_id == sid
    # The conversation is not shared with the intruder: the refusal (the 403 body is
    # its text) names nobody.
    assert caught.value.owner == ANOTHER_USER and "owner-7" not in str(caught.value)
    with pytest.raises(ConversationNotOwnedError) as caught:
        await store.set_last_turn_status(TENANT, "intruder", sid, "errored")
    assert "owner-7" not in str(caught.value)
    state = AgentStoresStateStore(bundle)
    with pytest.raises(ConversationNotOwnedError) as caught:
        await state.save(TENANT, "intruder", sid, {"d": {"x": 1}})
    assert caught.value.owner == ANOTHER_USER
    assert await store.get_transcript(TENANT, "owner-7", sid) == [ChatMessage.as_user("q")]


async def test_a_reader_it_is_shared_with_is_told_who_owns_it(bundles: Any) -> None:
    bundle = bundles()
    store = AgentStoresConversationStore(bundle)
    sid = session()
    await store.append_messages(TENANT, "owner-7", sid, "agent", [ChatMessage.as_user("q")])
    stores = await bundle.stores()
    await stores.conversations.share(ConversationKey(TENANT, sid), "owner-7", "reader")
    # The reader sees the owner in the conversation's info already ...
    info = await stores.conversations.get_conversation(ConversationKey(TENANT, sid), "reader")
    assert info is not None and info.owner == "owner-7"
    # ... so the refusal of its write names the owner, as the SDK's error means to.
    with pytest.raises(ConversationNotOwnedError) as caught:
        await store.append_messages(TENANT, "reader", sid, "agent", [ChatMessage.as_user("x")])
    assert caught.value.owner == "owner-7" and caught.value.requester == "reader"
    assert "'owner-7'" in str(caught.value)
    assert await store.get_transcript(TENANT, "reader", sid) == [ChatMessage.as_user("q")]


# --- MCP OAuth ---------------------------------------------------------------------


def _raw_text(value: Any) -> str:
    return json.dumps(value, default=str)


@SETTINGS
@given(data=st.data())
async def test_oauth_records_round_trip_and_are_encrypted_at_rest(bundles: Any, data: Any) -> None:
    bundle = bundles()
    repo = AgentStoresMCPOAuthRepository(bundle, keys=[Fernet.generate_key().decode()])
    user = f"user-{uuid.uuid4().hex[:8]}"
    servers = sorted({data.draw(st.sampled_from(["github", "jira", "drive"])) for _ in range(2)})
    records = [data.draw(user_records(user, s)) for s in servers]
    for record in records:
        await repo.save_user_integration(record)
    for record in records:
        assert await repo.get_user_integration(TENANT, user, record.server_name) == record
        if record.pending is not None:
            found = await repo.find_user_integration_by_pending_state(record.pending.state)
            assert found == record
    assert await repo.list_user_integrations(TENANT, user, servers) == records
    client = data.draw(client_infos)
    await repo.save_client_info(client)
    assert await repo.get_client_info(TENANT, "srv") == client
    assert await repo.list_client_info(TENANT, ["srv"]) == [client]
    # At rest (the repository under the bridge), no secret appears in clear.
    stores = await bundle.stores()
    for record in records:
        raw = await stores.oauth.get_user_integration(TENANT, user, record.server_name)
        text = _raw_text(raw.tokens) + (raw.pending.code_verifier if raw.pending else "")
        if record.tokens is not None:
            assert record.tokens.access_token not in text
            assert record.tokens.refresh_token is None or record.tokens.refresh_token not in text
        if record.pending is not None:
            assert record.pending.code_verifier not in text
    raw_client = await stores.oauth.get_client_info(TENANT, "srv")
    assert client.client_info.client_secret not in _raw_text(raw_client.client_info)
    assert await repo.delete_user_integration(TENANT, user, servers[0]) is True
    assert await repo.get_user_integration(TENANT, user, servers[0]) is None


def test_token_expiry_is_relative_to_the_store_clock() -> None:
    saved_at = datetime(2026, 1, 1, tzinfo=UTC)
    token = OAuthToken(access_token="a", expires_in=3600)
    stored = tokens_to_json(token, saved_at)
    assert tokens_from_json(stored, saved_at) == token
    assert tokens_from_json(stored, saved_at + timedelta(seconds=0.5)) == token
    later = tokens_from_json(stored, saved_at + timedelta(seconds=600))
    assert later.expires_in == 3000
    assert tokens_from_json(stored, saved_at + timedelta(days=1)).expires_in == 0
    no_expiry = OAuthToken(access_token="a")
    assert tokens_from_json(tokens_to_json(no_expiry, saved_at), saved_at) == no_expiry


async def test_oauth_needs_keys_or_an_explicit_plaintext_opt_in(bundles: Any) -> None:
    with pytest.raises(UsageError):
        AgentStoresMCPOAuthRepository(bundles())


async def test_conversation_fields_land_in_the_conversation_metadata(bundles: Any) -> None:
    bundle = bundles()
    store = AgentStoresConversationStore(bundle)
    sid = session()
    context = ConversationContext(
        document_context=DocumentContext(document_ids=["d1"], retrieval_unit="document")
    )
    await store.append_messages(
        TENANT,
        "u1",
        sid,
        "agent-1",
        [ChatMessage.as_user("q")],
        user_roles="admin",
        user_tenants="acme,beta",
        user_agent_id="ua-1",
        bot_params={"temperature": 0.5, "nested": {"k": [1, 2]}},
        last_turn_status="running",
        conversation_context=context,
    )
    # The bot turn passes no context: what was stored stays.
    await store.append_messages(
        TENANT,
        "u1",
        sid,
        "agent-1",
        [ChatMessage.as_bot("a")],
        bot_params={"temperature": 0.5, "nested": {"k": [1, 2]}},
        last_turn_status="complete",
        create_if_absent=False,
    )
    stores = await bundle.stores()
    info = await stores.conversations.get_conversation(ConversationKey(TENANT, sid), "u1")
    assert info is not None and info.last_turn_status == "complete"
    fields = fields_of(info.metadata)
    assert fields == {
        "agent_identifier": "agent-1",
        "bot_params": {"temperature": 0.5, "nested": {"k": [1, 2]}},
        "conversation_context": context.model_dump(mode="json", exclude_unset=True),
        "user_roles": "admin",
        "user_tenants": "acme,beta",
        "user_agent_id": "ua-1",
    }
    assert ConversationContext.model_validate(fields["conversation_context"]) == context
