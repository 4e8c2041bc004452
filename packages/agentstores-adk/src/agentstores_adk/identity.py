"""Who an ADK call acts as: the application says, never the call's ``user_id``.

ADK's API server takes ``app_name`` and ``user_id`` from the request's URL path, so
both are the client's to choose. The tenant and principal a service acts as (whose
sessions it may read, which it owns) come from the application instead: fixed when the
service is built (``tenant=``, ``principal=``), or from a resolver it supplies
(``identity=``), a callable that receives the call's ``(app_name, user_id)`` and returns
``(tenant, principal)`` from what the application trusts, such as a context variable
its own authentication sets for the request.

``user_id`` must then *be* that principal: a call naming any other user is refused with
:class:`UserMismatchError`, not served as the principal (which would let a client
read and write under a name it chose) and not ignored (an application still passing a
client's user there would otherwise run every user as one principal without a sign).
"""

from __future__ import annotations

from collections.abc import Callable

from agentstores import NotOwnedError, UsageError
from agentstores.identity import Identities as _Identities
from agentstores.identity import Identity

IdentityResolver = Callable[[str, str], Identity]
"""Given a call's ``(app_name, user_id)``, the ``(tenant, principal)`` it acts as, from
what the application trusts (the arguments are the API client's to set: use them to
choose, never to authorize)."""


class UserMismatchError(NotOwnedError):
    """An ADK call named a ``user_id`` other than the principal it acts as."""


class Identities(_Identities[[str, str]]):
    """The identity of every call: one fixed, or the application's resolver's answer."""

    def __call__(self, app_name: str, user_id: str) -> Identity:
        """The ``(tenant, principal)`` a call for ``user_id`` in ``app_name`` acts as.

        Raises:
            UserMismatchError: ``user_id`` is not that principal.
            UsageError: the resolver returned something other than a valid pair.
        """
        if not isinstance(app_name, str) or not app_name:
            raise UsageError(f"app_name must be a non-empty str, got {app_name!r}")
        if not isinstance(user_id, str):
            raise UsageError(f"user_id must be a str, got {type(user_id).__name__}")
        found = super().__call__(app_name, user_id)
        if user_id != found[1]:
            raise UserMismatchError(
                f"user_id {user_id!r} is not the user this call acts as: the service's "
                "identity comes from the application (tenant=/principal= or identity=), "
                "and a session service call may name only that user"
            )
        return found

    def acting(self, app_name: str) -> Identity:
        """The identity of a call that names no user (``list_sessions(user_id=None)``):
        the fixed one, or the resolver's answer for ``user_id=""``."""
        return super().__call__(app_name, "")


__all__ = ["Identities", "Identity", "IdentityResolver", "UserMismatchError"]
