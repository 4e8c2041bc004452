"""Who a session acts as: the application says, never the session id or the items.

The SDK gives a session two things a user can choose: its ``session_id`` (a chat UI
sends it back with every request) and the items (what the user typed, what tools
returned). Neither may decide which conversations a call reads or owns, so the tenant
and principal come from the application instead: fixed when the session is built
(``tenant=``, ``principal=``), or from a resolver it supplies (``identity=``), a
callable taking no argument that returns ``(tenant, principal)`` from what the
application trusts, such as a context variable its own authentication sets for the
request. The session id is an opaque name inside the tenant, never parsed.
"""

from __future__ import annotations

from collections.abc import Callable

from agentstores.identity import Identities, Identity, checked

IdentityResolver = Callable[[], Identity]
"""The ``(tenant, principal)`` the current call acts as, from what the application trusts
(called on every session call, in the caller's context)."""


__all__ = ["Identities", "Identity", "IdentityResolver", "checked"]
