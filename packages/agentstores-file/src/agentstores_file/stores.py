"""``FileStores``: every agentstores store on local files (the embedded default backend).

URLs: ``file:///absolute/path`` or ``file://./relative/path`` (relative to the working
directory when the bundle is created); ``file://./.agentstores`` is the library default.
Any number of processes on one machine may share a directory. ``flock`` does not work
across hosts over NFS: do not share one directory between machines. The one URL option
is ``push`` (``?push=false``; see :mod:`.push`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime, timedelta
from urllib.parse import unquote

from agentstores.errors import BackendUnavailableError, UsageError
from agentstores.stores import Stores, kit

from ._base import DEFAULT_WORKERS, Runner
from .conversations import COPY_CHUNK, FileConversationStore
from .fsio import FileIO, IOStats
from .header import FileRoot
from .oauth import FileOAuthStore
from .pause_tokens import FilePauseTokenStore
from .plugin import BACKEND
from .push import ChangeWatcher
from .recording import FileRecordingStore
from .state import FileAgentStateStore
from .supervision import FileSupervisionStore
from .transcript import PROBE_CHUNK, TABLE_MIN


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
    path = os.path.normpath(path)
    if path == os.path.dirname(path):
        raise UsageError(
            f"{url!r} names the filesystem root; give the store a directory of its own, "
            "e.g. file:///var/lib/myapp/agentstores or file://./.agentstores"
        )
    return path


_OPTIONS_HINT = " (fsync, workers, clock and tombstone_ttl are keyword arguments)"
_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}


def push_option(url: str, push: bool | None) -> bool:
    """Whether a bundle checks for other processes' writes: the ``push`` keyword, else
    the URL's ``push`` option, else on (a write costs nothing more with it)."""
    chosen = True
    for _, value in kit.url_options(url, ("push",), backend="file", hint=_OPTIONS_HINT):
        text = value.strip().lower()
        if text not in _TRUE | _FALSE:
            raise UsageError(f"push must be true or false, got {value!r}", option="push")
        chosen = text in _TRUE
    if push is not None:
        if not isinstance(push, bool):
            raise UsageError(f"push must be a bool, got {push!r}", option="push")
        chosen = push
    return chosen


class FileStores(Stores):
    """``file:///abs/path`` or ``file://./relative``: every store in one directory.

    Options:

    - ``fsync`` (default True): False keeps crash safety against a killed process but
      not against power loss.
    - ``workers``: give the bundle a pool of that many threads of its own for blocking
      file calls; by default every bundle of a process shares one pool of
      :data:`DEFAULT_WORKERS` threads.
    - ``clock``: a callable returning an aware datetime (default: the local clock).
    - ``tombstone_ttl``: timedelta, default 30 days, at most 100 years.
    - ``io_stats`` (an :class:`IOStats` counting every read and write) or ``io`` (a
      :class:`FileIO` to route every file operation through).
    - ``push`` (default True, also ``?push=false`` on the URL): while open, a thread
      checks the files of the keys this process follows every few tens of milliseconds
      and wakes their followers when another process wrote them (:mod:`.push`).
    """

    backend = "file"
    capabilities = BACKEND.capabilities
    transcript_thresholds = (PROBE_CHUNK, TABLE_MIN, COPY_CHUNK)
    root_class: type[FileRoot] = FileRoot
    """The root directory's locks, headers and recovery every store shares; a subclass
    may swap it (tests do, to plant a known flaw)."""

    supervision: FileSupervisionStore
    recording: FileRecordingStore
    state: FileAgentStateStore
    conversations: FileConversationStore
    pause_tokens: FilePauseTokenStore
    oauth: FileOAuthStore

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
        push: bool | None = None,
    ) -> None:
        self.url = url
        self.path = path_from_url(url)
        self.push = push_option(url, push)
        ttl = kit.tombstone_ttl(tombstone_ttl)  # the kit's rule: positive, at most 100 years
        self.watcher: ChangeWatcher | None = None
        """The change check while open with push on."""
        if workers is not None and (not isinstance(workers, int) or workers < 1):
            raise UsageError(f"workers must be a positive int or None, got {workers!r}")
        if io is None:
            io = FileIO(fsync=bool(fsync), stats=io_stats)
        self.io = io
        self.root = self.root_class(
            self.path,
            io=io,
            clock=clock,
            tombstone_ttl=ttl,
        )
        self._runner = Runner(workers)
        self.supervision = FileSupervisionStore(self.root, self._runner)
        self.recording = FileRecordingStore(self.root, self._runner)
        self.state = FileAgentStateStore(self.root, self._runner)
        self.conversations = FileConversationStore(self.root, self._runner)
        self.pause_tokens = FilePauseTokenStore(self.root, self._runner)
        self.oauth = FileOAuthStore(self.root, self._runner)

    async def now(self) -> datetime:
        return self.root.now()

    async def _open(self) -> None:
        self._runner.start()
        try:
            await self._runner(self.root.setup)
        except OSError as exc:
            await self._runner.stop()
            raise BackendUnavailableError(f"cannot use {self.path} as a file store: {exc}") from exc
        if self.push:
            self.watcher = ChangeWatcher(self.root, self.wakeups)
            self.watcher.start()

    async def _close(self) -> None:
        watcher, self.watcher = self.watcher, None
        if watcher is not None:
            await watcher.close()
        await self._runner.stop()


__all__ = ["DEFAULT_WORKERS", "FileStores", "path_from_url"]
