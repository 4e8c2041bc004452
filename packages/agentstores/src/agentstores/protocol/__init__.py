"""The protocol layer: backend-agnostic rules built only on the store ABCs.

- :func:`claim` / :class:`Lease`: the turn lease (mutex, liveness on the store clock,
  fencing token for every producer write, heartbeat that stops a fenced producer).
- :func:`start_turn`: claim first, then the transcript-tail check (stale guard).
- :class:`Turn`: a whole turn as a context manager (what ``conv.turn(...)`` returns).
- :class:`HeartbeatCoalescer`: every lease's heartbeat of a process in one batch per store.
- :class:`Sweeper`: retention (expired, idle, over-cap) with atomic re-checks.
- :func:`stop_turn`: stop the running turn from any replica, keeping its partial answer.
- :func:`follow`: stream a running turn to a reconnecting client, ending with a verdict.
- :func:`rehydrate`: the last N user/assistant turns for a restarted process.
- :func:`settled`: a write awaited to its outcome even when its caller is cancelled.
"""

from .follow import FollowEnd, FollowEvent, FollowUpdate, FollowVerdict, follow
from .heartbeats import HeartbeatCoalescer, coalescer_for
from .lease import (
    DEFAULT_LEASE_CONFIG,
    ClaimReason,
    Lease,
    LeaseConfig,
    LeaseStatus,
    Liveness,
    claim,
    heartbeat_age,
    liveness,
)
from .rehydrate import is_turn, message_text, rehydrate
from .settle import settled
from .stop import stop_turn
from .sweeper import Sweeper, SweepReport
from .turn import CHECKPOINT_EVERY, STREAM_EVERY, Turn, start_turn

__all__ = [
    "CHECKPOINT_EVERY",
    "DEFAULT_LEASE_CONFIG",
    "STREAM_EVERY",
    "ClaimReason",
    "FollowEnd",
    "FollowEvent",
    "FollowUpdate",
    "FollowVerdict",
    "HeartbeatCoalescer",
    "Lease",
    "LeaseConfig",
    "LeaseStatus",
    "Liveness",
    "SweepReport",
    "Sweeper",
    "Turn",
    "claim",
    "coalescer_for",
    "follow",
    "heartbeat_age",
    "is_turn",
    "liveness",
    "message_text",
    "rehydrate",
    "settled",
    "start_turn",
    "stop_turn",
]
