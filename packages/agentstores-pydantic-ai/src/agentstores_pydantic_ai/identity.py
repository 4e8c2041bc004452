"""Who a run acts as: the application says, never anything a client of the agent can set.

The tenant and principal decide which conversations a run may read and which it owns, so
they come from the application: fixed when the history is built (``tenant=``,
``principal=``), or from a resolver it supplies (``identity=``), a callable that receives
the session id and returns ``(tenant, principal)`` from what the application trusts, such
as a context variable its own authentication sets for the request.

Pydantic AI's UI adapters (AG-UI, Vercel AI) build the messages of a run from what the
browser sends, message ``metadata`` included. A message whose ``metadata`` names an
identity (:data:`CLIENT_IDENTITY_KEYS`) is refused with
:class:`~agentstores.errors.UsageError`, not ignored: an application still passing the
user there would otherwise store every user's messages as one principal's, without a sign.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from agentstores import ConversationKey, UsageError
from agentstores.identity import Identities as _Identities
from agentstores.identity import Identity

IdentityResolver = Callable[[str], Identity]
"""Given a session id, the ``(tenant, principal)`` the call acts as, from what the
application trusts (its own authentication), never from the session id itself."""

CLIENT_IDENTITY_KEYS = ("agentstores_tenant", "agentstores_principal")
"""Message ``metadata`` keys a client could set to act as another user: refused."""


class Identities(_Identities[[str]]):
    """The identity of every call: one fixed, or the application's resolver's answer."""

    def key(self, session_id: str) -> tuple[ConversationKey, str]:
        """The conversation key of ``session_id`` and the principal acting on it.

        Raises:
            UsageError: the resolver returned something other than a valid
                ``(tenant, principal)``, or the session id is not a valid id.
        """
        tenant, principal = self(session_id)
        return ConversationKey(tenant, session_id), principal


def refuse_client_identity(metadata: Iterable[Any]) -> None:
    """Raise :class:`UsageError` if any of the messages' ``metadata`` mappings names an
    identity (:data:`CLIENT_IDENTITY_KEYS`)."""
    for found in metadata:
        if not isinstance(found, dict):
            continue
        named = [k for k in CLIENT_IDENTITY_KEYS if k in found]
        if named:
            raise UsageError(
                f"message metadata[{named[0]!r}] is refused: a client of the agent can set "
                "it to act as another user; the identity comes from the application "
                "(tenant=/principal=, or an identity= resolver)",
                option=named[0],
            )


__all__ = [
    "CLIENT_IDENTITY_KEYS",
    "Identities",
    "Identity",
    "IdentityResolver",
    "refuse_client_identity",
]
