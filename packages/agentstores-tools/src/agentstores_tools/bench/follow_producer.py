"""The producer side of the follow benchmark: live turns that stream at a steady pace.

Each conversation gets one :class:`~agentstores.protocol.turn.Turn` (claimed, heart
beating) whose every :meth:`~agentstores.protocol.turn.Turn.stream` is one recording
write (``stream_every=0``). Nothing is written until ``go``: until then the turns are
live and idle. Then each conversation writes ``writes`` snapshots ``interval`` seconds
apart, the conversations' schedules spread evenly over one interval, and each write is
logged with the moment before it was issued and the moment it returned
(``time.monotonic_ns``: one clock for every process of the machine).

It runs in the followers' process (:func:`produce`) or in a process of its own
(``python -m agentstores_tools.bench.follow_producer``: a JSON plan on stdin, ``ready``
once every turn is claimed, then ``go`` read from stdin, then the JSON log on stdout), so
that another process's writes reach the followers only as the backend delivers them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass

from agentstores.keys import ConversationKey
from agentstores.plugins import create_stores
from agentstores.protocol.turn import Turn
from agentstores.stores import Stores

CHUNK = "lorem ipsum dolor sit amet, "
"""What each write adds to the answer (28 characters)."""


@dataclass(frozen=True)
class ProducerPlan:
    """Which conversations to stream into, and how fast."""

    url: str
    tenant: str
    principal: str
    sessions: list[str]
    interval: float
    writes: int

    def key(self, session: str) -> ConversationKey:
        """The key of one of the plan's conversations."""
        return ConversationKey(self.tenant, session)


def message_id(session: str) -> str:
    """The answer's id in ``session`` (the followers follow exactly this turn)."""
    return f"answer-{session}"


Write = tuple[int, int, int, int]
"""One logged write: (conversation's position in the plan, index written, monotonic ns
before it was issued, monotonic ns when it returned)."""


async def produce(
    stores: Stores,
    plan: ProducerPlan,
    claimed: Callable[[], Awaitable[None]],
    go: Awaitable[None],
) -> list[Write]:
    """Claim a turn in every conversation, await ``claimed()`` then ``go``, stream the
    plan's writes, then finish every turn (sealed ``done``); return the write log."""
    log: list[Write] = []
    async with contextlib.AsyncExitStack() as stack:
        turns: list[Turn] = []
        for session in plan.sessions:
            turn = Turn(
                stores, plan.key(session), plan.principal, message_id(session), stream_every=0
            )
            turns.append(await stack.enter_async_context(turn))
        await claimed()
        await go
        start = time.monotonic()
        count = len(turns)

        async def stream(position: int, turn: Turn) -> None:
            offset = plan.interval * position / count
            for n in range(1, plan.writes + 1):
                delay = start + offset + (n - 1) * plan.interval - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                text = CHUNK * n
                issued = time.monotonic_ns()
                await turn.stream(text)
                log.append((position, len(text), issued, time.monotonic_ns()))

        await asyncio.gather(*(stream(i, t) for i, t in enumerate(turns)))
    return log


async def _main() -> int:
    """The separate-process producer: plan in, ``ready``, ``go`` in, log out."""
    raw = await asyncio.to_thread(sys.stdin.readline)
    plan = ProducerPlan(**json.loads(raw))
    loop = asyncio.get_running_loop()

    async def claimed() -> None:
        print("ready", flush=True)

    async def go() -> None:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if line.strip() != "go":
            raise RuntimeError(f"expected 'go' on stdin, got {line.strip()!r}")

    stores = create_stores(plan.url)
    await stores.open()
    try:
        log = await produce(stores, plan, claimed, go())
    finally:
        await stores.close()
    print(json.dumps({"writes": log}), flush=True)
    return 0


def plan_json(plan: ProducerPlan) -> str:
    """The plan as the one line the separate-process producer reads."""
    return json.dumps(asdict(plan))


if __name__ == "__main__":
    sys.exit(asyncio.run(_main()))
