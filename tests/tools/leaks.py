"""Where a tool could show a secret: the command lines of the processes it starts.

Any local user reads any process's command line (``/proc/PID/cmdline``); only the
process's own user reads its environment. :class:`ChildCommandLines` records every
command line seen among this process's descendants while it is open.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from types import TracebackType
from urllib.parse import quote, urlsplit, urlunsplit

PASSWORD = "s3cret-pw"
"""The password the leak tests put in a URL; trust authentication accepts any."""


def with_password(url: str, password: str = PASSWORD) -> str:
    """``url`` with ``password`` after its user name."""
    parts = urlsplit(url)
    user, _, host = parts.netloc.rpartition("@")
    user = user.partition(":")[0]
    netloc = f"{user}:{quote(password, safe='')}@{host}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def descendants(root: int) -> list[int]:
    """The pids of every process below ``root`` (children, their children, ...)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:  # gone meanwhile
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    found: list[int] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def command_line(pid: int) -> str | None:
    """What any local user reads as ``pid``'s command line (None once it is gone)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return raw.replace(b"\0", b" ").decode(errors="replace").strip() or None


class ChildCommandLines:
    """Records the command line of every descendant of this process while open, polling
    every ``interval`` seconds on a thread."""

    def __init__(self, interval: float = 0.02) -> None:
        self.interval = interval
        self.lines: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        me = os.getpid()
        while not self._stop.wait(self.interval):
            for pid in descendants(me):
                line = command_line(pid)
                if line:
                    self.lines.add(line)

    def __enter__(self) -> ChildCommandLines:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()
