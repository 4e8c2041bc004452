"""Paged reads beyond ADK's own ``GetSessionConfig``: a page of events, a page of sessions.

ADK's ``get_session`` can return the last ``num_recent_events`` or the events after a
time, never the first events without loading them all; its ``list_sessions`` returns
every session at once. :class:`EventPage` is a ``GetSessionConfig`` (so it goes through
``get_session``, and ADK code that passes a config on keeps working) that asks for the
events from a position; :class:`SessionPage` is one page of ``list_sessions_page``.
"""

from __future__ import annotations

from google.adk.sessions.base_session_service import GetSessionConfig
from google.adk.sessions.session import Session
from pydantic import BaseModel, Field, model_validator

MAX_EVENT_PAGE = 1000
"""Most events one :class:`EventPage` asks for (one store read)."""


class EventPage(GetSessionConfig):
    """Events ``start .. start + limit - 1`` by position (0 is the first event), read
    without touching the others; ``num_recent_events`` and ``after_timestamp`` must be
    left unset."""

    start: int = Field(default=0, ge=0)
    limit: int = Field(default=100, ge=1, le=MAX_EVENT_PAGE)

    @model_validator(mode="after")
    def _alone(self) -> EventPage:
        if self.num_recent_events is not None or self.after_timestamp is not None:
            raise ValueError(
                "EventPage takes start and limit, not num_recent_events or after_timestamp"
            )
        return self


class SessionPage(BaseModel):
    """One page of sessions, most recently updated first, without events; pass
    ``next_page_token`` back for the next page (None: this was the last)."""

    sessions: list[Session] = Field(default_factory=list)
    next_page_token: str | None = None


__all__ = ["MAX_EVENT_PAGE", "EventPage", "SessionPage"]
