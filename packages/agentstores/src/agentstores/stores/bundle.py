"""Stores: every store of one backend, with one lifecycle (connect, set up, close)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING

from ..capabilities import Capability, capability_set
from .conversations import ConversationStore
from .oauth import OAuthStore
from .pause_tokens import PauseTokenStore
from .recording import RecordingStore
from .state import AgentStateStore
from .supervision import SupervisionStore
from .wakeups import Wakeups

if TYPE_CHECKING:
    from ..conversation import Conversation
    from ..keys import ConversationKey


class Stores(ABC):
    """The bundle ``open_stores(url)`` yields. Use as ``async with``.

    Adapters set the six store attributes in ``__init__`` and implement ``now``; they
    override ``_open`` and ``_close`` when they hold connections or workers.
    """

    backend: str = ""
    capabilities: frozenset[Capability] = frozenset()
    transcript_thresholds: tuple[int, ...] = ()
    """Transcript lengths (in messages) at which this backend's code takes another path:
    windows, page, chunk and batch sizes. The contract suite grows a transcript past the
    largest, so each path is tested; declare every one."""

    supervision: SupervisionStore
    recording: RecordingStore
    state: AgentStateStore
    conversations: ConversationStore
    pause_tokens: PauseTokenStore
    oauth: OAuthStore

    _opened: bool = False
    _wakeups: Wakeups | None = None

    STORE_NAMES = ("supervision", "recording", "state", "conversations", "pause_tokens", "oauth")
    """The six store attributes."""

    @property
    def wakeups(self) -> Wakeups:
        """This bundle's wake-ups (see :mod:`.wakeups`): its stores' writes wake this
        process's watchers of the key; a backend that listens for other processes' writes
        wakes them too and sets ``wakeups.remote``. An adapter whose bundles share one
        process's data (the in-memory backend) sets ``_wakeups`` to one shared hub."""
        if self._wakeups is None:
            self._wakeups = Wakeups()
        return self._wakeups

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        # A name that is not a Capability is refused when the class is defined.
        cls.capabilities = capability_set(cls.capabilities)

    async def open(self) -> Stores:
        """Connect and set up (idempotent); returns the bundle.

        Raises:
            BackendUnavailableError: the backend cannot be reached or is not set up.
        """
        if not self._opened:
            for name in self.STORE_NAMES:
                getattr(self, name).wakeups = self.wakeups
            await self._open()
            self._opened = True
        return self

    async def close(self) -> None:
        """Release connections and workers (idempotent)."""
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

    def conversation(self, key: ConversationKey, principal: str) -> Conversation:
        """A handle on one conversation as ``principal`` sees it (see :class:`Conversation`)."""
        from ..conversation import Conversation

        return Conversation(self, key, principal)

    @abstractmethod
    async def now(self) -> datetime:
        """The store's clock (timezone-aware UTC): the one liveness and expiry use."""

    async def _open(self) -> None:
        """Connect and set up; nothing by default (a backend with nothing to connect)."""
        return None

    async def _close(self) -> None:
        """Release what ``_open`` took; nothing by default."""
        return None
