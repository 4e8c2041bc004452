"""Stores: every store of one backend, with one lifecycle (connect, set up, close)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from datetime import datetime
from types import TracebackType

from .conversations import ConversationStore
from .oauth import OAuthRepository
from .pause_tokens import PauseTokenStore
from .recording import RecordingStore
from .state import AgentStateStore
from .supervision import SupervisionStore


class Capability:
    """Names of optional behaviours a backend declares; the suite gates tests on them."""

    MULTI_PROCESS = "multi_process"
    """Correct for many OS processes sharing one store (not only tasks in one process)."""
    DURABLE = "durable"
    """Acknowledged writes survive a restart of the process that made them."""
    NATIVE_TTL = "native_ttl"
    """Expired records disappear by themselves, without the sweeper."""
    CLUSTER = "cluster"
    """Runs unchanged on a sharded/clustered server."""
    SETTABLE_CLOCK = "settable_clock"
    """Takes a ``clock=`` option (a callable returning an aware datetime) as its store
    clock, so expiry can be checked at exact instants instead of by waiting."""


class Stores(ABC):
    """The bundle ``open_stores(url)`` yields. Use as ``async with``.

    Adapters set the six store attributes in ``__init__`` and implement ``_open``,
    ``_close`` and ``now``.
    """

    backend: str = ""
    capabilities: frozenset[str] = frozenset()

    supervision: SupervisionStore
    recording: RecordingStore
    state: AgentStateStore
    conversations: ConversationStore
    pause_tokens: PauseTokenStore
    oauth: OAuthRepository

    _opened: bool = False

    async def open(self) -> Stores:
        if not self._opened:
            await self._open()
            self._opened = True
        return self

    async def close(self) -> None:
        if self._opened:
            self._opened = False
            await self._close()

    async def __aenter__(self) -> Stores:
        return await self.open()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    @abstractmethod
    async def now(self) -> datetime:
        """The store's clock (timezone-aware UTC): the one liveness and expiry use."""

    @abstractmethod
    async def _open(self) -> None: ...

    @abstractmethod
    async def _close(self) -> None: ...
