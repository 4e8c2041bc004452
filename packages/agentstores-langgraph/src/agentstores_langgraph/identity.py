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

from agentstores import UsageError
from agentstores.identity import Identities as _Identities
from agentstores.identity import Identity

IdentityResolver = Callable[[Mapping[str, Any]], Identity]
"""Given a run's config, the ``(tenant, principal)`` it acts as, from what the application
trusts (never from the config's ``configurable``, which the API client writes). Methods
that take a thread id and no config pass ``{"configurable": {"thread_id": ...}}``."""

CLIENT_IDENTITY_KEYS = ("agentstores_tenant", "agentstores_principal")
"""``configurable`` keys an API client could set to act as another user: refused."""


class Identities(_Identities[[Mapping[str, Any]]]):
    """The identity of every run: one fixed, or the application's resolver's answer."""

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
        return super().__call__(config)

    def of_thread(self, thread_id: str) -> Identity:
        """The identity for a call that names only a thread (delete, copy)."""
        return self({"configurable": {"thread_id": thread_id}})


__all__ = ["CLIENT_IDENTITY_KEYS", "Identities", "Identity", "IdentityResolver"]
