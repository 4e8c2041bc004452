"""The optional behaviours a backend declares; the contract suite gates tests on them."""

from __future__ import annotations

import enum
from collections.abc import Iterable

from .errors import UsageError


class Capability(enum.StrEnum):
    """One optional behaviour. Declared once per backend, in its plugin's ``BackendInfo``."""

    MULTI_PROCESS = "multi_process"
    """Correct for many OS processes sharing one store (not only tasks in one process)."""
    DURABLE = "durable"
    """Acknowledged writes survive a restart of the process that made them."""
    NATIVE_TTL = "native_ttl"
    """Expired records disappear by themselves, without the sweeper."""
    CLUSTER = "cluster"
    """Runs unchanged on a sharded/clustered server."""
    SETTABLE_CLOCK = "settable_clock"
    """Takes a ``clock=`` option (a callable returning an aware datetime) as its store
    clock, so expiry can be checked at exact instants instead of by waiting."""

    @classmethod
    def parse(cls, name: object) -> Capability:
        """The capability called ``name``.

        Raises:
            UsageError: no capability has that name (a typo must not silently skip tests).
        """
        if isinstance(name, str):
            try:
                return cls(name)
            except ValueError:
                pass
        known = ", ".join(c.value for c in cls)
        raise UsageError(f"unknown capability {name!r}; known: {known}")


def capability_set(names: Iterable[object]) -> frozenset[Capability]:
    """``names`` as capabilities; ``UsageError`` for any unknown name."""
    if isinstance(names, str):
        raise UsageError("capabilities must be a collection of names, not one string")
    return frozenset(Capability.parse(name) for name in names)


__all__ = ["Capability", "capability_set"]
