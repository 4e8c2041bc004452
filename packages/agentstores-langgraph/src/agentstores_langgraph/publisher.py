"""TurnPublisher: mirror a thread's completed turns into its conversation's transcript.

Checkpoints hold the messages, but reading them back walks checkpoints and gives only
checkpoint-granular times. After each completed turn a graph (or the code that ran it)
calls :meth:`TurnPublisher.publish`; the turn's new messages are appended to the same
conversation as ordinary transcript messages, with store-clock ``created_at``, so
``conv.message(0, speaker="user")``, ``conv.recent(n)`` and time ranges read the
conversation store's indexes and never a checkpoint.

Publication is idempotent (a message keeps its LangChain id, and the log skips ids it
holds) and fenced: it carries the lease's ambient epoch, or ``epoch``, so a worker that
lost the turn cannot publish.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig

from agentstores import ConversationKey, Message, StoredMessage, Stores, UsageError
from agentstores.keys import MAX_ID_BYTES

from .identity import Identities, IdentityResolver
from .rows import kind_of
from .saver import EPOCH
from .transcript import role_of

BATCH = 500
SCAN = 64
"""Rows one backward read takes while looking for the last published message."""


def message_id(message: Any, position: int) -> str:
    """The transcript id of a LangChain message: its own id when it fits the store's id
    rules, a digest of it when too long, its position in the thread when it has none."""
    raw = getattr(message, "id", None)
    if not raw:
        return f"lc-pos-{position}"
    text = str(raw)
    if "\x00" in text or len(text.encode("utf-8")) > MAX_ID_BYTES or text.startswith("lg"):
        return "lc-" + hashlib.sha256(text.encode("utf-8")).hexdigest()
    return text


def to_message(message: Any, position: int) -> Message:
    """The transcript message for a LangChain message: role by type, content as given
    (a string or content blocks), and what a tool round needs in the metadata."""
    metadata: dict[str, Any] = {"langchain_type": getattr(message, "type", None)}
    for name in ("tool_call_id", "name"):
        value = getattr(message, name, None)
        if value:
            metadata[name] = value
    tool_calls = getattr(message, "tool_calls", None)
    if tool_calls:
        metadata["tool_calls"] = [
            {"id": c.get("id"), "name": c.get("name"), "args": c.get("args")} for c in tool_calls
        ]
    return Message(message_id(message, position), role_of(message), message.content, metadata)


class TurnPublisher:
    """Mirrors LangGraph messages into ``stores``' conversation for the thread, as one
    fixed ``tenant`` and ``principal`` or as the application's ``identity`` resolver
    says (as :class:`~agentstores_langgraph.AgentStoresSaver`; see :mod:`.identity`)."""

    def __init__(
        self,
        stores: Stores,
        *,
        tenant: str | None = None,
        principal: str = "",
        identity: IdentityResolver | None = None,
    ) -> None:
        self.identities = Identities(tenant, principal, identity)
        self.stores = stores
        self.tenant = tenant
        self.principal = principal

    def _target(self, thread: str | RunnableConfig) -> tuple[ConversationKey, str, int | None]:
        if isinstance(thread, str):
            tenant, principal = self.identities.of_thread(thread)
            return ConversationKey(tenant, thread), principal, None
        configurable = thread.get("configurable") or {}
        if "thread_id" not in configurable:
            raise UsageError("config['configurable'] must name a thread_id")
        tenant, principal = self.identities(thread)
        key = ConversationKey(tenant, str(configurable["thread_id"]))
        return key, principal, configurable.get(EPOCH)

    async def last_published(self, thread: str | RunnableConfig) -> str | None:
        """The id of the newest mirrored message (checkpoint rows are skipped: a walk
        over at most the rows written since the last publication)."""
        key, principal, _ = self._target(thread)
        info = await self.stores.conversations.get_conversation(key, principal)
        end = 0 if info is None else info.message_count
        while end > 0:
            start = max(0, end - SCAN)
            rows = await self.stores.conversations.read_messages(
                key, principal, start=start, limit=end - start
            )
            for row in reversed(rows):
                if kind_of(row) is None:
                    return row.id
            end = start
        return None

    async def publish(
        self,
        thread: str | RunnableConfig,
        messages: Sequence[Any],
        *,
        epoch: int | None = None,
    ) -> list[StoredMessage]:
        """Append the messages of ``messages`` (the thread's whole ``messages`` channel,
        oldest first) that come after the last published one; a retry is a no-op.

        Returns:
            The transcript messages this call stored.

        Raises:
            FencedError: the epoch is below the conversation's fence (nothing lands).
            ErasedError, NotOwnedError: as the conversation store raises.
        """
        key, principal, given = self._target(thread)
        epoch = epoch if epoch is not None else given
        converted = [to_message(m, i) for i, m in enumerate(messages)]
        last = await self.last_published(thread)
        ids = [m.id for m in converted]
        pending = converted[ids.index(last) + 1 :] if last in ids else converted
        stored: list[StoredMessage] = []
        for start in range(0, len(pending), BATCH):
            stored += await self.stores.conversations.append_messages(
                key, principal, pending[start : start + BATCH], epoch=epoch
            )
        return stored


__all__ = ["TurnPublisher", "message_id", "to_message"]
