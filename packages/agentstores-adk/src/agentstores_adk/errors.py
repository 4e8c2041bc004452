"""The refusal of a stale writer, as both ADK and agentstores name it."""

from __future__ import annotations

from google.adk.errors import StaleSessionError

from agentstores import StaleWriteError


class StaleSessionWriteError(StaleSessionError, StaleWriteError):
    """``append_event`` through a session object older than the stored session: another
    writer appended since this object was loaded. Nothing was written; reload the
    session (``get_session``) to see what the other writer did.

    An ADK ``StaleSessionError`` (a ``ValueError``), so code written for ADK's own stores
    catches it, and an agentstores ``StaleWriteError`` (``.expected``, ``.tail``)."""

    def __init__(self, message: str, *, expected: str | None, tail: str | None) -> None:
        StaleWriteError.__init__(self, message, expected=expected, tail=tail)


__all__ = ["StaleSessionWriteError"]
