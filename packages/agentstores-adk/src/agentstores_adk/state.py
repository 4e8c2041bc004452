"""ADK's state scopes as conversation metadata: one name per key, merged atomically.

A state delta is split by prefix: ``app:`` keys go to the app-state conversation,
``user:`` keys to the user-state conversation (both without their prefix, as ADK's own
stores keep them), ``temp:`` keys nowhere (ADK's base class trims them before a write),
and every other key to the session's own conversation. Each key is the metadata name
``s:<key>``, its value wrapped in a one-element list: the store's merge removes a name
mapped to ``None``, and ADK keeps a key whose value is ``None``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from google.adk.sessions.state import State
from pydantic_core import to_jsonable_python

from agentstores import UsageError

log = logging.getLogger(__name__)

STATE = "s:"
"""Metadata name prefix of a state key."""
UPDATED = "adk:updated"
"""Metadata name of the session's ``last_update_time`` (the last event's timestamp)."""


def json_safe(state: Mapping[str, Any]) -> dict[str, Any]:
    """``state`` in JSON form, as ADK's database store writes it (datetimes, models...
    converted; a value with no JSON form stored as its string, with a warning)."""
    try:
        return dict(to_jsonable_python(dict(state)))
    except Exception:
        log.warning("state values without a JSON form are stored as their string form")
        return dict(to_jsonable_python(dict(state), fallback=str))


def split(delta: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """``(app, user, session)`` parts of ``delta``, app and user keys unprefixed, ``temp:``
    keys dropped, values in JSON form."""
    app: dict[str, Any] = {}
    user: dict[str, Any] = {}
    session: dict[str, Any] = {}
    for key, value in json_safe(delta).items():
        if key.startswith(State.APP_PREFIX):
            app[key.removeprefix(State.APP_PREFIX)] = value
        elif key.startswith(State.USER_PREFIX):
            user[key.removeprefix(State.USER_PREFIX)] = value
        elif not key.startswith(State.TEMP_PREFIX):
            session[key] = value
    return app, user, session


def to_metadata(values: Mapping[str, Any]) -> dict[str, Any]:
    """The metadata update that sets each of ``values``."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if not isinstance(key, str) or not key:
            raise UsageError(f"state keys must be non-empty str, got {key!r}")
        out[STATE + key] = [value]
    return out


def from_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The state keys a conversation's metadata holds."""
    return {
        name[len(STATE) :]: value[0]
        for name, value in metadata.items()
        if name.startswith(STATE) and isinstance(value, list) and len(value) == 1
    }


def merged(
    app: Mapping[str, Any], user: Mapping[str, Any], session: Mapping[str, Any]
) -> dict[str, Any]:
    """The state an ADK session shows: its own keys, then ``app:`` and ``user:`` keys."""
    out = dict(session)
    out.update({State.APP_PREFIX + key: value for key, value in app.items()})
    out.update({State.USER_PREFIX + key: value for key, value in user.items()})
    return out


__all__ = ["STATE", "UPDATED", "from_metadata", "merged", "split", "to_metadata"]
