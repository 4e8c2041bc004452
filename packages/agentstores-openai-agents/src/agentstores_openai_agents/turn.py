"""``run_turn``: one ``Runner`` turn under the conversation's turn lease.

Two replicas that run turns on one session must not interleave them: each would read
the history without the other's items and append after them. The lease makes a turn
exclusive (a second ``run_turn`` on a busy session raises ``BusyError`` naming the
running turn, before anything is read or written), and fences: a takeover (the same
turn id retried elsewhere, or the holder stopped beating) raises the epoch, after
which the old producer's session writes raise ``FencedError`` and land nothing, and its
run is cancelled as soon as its heartbeat learns it (``LeaseLostError``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from agents import Agent, Runner
from agents.result import RunResult

from agentstores.errors import LeaseLostError
from agentstores.protocol.lease import DEFAULT_LEASE_CONFIG, LeaseConfig

from .session import AgentStoresSession


async def run_turn(
    session: AgentStoresSession,
    agent: Agent[Any],
    input: Any,
    /,
    *,
    message_id: str | None = None,
    lease_config: LeaseConfig = DEFAULT_LEASE_CONFIG,
    **runner_kwargs: Any,
) -> RunResult:
    """``Runner.run(agent, input, session=session, **runner_kwargs)`` under the lease.

    ``message_id`` names the turn (fresh if None); a retry of the same request should
    pass the same id, so that it takes the turn over instead of waiting it out. A
    ``session=`` in ``runner_kwargs`` (a wrapper of ``session``, such as the SDK's
    ``EncryptedSession``) is what the run reads and writes; the lease is ``session``'s.

    Raises:
        BusyError: another turn holds the session (``.occupant`` names it).
        FencedError: a session write was refused after a takeover.
        LeaseLostError: the lease was lost meanwhile (the run was cancelled).
    """
    async with session.turn(message_id, lease_config=lease_config) as turn:
        # The run's task copies this context: its session writes carry the lease's epoch.
        runner_kwargs.setdefault("session", session)
        task = asyncio.ensure_future(Runner.run(agent, input, **runner_kwargs))
        turn.lease.bind(task)
        try:
            return await task
        except asyncio.CancelledError:
            me = asyncio.current_task()
            if turn.lost.is_set() and (me is None or me.cancelling() == 0):
                raise LeaseLostError(
                    "the run was stopped: the turn's lease was lost",
                    key=turn.key,
                    epoch=turn.epoch,
                ) from turn.lease.lost_reason
            raise
        finally:
            if not task.done():
                task.cancel()


__all__ = ["run_turn"]
