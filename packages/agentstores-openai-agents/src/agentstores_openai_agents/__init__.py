"""agentstores for the OpenAI Agents SDK: its Session protocol over an agentstores
conversation, fenced by the turn lease."""

from .identity import Identity, IdentityResolver
from .listing import SessionPage, list_sessions
from .session import AgentStoresSession
from .turn import run_turn

__all__ = [
    "AgentStoresSession",
    "Identity",
    "IdentityResolver",
    "SessionPage",
    "list_sessions",
    "run_turn",
]
