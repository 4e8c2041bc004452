"""The shared failover workload: many clients leasing, writing and fencing on a few
conversations while a fault (a failover) happens, every call recorded.

Each client works one conversation in a loop: read the supervision row, claim the turn
with an epoch above everything seen (a takeover, without waiting for the holder to die,
so holders are fenced out all the time), load the state as a resuming producer does,
then hold the turn for a few rounds of append-a-message, save-state and heartbeat, each
under the lease's epoch, until a call is refused. Every call is one store call
(``open_stores(url)``'s supervision, conversations and state stores: the calls the
protocol layer's turn lease makes), so each is one atomic step in the recorded history.

Clients run as asyncio tasks over several bundles (replicas) in this process and in
worker processes (``python -m tests.failover.workload``), all until one monotonic
deadline (``time.monotonic()`` is one clock for every process on a host). The fault is
an async callable run in the main process at ``fault_at`` seconds; what it returns is
kept in the result (a drill reports there whether a failover really happened).

A call's outcome is ``ok`` (acknowledged), ``refused`` (a typed refusal, or a
compare-and-swap answering False) or ``unknown``: a ``BackendUnavailableError`` (which
includes ``UnknownOutcomeError``), a timeout or any other error, whose effect the client
cannot know.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from agentstores.api import open_stores
from agentstores.errors import AgentStoresError, BackendUnavailableError, UsageError
from agentstores.keys import ConversationKey
from agentstores.models import Message, SupervisionRow
from agentstores.stores import Stores

PRINCIPAL = "failover-user"
"""Every client acts for one principal: the conversations are one user's, leased by
many replicas."""

Fault = Callable[[], Awaitable[dict[str, Any]]]
"""The fault a drill injects mid-run: returns a JSON-able report (``failovers``: how
many times the service really moved to another server)."""


@dataclass(frozen=True)
class Config:
    """A workload's shape. Defaults: 4 conversations, 3 bundles of 4 clients in this
    process plus 1 worker process with 2 bundles of 4, 8 s, the fault at 3 s."""

    conversations: int = 4
    bundles: int = 3
    clients_per_bundle: int = 4
    processes: int = 1
    process_bundles: int = 2
    duration: float = 8.0
    fault_at: float = 3.0
    hold_rounds: int = 4
    pause: float = 0.01
    """Seconds a client sleeps between calls (2 cores are shared)."""
    call_timeout: float = 20.0
    """Seconds before a call is abandoned and recorded as unknown."""

    def __post_init__(self) -> None:
        counts = (self.conversations, self.bundles, self.clients_per_bundle, self.hold_rounds)
        if min(counts) < 1 or self.processes < 0 or self.process_bundles < 1:
            raise UsageError("every workload count must be at least 1 (processes: 0)")
        if not 0 <= self.fault_at < self.duration:
            raise UsageError("fault_at must fall inside the run (0 <= fault_at < duration)")
        if self.pause < 0 or self.call_timeout <= 0:
            raise UsageError("pause must be >= 0 and call_timeout positive")


@dataclass
class Call:
    """One store call as its client saw it. ``completed`` is None for an unknown outcome.

    ``op``: ``read`` (result: the row's ``[epoch, status]`` or None), ``claim`` and
    ``beat`` (compare-and-swap from ``expected`` to ``epoch``; result True/False),
    ``append`` (``item``: the message id), ``state`` (``item``: the state's seq), ``load``
    (result: the loaded state's ``[epoch, seq]`` or None).
    """

    process: int
    client: int
    conversation: int
    op: str
    epoch: int
    invoked: float
    completed: float | None = None
    outcome: str = "unknown"
    result: Any = None
    expected: int | None = None
    item: Any = None
    error: str | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Call:
        return cls(**data)


@dataclass
class Result:
    """A run's history, its keys and the fault's report."""

    tenant: str
    conversations: int
    calls: list[Call] = field(default_factory=list)
    fault: dict[str, Any] = field(default_factory=dict)
    fault_window: tuple[float, float] | None = None
    """When the fault started and returned (``time.monotonic()``)."""
    workers_failed: list[str] = field(default_factory=list)

    def key(self, conversation: int) -> ConversationKey:
        return conversation_key(self.tenant, conversation)

    def acked_after_fault(self) -> int:
        """Calls acknowledged that started after the fault returned: the clients carried
        on (0 without a fault)."""
        if self.fault_window is None:
            return 0
        end = self.fault_window[1]
        return sum(1 for c in self.calls if c.outcome == "ok" and c.invoked > end)


def conversation_key(tenant: str, conversation: int) -> ConversationKey:
    """The key of conversation number ``conversation`` of a run under ``tenant``."""
    return ConversationKey(tenant, f"failover-{conversation}")


class Client:
    """One replica's request loop on one conversation, recording every call."""

    def __init__(
        self,
        stores: Stores,
        tenant: str,
        process: int,
        client: int,
        conversation: int,
        config: Config,
        calls: list[Call],
    ) -> None:
        self.stores = stores
        self.key = conversation_key(tenant, conversation)
        self.process, self.client, self.conversation = process, client, conversation
        self.config = config
        self.calls = calls
        self.rng = random.Random(f"{tenant}-{process}-{client}")
        self.turns = 0

    async def _call(self, op: str, epoch: int, action: Awaitable[Any], **extra: Any) -> Call:
        """Run one store call and record it with its outcome."""
        call = Call(
            self.process, self.client, self.conversation, op, epoch, time.monotonic(), **extra
        )
        self.calls.append(call)
        try:
            result = await asyncio.wait_for(action, self.config.call_timeout)
        except BackendUnavailableError as exc:  # includes UnknownOutcomeError
            call.error = type(exc).__name__
            return call
        except AgentStoresError as exc:  # a typed refusal: nothing changed
            call.completed, call.outcome, call.error = (
                time.monotonic(),
                "refused",
                type(exc).__name__,
            )
            return call
        except Exception as exc:  # a timeout or another error: its effect is unknown
            call.error = type(exc).__name__
            return call
        call.completed = time.monotonic()
        if op in ("claim", "beat"):
            call.result = bool(result)
            call.outcome = "ok" if result else "refused"
        elif op == "read":
            row = result.row
            call.result = None if row is None else [row.epoch, row.status]
            call.item = result.fence
            call.outcome = "ok"
        elif op == "load":
            call.result = [result["epoch"], result["seq"]] if "epoch" in result else None
            call.outcome = "ok"
        else:
            call.outcome = "ok"
        return call

    async def run(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            await self._turn(deadline)
            await asyncio.sleep(self.config.pause + self.rng.random() * 0.02)

    async def _turn(self, deadline: float) -> None:
        """Read, claim above everything seen, then write under the lease until refused."""
        sup = self.stores.supervision
        read = await self._call("read", 0, sup.read(self.key, PRINCIPAL))
        if read.outcome != "ok":
            await asyncio.sleep(0.1)
            return
        expected = None if read.result is None else int(read.result[0])
        epoch = max(int(read.item), expected or 0) + 1
        self.turns += 1
        mid = f"t-p{self.process}-c{self.client}-{self.turns}"
        claim = await self._call(
            "claim",
            epoch,
            sup.compare_and_swap(
                self.key, PRINCIPAL, expected, SupervisionRow("running", mid, epoch)
            ),
            expected=expected,
        )
        if claim.outcome != "ok":
            return
        load = await self._call("load", epoch, self.stores.state.load(self.key, PRINCIPAL))
        if load.outcome != "ok":
            return
        for seq in range(self.config.hold_rounds):
            if time.monotonic() >= deadline:
                return
            await asyncio.sleep(self.config.pause)
            item = f"m-p{self.process}-c{self.client}-e{epoch}-{seq}"
            appended = await self._call(
                "append",
                epoch,
                self.stores.conversations.append_messages(
                    self.key, PRINCIPAL, [Message(item, "assistant", item)], epoch=epoch
                ),
                item=item,
            )
            if appended.outcome != "ok":
                return
            state = {"epoch": epoch, "seq": seq, "writer": f"p{self.process}-c{self.client}"}
            saved = await self._call(
                "state",
                epoch,
                self.stores.state.save(self.key, PRINCIPAL, state, epoch=epoch),
                item=seq,
            )
            if saved.outcome != "ok":
                return
            beat = await self._call(
                "beat",
                epoch,
                sup.compare_and_swap(
                    self.key, PRINCIPAL, epoch, SupervisionRow("running", mid, epoch)
                ),
                expected=epoch,
            )
            if beat.outcome != "ok":
                return


async def run_clients(
    url: str, tenant: str, process: int, bundles: int, config: Config, deadline: float
) -> list[Call]:
    """Open ``bundles`` bundles of ``url`` and run their clients until ``deadline``."""
    calls: list[Call] = []
    async with _bundles(url, bundles) as opened:
        tasks = []
        for b, stores in enumerate(opened):
            for i in range(config.clients_per_bundle):
                number = b * config.clients_per_bundle + i
                conversation = (number + process) % config.conversations
                client = Client(stores, tenant, process, number, conversation, config, calls)
                tasks.append(asyncio.create_task(client.run(deadline)))
        await asyncio.gather(*tasks)
    return calls


class _bundles:
    """``count`` bundles of ``url``, each opened with :func:`open_stores`."""

    def __init__(self, url: str, count: int) -> None:
        self.url, self.count = url, count
        self.managers: list[Any] = []

    async def __aenter__(self) -> list[Stores]:
        opened = []
        for _ in range(self.count):
            manager = open_stores(self.url)
            opened.append(await manager.__aenter__())
            self.managers.append(manager)
        return opened

    async def __aexit__(self, *exc: object) -> None:
        for manager in reversed(self.managers):
            with contextlib.suppress(Exception):  # it may fail to close after a failover
                await manager.__aexit__(None, None, None)


async def _prepare(url: str, tenant: str, conversations: int) -> None:
    """Create every conversation before the clients start (so appends never create)."""
    async with open_stores(url) as stores:
        for n in range(conversations):
            await stores.conversations.append_messages(
                conversation_key(tenant, n), PRINCIPAL, [Message("u0", "user", "start")]
            )


async def run_workload(url: str, fault: Fault | None, config: Config | None = None) -> Result:
    """Run the workload on ``url`` with ``fault`` at ``config.fault_at``; the history."""
    config = config or Config()
    tenant = f"fo-{uuid.uuid4().hex[:10]}"
    await _prepare(url, tenant, config.conversations)
    result = Result(tenant, config.conversations)
    start = time.monotonic()
    deadline = start + config.duration
    workers = [
        await _spawn_worker(url, tenant, p, config, deadline)
        for p in range(1, config.processes + 1)
    ]

    async def inject() -> None:
        await asyncio.sleep(max(0.0, start + config.fault_at - time.monotonic()))
        if fault is not None:
            began = time.monotonic()
            result.fault = await fault()
            result.fault_window = (began, time.monotonic())

    own, _ = await asyncio.gather(
        run_clients(url, tenant, 0, config.bundles, config, deadline), inject()
    )
    result.calls.extend(own)
    for process, worker in enumerate(workers, start=1):
        out, err = await worker.communicate()
        if worker.returncode != 0:
            result.workers_failed.append(
                f"worker {process} exited {worker.returncode}: {err.decode()[-2000:]}"
            )
            continue
        result.calls.extend(Call.from_json(c) for c in json.loads(out))
    return result


async def _spawn_worker(
    url: str, tenant: str, process: int, config: Config, deadline: float
) -> asyncio.subprocess.Process:
    env = {**os.environ, URL_ENV: url}
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.failover.workload",
        "--tenant",
        tenant,
        "--process",
        str(process),
        "--deadline",
        repr(deadline),
        "--config",
        json.dumps(asdict(config)),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )


URL_ENV = "AGENTSTORES_FAILOVER_URL"
"""A worker process reads its store URL here (not on its command line, which any local
user can read)."""


def main(argv: list[str] | None = None) -> None:
    """A worker process: run its bundles' clients and print the history as JSON."""
    parser = argparse.ArgumentParser(prog="python -m tests.failover.workload")
    parser.add_argument("--tenant", required=True)
    parser.add_argument("--process", type=int, required=True)
    parser.add_argument("--deadline", type=float, required=True)
    parser.add_argument("--config", required=True)
    args = parser.parse_args(argv)
    config = Config(**json.loads(args.config))
    calls = asyncio.run(
        run_clients(
            os.environ[URL_ENV],
            args.tenant,
            args.process,
            config.process_bundles,
            config,
            args.deadline,
        )
    )
    json.dump([asdict(c) for c in calls], sys.stdout)


if __name__ == "__main__":
    main()
