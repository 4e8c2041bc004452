"""A counting wrapper around real Stores: how many calls and rows the bridge reads."""

from __future__ import annotations

from collections import Counter
from typing import Any

from agentstores import Stores


class CountingConversations:
    """Delegates to a real ConversationStore, counting each call and the rows it returned."""

    def __init__(self, real: Any) -> None:
        self._real = real
        self.calls: Counter[str] = Counter()
        self.rows: Counter[str] = Counter()

    def reset(self) -> None:
        self.calls.clear()
        self.rows.clear()

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._real, name)
        if not callable(method):
            return method

        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            result = await method(*args, **kwargs)
            if isinstance(result, list):
                self.rows[name] += len(result)
            elif hasattr(result, "items") and isinstance(result.items, list):
                self.rows[name] += len(result.items)
            elif hasattr(result, "messages") and isinstance(result.messages, list):
                self.rows[name] += len(result.messages)
            return result

        return counted


class CountingStores:
    """The real stores with a counting conversation store (everything else as is)."""

    def __init__(self, real: Stores) -> None:
        self._real = real
        self.conversations = CountingConversations(real.conversations)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class GatedConversations:
    """Delegates to a real ConversationStore; the first ``append_messages`` that carries
    messages waits until every party of ``barrier`` reached its own (or ``timeout``)."""

    def __init__(self, real: Any, barrier: Any, timeout: float) -> None:
        self._real = real
        self._barrier = barrier
        self._timeout = timeout
        self._done = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    async def append_messages(self, key: Any, principal: str, messages: Any, **kwargs: Any) -> Any:
        import asyncio
        import contextlib

        if messages and not self._done:
            self._done = True
            with contextlib.suppress(asyncio.TimeoutError, asyncio.BrokenBarrierError):
                await asyncio.wait_for(self._barrier.wait(), self._timeout)
        return await self._real.append_messages(key, principal, messages, **kwargs)


class GatedStores:
    """The real stores whose first append waits at ``barrier`` (two servers' race)."""

    def __init__(self, real: Stores, barrier: Any, timeout: float) -> None:
        self._real = real
        self.conversations = GatedConversations(real.conversations, barrier, timeout)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)
