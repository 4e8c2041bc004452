"""agentstores for Pydantic AI: a session's ``ModelMessage`` history stored in an
agentstores conversation, one row per message, appended per run exactly once, refused
when the run started from a stale history, fenced under the turn lease."""

from .history import AgentStoresHistory, StoredHistory
from .identity import CLIENT_IDENTITY_KEYS, IdentityResolver

__all__ = ["CLIENT_IDENTITY_KEYS", "AgentStoresHistory", "IdentityResolver", "StoredHistory"]
