"""Where an ADK session, its app state and its user state live: three kinds of key.

ADK names a session by ``(app_name, user_id, session_id)``, with session ids unique per
user, not per app. Its conversation is ``ConversationKey(tenant, "adk:<app>:<user>:<id>")``
(each part escaped by :func:`agentstores.keys.encode_component`, which never yields
``:``, so distinct triples give distinct keys). App state, shared by every user of an
app, is the metadata of ``"adk-app:<app>"``, owned by the service's ``app_principal``;
user state, shared by one user's sessions of an app, is the metadata of
``"adk-user:<app>:<user>"``, owned by that user.
"""

from __future__ import annotations

from functools import lru_cache

from agentstores import ConversationKey
from agentstores.keys import decode_component, encode_component

SESSION_PREFIX = "adk:"
APP_STATE_PREFIX = "adk-app:"
USER_STATE_PREFIX = "adk-user:"
CACHED_KEYS = 4096
"""Keys remembered per kind: every call of the service builds one to three of them, and
checking and escaping their parts is a few microseconds each time."""


@lru_cache(maxsize=CACHED_KEYS)
def session_key(tenant: str, app_name: str, user_id: str, session_id: str) -> ConversationKey:
    """The conversation that holds one ADK session (``InvalidKeyError`` if over 256 bytes)."""
    return ConversationKey(tenant, session_prefix(app_name, user_id) + encode_component(session_id))


def session_prefix(app_name: str, user_id: str) -> str:
    """What every session id of ``(app_name, user_id)`` starts with."""
    return f"{SESSION_PREFIX}{encode_component(app_name)}:{encode_component(user_id)}:"


def session_id_of(key: ConversationKey, prefix: str) -> str | None:
    """The ADK session id ``key`` holds if it is a session under ``prefix``, else None."""
    if not key.session_id.startswith(prefix):
        return None
    rest = key.session_id[len(prefix) :]
    if not rest or ":" in rest:
        return None
    return decode_component(rest)


@lru_cache(maxsize=CACHED_KEYS)
def app_state_key(tenant: str, app_name: str) -> ConversationKey:
    """The conversation whose metadata holds ``app_name``'s ``app:`` state."""
    return ConversationKey(tenant, APP_STATE_PREFIX + encode_component(app_name))


@lru_cache(maxsize=CACHED_KEYS)
def user_state_key(tenant: str, app_name: str, user_id: str) -> ConversationKey:
    """The conversation whose metadata holds ``user_id``'s ``user:`` state in ``app_name``."""
    return ConversationKey(
        tenant, f"{USER_STATE_PREFIX}{encode_component(app_name)}:{encode_component(user_id)}"
    )


__all__ = [
    "app_state_key",
    "session_id_of",
    "session_key",
    "session_prefix",
    "user_state_key",
]
