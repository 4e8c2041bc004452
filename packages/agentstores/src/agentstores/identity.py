"""Who a call acts as: a ``(tenant, principal)`` the application gives, checked once.

The framework bridges take the identity their calls act as from the application, never
from anything a client of the framework can set: either fixed when the bridge is built
(``tenant=``, ``principal=``) or from a resolver the application supplies
(``identity=``). The resolvers differ only in the arguments they receive, so the holder
of the two is generic over them (:class:`Identities`); the rules each framework adds
(which of its inputs must not name an identity) stay in its bridge.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, ParamSpec

from .errors import UsageError
from .keys import ConversationKey, validate_principal

Identity = tuple[str, str]
"""``(tenant, principal)``."""

P = ParamSpec("P")


def checked(found: object) -> Identity:
    """``found`` if it is a valid ``(tenant, principal)`` pair of str, else UsageError.

    A bad tenant or principal is refused here, where the identity is given or resolved,
    not at the first write that uses it.
    """
    if (
        not isinstance(found, tuple)
        or len(found) != 2
        or not all(isinstance(part, str) for part in found)
    ):
        raise UsageError(f"an identity is a (tenant, principal) pair of str, got {found!r}")
    tenant, principal = found
    ConversationKey(tenant, "x")  # checks the tenant as every key will
    validate_principal(principal)
    return tenant, principal


class Identities(Generic[P]):
    """The identity of every call: one fixed, or the application's resolver's answer.

    Generic over the resolver's arguments, which each framework decides; calling the
    holder with them returns the checked ``(tenant, principal)``.
    """

    def __init__(
        self,
        tenant: str | None,
        principal: str | None,
        resolver: Callable[P, Identity] | None,
    ) -> None:
        """Hold ``tenant`` and ``principal`` (checked now) or ``resolver``, not both.

        Raises:
            UsageError: both or neither given, ``principal=`` with a resolver,
                ``tenant=`` without ``principal=``, or an invalid fixed pair.
        """
        if (tenant is None) == (resolver is None):
            raise UsageError(
                "give either tenant= and principal=, a fixed identity, or identity=, a "
                "resolver the application supplies; not both, not neither"
            )
        if resolver is not None and principal:
            raise UsageError("principal= comes with tenant=; a resolver returns both")
        if tenant is not None and principal is None:
            raise UsageError("tenant= needs principal=, the user the call acts as")
        self.fixed: Identity | None = None
        if tenant is not None and principal is not None:
            self.fixed = checked((tenant, principal))
        self.resolver = resolver

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Identity:
        """The ``(tenant, principal)`` of a call: the fixed one, or the resolver's, checked.

        Raises:
            UsageError: the resolver returned something other than a valid pair.
        """
        if self.fixed is not None:
            return self.fixed
        assert self.resolver is not None
        return checked(self.resolver(*args, **kwargs))


__all__ = ["Identities", "Identity", "checked"]
