"""CheckpointTranscript: a thread's messages read out of any LangGraph saver.

It answers ``get_transcript(index, time_range, speaker, limit)`` and ``rehydrate(n)``
over the ``messages`` channel of the thread's latest checkpoint, with the rows
symfonic-core 9.12's ``get_transcript`` returns for the same checkpoints (the test
suite checks this against symfonic-core itself). Works over ``AgentStoresSaver``,
``InMemorySaver``, ``PostgresSaver``, ``MongoDBSaver`` or any ``BaseCheckpointSaver``.

Timestamps are checkpoint-granular: a message's ``timestamp`` is the ``ts`` of the
oldest checkpoint holding it (LangChain messages carry no time of their own), so a
time range selects by checkpoint, and finding them walks the thread's whole history.
For per-message store-clock timestamps and reads that do not walk checkpoints, mirror
completed turns into the conversation store with :class:`~.publisher.TurnPublisher`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver

from agentstores import UsageError

Speaker = Literal["user", "assistant", "all"]
Role = Literal["user", "assistant", "tool", "system", "other"]
_ROLES_BY_TYPE: dict[str, Role] = {
    "human": "user",
    "ai": "assistant",
    "tool": "tool",
    "system": "system",
}
_ROLES_BY_CLASS: dict[str, Role] = {
    "HumanMessage": "user",
    "AIMessage": "assistant",
    "ToolMessage": "tool",
    "SystemMessage": "system",
}


@dataclass(frozen=True, slots=True)
class CheckpointMessage:
    """One transcript row read from checkpoints.

    ``index`` counts within the speaker-filtered view; ``timestamp`` is the ``ts`` of
    the oldest checkpoint holding the message (None when no checkpoint places it).
    """

    index: int
    role: Role
    content: str
    message_id: str | None
    timestamp: datetime | None


@dataclass(frozen=True, slots=True)
class RehydratedTurn:
    """One user or assistant turn to replay into a restarted process's working memory."""

    speaker: Literal["user", "assistant"]
    content: str
    message_id: str | None


def role_of(message: Any) -> Role:
    """The row role of a LangChain message: by its ``type``, else its class name."""
    by_type = _ROLES_BY_TYPE.get(getattr(message, "type", None) or "")
    if by_type is not None:
        return by_type
    return _ROLES_BY_CLASS.get(type(message).__name__, "other")


def text_of(message: Any) -> str:
    """The message's content as one string: text blocks joined, any other block shown as
    ``[its type]`` so a row is never silently empty."""
    content = getattr(message, "content", "")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict):
                if block.get("type") == "text" or "text" in block:
                    parts.append(str(block.get("text", "")))
                else:
                    parts.append(f"[{block.get('type', 'block')}]")
        return "".join(parts)
    return str(content)


def _spoken_text(message: Any) -> str:
    """What rehydrate replays: text blocks only, stripped (non-text blocks dropped)."""
    content = getattr(message, "content", "")
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, list):
        parts: list[str] = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and (block.get("type") == "text" or "text" in block):
                parts.append(str(block.get("text", "")))
        return "".join(parts).strip()
    return str(content).strip()


class CheckpointTranscript:
    """Transcript reads over ``saver``'s checkpoints of one channel (``messages``)."""

    def __init__(self, saver: BaseCheckpointSaver[Any], *, channel: str = "messages") -> None:
        self.saver = saver
        self.channel = channel

    @staticmethod
    def _config(thread: str | RunnableConfig) -> RunnableConfig:
        if isinstance(thread, str):
            return {"configurable": {"thread_id": thread}}
        return thread

    async def messages(self, thread: str | RunnableConfig) -> list[Any]:
        """The latest checkpoint's messages, oldest first (``[]`` for no thread)."""
        found = await self.saver.aget_tuple(self._config(thread))
        if found is None:
            return []
        values = (found.checkpoint or {}).get("channel_values", {})
        return list(values.get(self.channel) or [])

    async def timestamps(self, thread: str | RunnableConfig) -> dict[str, datetime]:
        """Message id -> ``ts`` of the oldest checkpoint holding it (walks every
        checkpoint of the thread, newest first)."""
        stamps: dict[str, datetime] = {}
        async for found in self.saver.alist(self._config(thread)):
            checkpoint = found.checkpoint or {}
            raw = checkpoint.get("ts")
            if not raw:
                continue
            try:
                ts = datetime.fromisoformat(raw)
            except (TypeError, ValueError):
                continue
            for message in checkpoint.get("channel_values", {}).get(self.channel) or []:
                message_id = getattr(message, "id", None)
                if message_id:
                    stamps[message_id] = ts
        return stamps

    async def get_transcript(
        self,
        thread: str | RunnableConfig,
        *,
        index: int | None = None,
        time_range: tuple[datetime, datetime] | None = None,
        speaker: Speaker = "all",
        limit: int | None = None,
    ) -> list[CheckpointMessage]:
        """Rows of the thread: one by ``index`` (in the ``speaker`` view, negative from
        the end, ``[]`` out of range), those whose checkpoint ``ts`` is in ``time_range``
        (inclusive), or all; then the first ``limit``.

        Raises:
            UsageError: both ``index`` and ``time_range``, or an unknown speaker.
        """
        if index is not None and time_range is not None:
            raise UsageError("pass index or time_range, not both")
        if speaker not in ("user", "assistant", "all"):
            raise UsageError(f"unknown speaker {speaker!r}; expected user, assistant or all")
        messages = await self.messages(thread)
        if not messages:
            return []
        stamps = await self.timestamps(thread)
        rows: list[CheckpointMessage] = []
        for message in messages:
            role = role_of(message)
            if speaker != "all" and role != speaker:
                continue
            message_id = getattr(message, "id", None)
            rows.append(
                CheckpointMessage(
                    index=len(rows),
                    role=role,
                    content=text_of(message),
                    message_id=message_id,
                    timestamp=stamps.get(message_id) if message_id else None,
                )
            )
        if index is not None:
            position = index + len(rows) if index < 0 else index
            rows = [rows[position]] if 0 <= position < len(rows) else []
        elif time_range is not None:
            start, end = time_range
            rows = [r for r in rows if r.timestamp is not None and start <= r.timestamp <= end]
        if limit is not None and limit >= 0:
            rows = rows[:limit]
        return rows

    async def rehydrate(self, thread: str | RunnableConfig, n: int) -> list[RehydratedTurn]:
        """The last ``n`` user/assistant messages whose text is not blank, oldest first:
        what a restarted process replays into its working memory (tool and system
        messages are not turns)."""
        if n <= 0:
            return []
        turns: list[RehydratedTurn] = []
        for message in await self.messages(thread):
            role = role_of(message)
            if role not in ("user", "assistant"):
                continue
            text = _spoken_text(message)
            if text:
                speaker: Literal["user", "assistant"] = "user" if role == "user" else "assistant"
                turns.append(RehydratedTurn(speaker, text, getattr(message, "id", None)))
        return turns[-n:]


__all__ = ["CheckpointMessage", "CheckpointTranscript", "RehydratedTurn", "role_of", "text_of"]
