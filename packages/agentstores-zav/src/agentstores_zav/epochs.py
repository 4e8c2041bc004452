"""The SDK's lease epochs on agentstores' fence.

The SDK claims a new conversation at epoch 0 and deletes the supervision and recording
rows after a clean finish; agentstores keeps a key's fence across deletes, so epoch 0
again would be refused forever. A claim made with ``expected_epoch=None`` therefore
takes the store epoch ``fence + 1`` and remembers, in the claiming task's context, the
offset between the epoch the SDK believes it holds and the one the store holds. The
producer task the SDK starts after claiming copies that context, so its heartbeats,
recording writes and deletes are translated back to the store epoch; everywhere else
(followers, takeovers) the store epoch is shown as it is. The same claim sets the
ambient epoch (``agentstores.stores.ambient``), which fences the state saves and
transcript appends the SDK makes without any epoch.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from types import MappingProxyType

from agentstores import ConversationKey
from agentstores.stores.ambient import enter_epoch


@dataclass(frozen=True, slots=True)
class Claim:
    """A lease this task claimed: the SDK's epoch for it, the store's, and the turn."""

    sdk_epoch: int
    store_epoch: int
    message_id: str

    @property
    def offset(self) -> int:
        """What to add to an SDK epoch to get the store epoch."""
        return self.store_epoch - self.sdk_epoch


_CLAIMS: ContextVar[Mapping[ConversationKey, Claim]] = ContextVar(
    "agentstores_zav_claims", default=MappingProxyType({})
)


def claim_of(key: ConversationKey) -> Claim | None:
    """The lease this task claimed on ``key``, if any."""
    return _CLAIMS.get().get(key)


def offset_of(key: ConversationKey) -> int:
    """Store epoch minus SDK epoch for ``key`` in this task (0 without a claim)."""
    claim = _CLAIMS.get().get(key)
    return 0 if claim is None else claim.offset


def hold(key: ConversationKey, claim: Claim) -> None:
    """Record ``claim`` in this task's context and make its epoch the ambient one.

    Not undone when the claiming call returns: the claim lasts as long as the task (a
    request, or the producer task that copied its context).
    """
    _CLAIMS.set(MappingProxyType({**_CLAIMS.get(), key: claim}))
    enter_epoch(key, claim.store_epoch)


__all__ = ["Claim", "claim_of", "hold", "offset_of"]
