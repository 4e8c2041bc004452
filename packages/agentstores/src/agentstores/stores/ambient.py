"""The ambient epoch: the lease a task holds fences its store writes without passing it.

A turn sets ``(key, epoch)`` in a context variable for as long as it runs; every fenced
store write on that key made in that task (or in a task it starts, which copies the
context) and given no ``epoch`` of its own carries the lease's epoch. So code that knows
nothing of leases (a framework's own store calls) cannot land a write after a takeover.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from contextvars import ContextVar, Token
from types import MappingProxyType

from ..keys import ConversationKey

_EPOCHS: ContextVar[Mapping[ConversationKey, int]] = ContextVar(
    "agentstores_ambient_epochs", default=MappingProxyType({})
)


def ambient_epoch(key: ConversationKey) -> int | None:
    """The epoch of the lease this task holds on ``key``, or None outside a turn."""
    return _EPOCHS.get().get(key)


def write_epoch(key: ConversationKey, epoch: int | None) -> int | None:
    """The epoch a write carries: its own when given, else the ambient one for ``key``."""
    return epoch if epoch is not None else _EPOCHS.get().get(key)


def enter_epoch(key: ConversationKey, epoch: int) -> Token[Mapping[ConversationKey, int]]:
    """Make ``epoch`` the ambient epoch of ``key`` here; :func:`leave_epoch` undoes it."""
    return _EPOCHS.set(MappingProxyType({**_EPOCHS.get(), key: epoch}))


def leave_epoch(token: Token[Mapping[ConversationKey, int]]) -> None:
    """Restore what :func:`enter_epoch` replaced (a no-op from another context)."""
    # A token made in another context (a lease entered in one task and left in
    # another) cannot be reset here: that context's value ends with it.
    with contextlib.suppress(ValueError):
        _EPOCHS.reset(token)


@contextlib.contextmanager
def fenced_as(key: ConversationKey, epoch: int) -> Iterator[None]:
    """Within the block, writes on ``key`` without an epoch carry ``epoch``."""
    token = enter_epoch(key, epoch)
    try:
        yield
    finally:
        leave_epoch(token)


__all__ = ["ambient_epoch", "enter_epoch", "fenced_as", "leave_epoch", "write_epoch"]
