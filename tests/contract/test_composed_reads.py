"""The whole contract suite against the ABC's composed reads.

``ConversationStore`` implements ``_recent``, ``_history`` and ``_get_transcript`` from
``_read_messages`` and ``_get_conversation``; a new adapter may rely on them. Here the
reference backend drops its own versions of the three, so the suite judges the composed
ones (and the read-consistency retry under its concurrent tests).
"""

from __future__ import annotations

import dataclasses
import uuid
from datetime import timedelta
from typing import Any

import pytest

from agentstores import ConflictError, ConversationKey, Message
from agentstores.memory.stores import MemoryConversationStore, MemoryStores
from agentstores.stores import ConversationStore
from agentstores.stores.composed_reads import ATTEMPTS
from agentstores_contract import BackendUnderTest, ContractSuite

SECOND = timedelta(seconds=1)


class ComposedReadsStore(MemoryConversationStore):
    """The reference conversation store with the three reads left to the ABC."""

    _get_transcript = ConversationStore._get_transcript
    _recent = ConversationStore._recent
    _history = ConversationStore._history


def _open(url: str, **options: Any) -> MemoryStores:
    bundle = MemoryStores(url, **options)
    bundle.conversations = ComposedReadsStore(bundle.data)
    return bundle


class TestComposedReads(ContractSuite):
    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls) -> BackendUnderTest:
        url = f"memory://composed-{uuid.uuid4().hex}"
        return BackendUnderTest(
            open=lambda: _open(url),
            open_with=lambda **options: _open(url, **options),
            capabilities=MemoryStores.capabilities,
            name="memory (composed reads)",
        )


class EverChanging(ComposedReadsStore):
    """A conversation whose ``updated_at`` differs at every metadata read."""

    calls = 0

    async def _get_conversation(self, key: ConversationKey, principal: str) -> Any:
        info = await super()._get_conversation(key, principal)
        assert info is not None
        EverChanging.calls += 1
        return dataclasses.replace(info, updated_at=info.updated_at + EverChanging.calls * SECOND)


async def test_a_read_that_never_sees_a_stable_conversation_raises_conflict() -> None:
    bundle = MemoryStores(f"memory://composed-{uuid.uuid4().hex}")
    bundle.conversations = EverChanging(bundle.data)
    key = ConversationKey("t", "s")
    async with bundle:
        await bundle.conversations.append_messages(key, "alice", [Message("m1", "user", "hi")])
        EverChanging.calls = 0
        with pytest.raises(ConflictError):
            await bundle.conversations.recent(key, "alice", 5)
        assert EverChanging.calls == 2 * ATTEMPTS
