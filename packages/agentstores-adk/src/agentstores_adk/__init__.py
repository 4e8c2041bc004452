"""agentstores for Google ADK: a BaseSessionService over any agentstores backend, with exact
stale-writer refusal and paged reads."""

from .config import MAX_EVENT_PAGE, EventPage, SessionPage
from .errors import StaleSessionWriteError
from .identity import IdentityResolver, UserMismatchError
from .service import AgentStoresSessionService

__all__ = [
    "MAX_EVENT_PAGE",
    "AgentStoresSessionService",
    "EventPage",
    "IdentityResolver",
    "SessionPage",
    "StaleSessionWriteError",
    "UserMismatchError",
]
