"""Where a secret from a backend URL must never show: an error's text, its context, its
``__cause__``/``__context__`` chain, the log records of the call, and ``repr``s.

Each adapter's secret tests open a URL carrying :data:`SECRET` and hand everything the
caller could see to :func:`assert_hidden`.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Iterable, Iterator

SECRET = "Hunter2-s3cret-pw"
"""A password no message would contain by chance (no URL-special characters, so it
reaches every driver unchanged)."""


def chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and every exception it was raised from or while handling."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        todo.extend(e for e in (current.__cause__, current.__context__) if e is not None)
        if isinstance(current, BaseExceptionGroup):
            todo.extend(current.exceptions)


def shown_by(exc: BaseException) -> str:
    """Everything a caller can read off ``exc``: its traceback as printed (every chained
    error's text), and each chained error's ``repr``, ``args`` and ``context`` dict."""
    parts = ["".join(traceback.format_exception(exc))]
    for link in chain(exc):
        parts.append(repr(link))
        parts.append(repr(link.args))
        parts.append(repr(getattr(link, "context", None)))
        parts.extend(repr(note) for note in getattr(link, "__notes__", ()))
    return "\n".join(parts)


def assert_hidden(
    secret: str = SECRET,
    *,
    error: BaseException | None = None,
    records: Iterable[logging.LogRecord] = (),
    objects: Iterable[object] = (),
) -> None:
    """Fail, naming where, if ``secret`` shows in ``error``, a log record, or the
    ``repr``/``str`` of one of ``objects``."""
    if error is not None:
        text = shown_by(error)
        assert secret not in text, f"the secret shows in the error:\n{text}"
    for record in records:
        line = logging.Formatter().format(record)
        assert secret not in line, f"the secret shows in a log line: {line}"
    for obj in objects:
        for text in (repr(obj), str(obj)):
            assert secret not in text, f"the secret shows in {type(obj).__name__}: {text}"
