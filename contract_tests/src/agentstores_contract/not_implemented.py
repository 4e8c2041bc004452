"""Which backend methods a failing test ran into ``NotImplementedError`` from.

A half-written backend (the template, or an adapter in progress) raises it from every
method it lacks; a report then says "not implemented: <method>" instead of a trace.
:class:`~agentstores.errors.UnsupportedError` is a typed answer, not a missing method,
and is not counted.
"""

from __future__ import annotations

from collections.abc import Iterable

from agentstores.errors import AgentStoresError

_noted: list[str] = []


def method_of(exc: BaseException) -> str | None:
    """``Class.method`` that raised ``exc`` when it is a bare ``NotImplementedError``."""
    if not isinstance(exc, NotImplementedError) or isinstance(exc, AgentStoresError):
        return None
    tb = exc.__traceback__
    if tb is None:
        return "(unknown method)"
    while tb.tb_next is not None:
        tb = tb.tb_next
    return tb.tb_frame.f_code.co_qualname


def note(exc: BaseException) -> None:
    """Remember a ``NotImplementedError`` the suite caught to look at (see ``runtime``)."""
    method = method_of(exc)
    if method is not None and method not in _noted:
        _noted.append(method)


def note_all(results: Iterable[object]) -> None:
    """:func:`note` every exception among ``results`` (``gather(return_exceptions=True)``)."""
    for result in results:
        if isinstance(result, BaseException):
            note(result)


def methods_in(exc: BaseException | None) -> list[str]:
    """Every method ``exc``, its exception groups, causes and contexts raised it from."""
    found: list[str] = []
    pending = [exc]
    seen: set[int] = set()
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        method = method_of(current)
        if method is not None and method not in found:
            found.append(method)
        if isinstance(current, BaseExceptionGroup):
            pending.extend(reversed(current.exceptions))
        pending += [current.__context__, current.__cause__]
    return found


def take() -> list[str]:
    """The methods noted since the last call, and forget them."""
    taken = list(_noted)
    _noted.clear()
    return taken
