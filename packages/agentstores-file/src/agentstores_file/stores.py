"""``FileStores``: every agentstores store on local files (the embedded default backend).

URLs: ``file:///absolute/path`` or ``file://./relative/path`` (relative to the working
directory when the bundle is created); ``file://./.agentstores`` is the library default.
Any number of processes on one machine may share a directory. ``flock`` does not work
across hosts over NFS: do not share one directory between machines.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any, TypeVar
from urllib.parse import unquote

from agentstores.errors import AgentStoresError, BackendUnavailableError, UsageError
from agentstores.keys import ConversationKey
from agentstores.models import (
    ClientInfo,
    ConversationInfo,
    LastTurnStatus,
    Page,
    RecordedEvent,
    StoredMessage,
    SupervisionRow,
    SupervisionView,
    TranscriptMessage,
    UserIntegration,
)
from agentstores.stores import (
    AgentStateStore,
    AppendRequest,
    ConversationStore,
    OAuthRepository,
    PauseTokenStore,
    RecordingStore,
    Stores,
    SupervisionStore,
    SweepRule,
    TranscriptQuery,
)

from .engine import Engine
from .fsio import FileIO, IOStats
from .plugin import BACKEND

T = TypeVar("T")

DEFAULT_WORKERS = 32
"""Threads of the process-wide pool where blocking file calls (flock waits, fsync) run.
One pool for every bundle of a process, so many bundles do not multiply threads."""


def path_from_url(url: str) -> str:
    """The directory a ``file://`` URL names, made absolute."""
    if not isinstance(url, str) or not url.lower().startswith("file://"):
        raise UsageError(f"not a file:// URL: {url!r}")
    rest = unquote(url[len("file://") :].split("?", 1)[0].split("#", 1)[0])
    if rest.startswith("/"):
        path = rest
    elif rest == "." or rest.startswith(("./", "../")) or rest == "..":
        path = os.path.abspath(rest)
    elif rest.startswith("localhost/"):
        path = rest[len("localhost") :]
    else:
        raise UsageError(
            f"file URLs look like file:///absolute/path or file://./relative/path, got {url!r}"
        )
    if "\x00" in path:
        raise UsageError("a file URL must not contain NUL")
    return os.path.normpath(path)


_shared: tuple[int, ThreadPoolExecutor] | None = None
_shared_lock = threading.Lock()


def shared_pool() -> ThreadPoolExecutor:
    """The process-wide pool every bundle without ``workers`` uses (made anew after a
    fork: a pool's threads do not survive into the child)."""
    global _shared
    with _shared_lock:
        if _shared is None or _shared[0] != os.getpid():
            pool = ThreadPoolExecutor(DEFAULT_WORKERS, thread_name_prefix="agentstores-file")
            _shared = (os.getpid(), pool)
        return _shared[1]


class _Runner:
    """Runs engine calls off the event loop: on the shared pool, or on a pool of the
    bundle's own when it asked for ``workers``."""

    def __init__(self, workers: int | None) -> None:
        self.workers = workers
        self.pool: ThreadPoolExecutor | None = None

    def start(self) -> None:
        if self.pool is None and self.workers is not None:
            self.pool = ThreadPoolExecutor(self.workers, thread_name_prefix="agentstores-file")

    async def stop(self) -> None:
        pool, self.pool = self.pool, None
        if pool is not None:
            await asyncio.to_thread(pool.shutdown, True)

    async def __call__(self, fn: Callable[..., T], *args: Any) -> T:
        pool = self.pool
        if pool is None:
            if self.workers is not None:
                self.start()
                pool = self.pool
            else:
                pool = shared_pool()
        return await asyncio.get_running_loop().run_in_executor(pool, fn, *args)


class _FileStore:
    def __init__(self, engine: Engine, run: _Runner) -> None:
        self.engine = engine
        self.run = run

    def translate_error(self, exc: Exception) -> AgentStoresError | None:
        """OS errors become ``BackendUnavailableError`` (nothing was committed; the
        engine raises ``UnknownOutcomeError`` itself once a rename has begun)."""
        if isinstance(exc, OSError):
            name = errno.errorcode.get(exc.errno or 0, "OSError")
            return BackendUnavailableError(f"file store I/O failed ({name}): {exc}")
        if isinstance(exc, RuntimeError) and "shutdown" in str(exc):
            return BackendUnavailableError("the file store bundle is closed")
        return None


class FileSupervisionStore(_FileStore, SupervisionStore):
    async def _compare_and_swap(
        self, key: ConversationKey, principal: str, expected_epoch: int | None, row: SupervisionRow
    ) -> bool:
        return await self.run(self.engine.sup_cas, key, principal, expected_epoch, row)

    async def _read(self, key: ConversationKey, principal: str) -> SupervisionView:
        row, now, fence = await self.run(self.engine.sup_read, key, principal)
        return SupervisionView(row, now, fence)

    async def _delete(
        self, key: ConversationKey, principal: str, message_id: str, epoch: int
    ) -> bool:
        return await self.run(self.engine.sup_delete, key, principal, message_id, epoch)


class FileRecordingStore(_FileStore, RecordingStore):
    async def _put(
        self, key: ConversationKey, principal: str, event: RecordedEvent, message_json: bytes
    ) -> bool:
        return await self.run(self.engine.rec_put, key, principal, event, message_json)

    async def _read(self, key: ConversationKey, principal: str) -> RecordedEvent | None:
        return await self.run(self.engine.rec_read, key, principal)

    async def _delete(
        self, key: ConversationKey, principal: str, message_id: str, epoch: int | None
    ) -> bool:
        return await self.run(self.engine.rec_delete, key, principal, message_id, epoch)


class FileAgentStateStore(_FileStore, AgentStateStore):
    async def _load(self, key: ConversationKey, principal: str) -> bytes | None:
        return await self.run(self.engine.state_load, key, principal)

    async def _save(
        self, key: ConversationKey, principal: str, blob: bytes, epoch: int | None
    ) -> None:
        await self.run(self.engine.state_save, key, principal, blob, epoch)

    async def _delete(self, key: ConversationKey, principal: str, epoch: int | None) -> None:
        await self.run(self.engine.state_delete, key, principal, epoch)


class FileConversationStore(_FileStore, ConversationStore):
    async def _append_messages(
        self, key: ConversationKey, principal: str, request: AppendRequest
    ) -> list[StoredMessage]:
        messages = list(request.messages)
        create_if_absent, last_turn_status = request.create_if_absent, request.last_turn_status
        expected_last_message_id: Any = request.expected_tail
        epoch, title, expires_at = request.epoch, request.title, request.expires_at
        call = functools.partial(
            self.engine.append,
            key,
            principal,
            messages,
            create_if_absent=create_if_absent,
            last_turn_status=last_turn_status,
            expected_last_message_id=expected_last_message_id,
            epoch=epoch,
            title=title,
            expires_at=expires_at,
        )
        return await self.run(call)

    async def _set_last_turn_status(
        self, key: ConversationKey, principal: str, status: LastTurnStatus, epoch: int | None
    ) -> None:
        await self.run(self.engine.set_last_turn_status, key, principal, status, epoch)

    async def _set_title(
        self, key: ConversationKey, principal: str, title: str | None, epoch: int | None
    ) -> None:
        await self.run(self.engine.set_title, key, principal, title, epoch)

    async def _set_shared(
        self, key: ConversationKey, principal: str, with_principal: str, shared: bool
    ) -> None:
        await self.run(self.engine.set_shared, key, principal, with_principal, shared)

    async def _truncate(
        self, key: ConversationKey, principal: str, message_id: str, epoch: int | None
    ) -> int:
        return await self.run(self.engine.truncate, key, principal, message_id, epoch)

    async def _branch(
        self, key: ConversationKey, principal: str, message_id: str, new_key: ConversationKey
    ) -> None:
        await self.run(self.engine.branch, key, principal, message_id, new_key)

    async def _erase(
        self, key: ConversationKey, principal: str | None, rule: SweepRule | None
    ) -> bool:
        return await self.run(self.engine.erase, key, principal, rule)

    async def _get_transcript(
        self, key: ConversationKey, principal: str, query: TranscriptQuery
    ) -> list[TranscriptMessage]:
        return await self.run(self.engine.get_transcript, key, principal, query)

    async def _recent(
        self, key: ConversationKey, principal: str, limit: int
    ) -> list[StoredMessage]:
        return await self.run(self.engine.recent, key, principal, limit)

    async def _history(self, key: ConversationKey, principal: str) -> list[StoredMessage]:
        return await self.run(self.engine.history, key, principal)

    async def _read_messages(
        self, key: ConversationKey, principal: str, start: int, limit: int | None
    ) -> list[StoredMessage]:
        return await self.run(self.engine.read_messages, key, principal, start, limit)

    async def _get_conversation(
        self, key: ConversationKey, principal: str
    ) -> ConversationInfo | None:
        return await self.run(self.engine.get_conversation, key, principal)

    async def _list_conversations(
        self, tenant: str, principal: str, limit: int, cursor: str | None
    ) -> Page:
        return await self.run(self.engine.list_conversations, tenant, principal, limit, cursor)

    async def _find_sweepable(self, rule: SweepRule, limit: int) -> list[ConversationKey]:
        return await self.run(self.engine.find_sweepable, rule, limit)


class FilePauseTokenStore(_FileStore, PauseTokenStore):
    async def _put(
        self,
        token_id: str,
        key: ConversationKey,
        principal: str,
        payload_json: bytes,
        expires_at: datetime,
        epoch: int | None,
    ) -> None:
        await self.run(
            self.engine.token_put, token_id, key, principal, payload_json, expires_at, epoch
        )

    async def _claim(self, token_id: str, key: ConversationKey, principal: str) -> bytes:
        return await self.run(self.engine.token_claim, token_id, key, principal)

    async def _abandon(self, token_id: str, key: ConversationKey, principal: str) -> None:
        await self.run(self.engine.token_abandon, token_id, key, principal)


class FileOAuthRepository(_FileStore, OAuthRepository):
    async def _list_user_integrations(
        self, tenant: str, user: str, server_names: list[str] | None
    ) -> list[UserIntegration]:
        return await self.run(self.engine.oauth_list_users, tenant, user, server_names)

    async def _get_user_integration(
        self, tenant: str, user: str, server_name: str
    ) -> UserIntegration | None:
        return await self.run(self.engine.oauth_get_user, tenant, user, server_name)

    async def _find_by_pending_state(self, state: str) -> UserIntegration | None:
        return await self.run(self.engine.oauth_find_pending, state)

    async def _save_user_integration(self, record: UserIntegration) -> None:
        await self.run(self.engine.oauth_save_user, record)

    async def _delete_user_integration(self, tenant: str, user: str, server_name: str) -> bool:
        return await self.run(self.engine.oauth_delete_user, tenant, user, server_name)

    async def _list_client_info(
        self, tenant: str, server_names: list[str] | None
    ) -> list[ClientInfo]:
        return await self.run(self.engine.oauth_list_clients, tenant, server_names)

    async def _get_client_info(self, tenant: str, server_name: str) -> ClientInfo | None:
        return await self.run(self.engine.oauth_get_client, tenant, server_name)

    async def _save_client_info(self, record: ClientInfo) -> None:
        await self.run(self.engine.oauth_save_client, record)


class FileStores(Stores):
    """``file:///abs/path`` or ``file://./relative``: every store in one directory.

    Options:

    - ``fsync`` (default True): False keeps crash safety against a killed process but
      not against power loss.
    - ``workers``: give the bundle a pool of that many threads of its own for blocking
      file calls; by default every bundle of a process shares one pool of
      :data:`DEFAULT_WORKERS` threads.
    - ``clock``: a callable returning an aware datetime (default: the local clock).
    - ``tombstone_ttl``: timedelta, default 30 days.
    - ``io_stats`` (an :class:`IOStats` counting every read and write) or ``io`` (a
      :class:`FileIO` to route every file operation through).
    """

    backend = "file"
    capabilities = BACKEND.capabilities
    engine_class: type[Engine] = Engine
    """The storage engine; a subclass may swap it (tests do, to plant a known flaw)."""

    supervision: FileSupervisionStore
    recording: FileRecordingStore
    state: FileAgentStateStore
    conversations: FileConversationStore
    pause_tokens: FilePauseTokenStore
    oauth: FileOAuthRepository

    def __init__(
        self,
        url: str = "file://./.agentstores",
        *,
        fsync: bool = True,
        workers: int | None = None,
        clock: Callable[[], datetime] | None = None,
        tombstone_ttl: timedelta | None = None,
        io_stats: IOStats | None = None,
        io: FileIO | None = None,
    ) -> None:
        self.url = url
        self.path = path_from_url(url)
        if workers is not None and (not isinstance(workers, int) or workers < 1):
            raise UsageError(f"workers must be a positive int or None, got {workers!r}")
        if io is None:
            io = FileIO(fsync=bool(fsync), stats=io_stats)
        self.io = io
        self.engine = self.engine_class(
            self.path,
            io=io,
            clock=clock,
            tombstone_ttl=tombstone_ttl if tombstone_ttl is not None else timedelta(days=30),
        )
        self._runner = _Runner(workers)
        self.supervision = FileSupervisionStore(self.engine, self._runner)
        self.recording = FileRecordingStore(self.engine, self._runner)
        self.state = FileAgentStateStore(self.engine, self._runner)
        self.conversations = FileConversationStore(self.engine, self._runner)
        self.pause_tokens = FilePauseTokenStore(self.engine, self._runner)
        self.oauth = FileOAuthRepository(self.engine, self._runner)

    async def now(self) -> datetime:
        return self.engine.now()

    async def _open(self) -> None:
        self._runner.start()
        try:
            await self._runner(self.engine.setup)
        except OSError as exc:
            await self._runner.stop()
            raise BackendUnavailableError(f"cannot use {self.path} as a file store: {exc}") from exc

    async def _close(self) -> None:
        await self._runner.stop()


__all__ = ["DEFAULT_WORKERS", "FileStores", "path_from_url"]
