"""Who a LangGraph run acts as: the application says, never the run's config.

A LangGraph server takes a run's ``config["configurable"]`` from its API client, so
anything read from there is the end user's to choose. The tenant and principal a saver
or a publisher acts as (which threads it may read, which it owns) come from the
application instead: fixed when the saver is built (``tenant=``, ``principal=``), or
from a resolver it supplies (``identity=``), a callable that receives the run's config
and returns ``(tenant, principal)`` from what the application trusts, such as a
context variable its own authentication sets for the request.

``configurable`` keys that name an identity (:data:`CLIENT_IDENTITY_KEYS`) are refused
with :class:`~agentstores.errors.UsageError`, not ignored: an application still passing
the user there would otherwise run every user as the saver's one fixed principal, all
of them owning and reading each other's threads, without a sign.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from agentstores import ConversationKey, UsageError
from agentstores.keys import validate_principal

Identity = tuple[str, str]
"""``(tenant, principal)``."""
IdentityResolver = Callable[[Mapping[str, Any]], Identity]
"""Given a run's config, the ``(tenant, principal)`` it acts as, from what the application
trusts (never from the config's ``configurable``, which the API client writes). Methods
that take a thread id and no config pass ``{"configurable": {"thread_id": ...}}``."""

CLIENT_IDENTITY_KEYS = ("agentstores_tenant", "agentstores_principal")
"""``configurable`` keys an API client could set to act as another user: refused."""


class Identities:
    """The identity of every run: one fixed, or the application's resolver's answer."""

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
            self.fixed = _checked((tenant, principal))
        self.resolver = resolver

    def __call__(self, config: Mapping[str, Any]) -> Identity:
        """The ``(tenant, principal)`` the run of ``config`` acts as.

        Raises:
            UsageError: ``configurable`` names an identity, or the resolver returned
                something other than a valid ``(tenant, principal)``.
        """
        configurable = config.get("configurable") or {}
        named = [k for k in CLIENT_IDENTITY_KEYS if k in configurable]
        if named:
            raise UsageError(
                f"configurable[{named[0]!r}] is refused: an API client can set it to act "
                "as another user; the saver's identity comes from the application "
                "(tenant=/principal=, or an identity= resolver)",
                option=named[0],
            )
        if self.fixed is not None:
            return self.fixed
        assert self.resolver is not None
        return _checked(self.resolver(config))

    def of_thread(self, thread_id: str) -> Identity:
        """The identity for a call that names only a thread (delete, copy)."""
        return self({"configurable": {"thread_id": thread_id}})


def _checked(found: object) -> Identity:
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


__all__ = ["CLIENT_IDENTITY_KEYS", "Identities", "Identity", "IdentityResolver"]
