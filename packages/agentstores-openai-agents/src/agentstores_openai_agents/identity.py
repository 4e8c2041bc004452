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

from agentstores import ConversationKey, UsageError
from agentstores.keys import validate_principal

Identity = tuple[str, str]
"""``(tenant, principal)``."""
IdentityResolver = Callable[[], Identity]
"""The ``(tenant, principal)`` the current call acts as, from what the application trusts
(called on every session call, in the caller's context)."""


class Identities:
    """The identity of every call: one fixed, or the application's resolver's answer."""

    def __init__(
        self, tenant: str | None, principal: str, resolver: IdentityResolver | None
    ) -> None:
        if (tenant is None) == (resolver is None):
            raise UsageError(
                "give either tenant= (and principal=), a fixed identity, or identity=, a "
                "resolver the application supplies; not both, not neither"
            )
        if resolver is not None and principal:
            raise UsageError("principal= comes with tenant=; a resolver returns both")
        self.fixed: Identity | None = None
        if tenant is not None:
            self.fixed = checked((tenant, principal))
        self.resolver = resolver

    def __call__(self) -> Identity:
        """The ``(tenant, principal)`` of the current call.

        Raises:
            UsageError: the resolver returned something other than a valid
                ``(tenant, principal)``.
        """
        if self.fixed is not None:
            return self.fixed
        assert self.resolver is not None
        return checked(self.resolver())


def checked(found: object) -> Identity:
    """``found`` if it is a valid ``(tenant, principal)`` pair of str, else UsageError."""
    if (
        not isinstance(found, tuple)
        or len(found) != 2
        or not all(isinstance(part, str) for part in found)
    ):
        raise UsageError(f"an identity is a (tenant, principal) pair of str, got {found!r}")
    tenant, principal = found
    ConversationKey(tenant, "x")  # a bad tenant fails here, not at the first write
    validate_principal(principal)
    return tenant, principal


__all__ = ["Identities", "Identity", "IdentityResolver", "checked"]
