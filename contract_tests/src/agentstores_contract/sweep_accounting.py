"""The sweeper's bookkeeping on a real backend: its bounds, its rules, what a report
counts, and the schedule of ``run_forever`` (stops when told, records a failed sweep).

A sweep covers the whole backend, so other tests' expired conversations may be swept
too: every assertion holds whatever else is offered.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from agentstores.errors import UsageError
from agentstores.keys import ConversationKey
from agentstores.models import Message
from agentstores.protocol import Sweeper
from agentstores.stores import Expired, IdleFor, OverCap, Stores

from .backend import BackendUnderTest
from .base import ContractBase
from .promises import promise

USER = "owner"
PATIENCE = 30.0
"""Deadline of a run_forever that should stop at once; reaching it fails the test."""


async def _expired(stores: Stores, keys: list[ConversationKey]) -> None:
    past = await stores.now() - timedelta(seconds=1)
    for key in keys:
        await stores.conversations.append_messages(
            key, USER, [Message("u1", "user", "hi")], expires_at=past
        )


class SweepAccountingContract(ContractBase):
    @promise("protocol.sweep.bounds")
    def test_sweeper_bounds_and_rules(self, backend: BackendUnderTest) -> None:
        async def body(stores: Stores) -> None:
            default = Sweeper(stores)
            assert (default.batch_size, default.max_batches) == (100, 100)
            assert default.rules == [("expired", Expired())]
            every = Sweeper(
                stores,
                idle_for=timedelta(hours=1),
                keep_per_principal=2,
                batch_size=1,
                max_batches=1,
            )
            assert every.rules == [
                ("expired", Expired()),
                ("idle", IdleFor(timedelta(hours=1))),
                ("over_cap", OverCap(2)),
            ]
            for wrong in ({"batch_size": 0}, {"max_batches": 0}):
                with pytest.raises(UsageError):
                    Sweeper(stores, **wrong)  # type: ignore[arg-type]
            for interval, jitter in ((0.0, 0.1), (1.0, 1.0), (1.0, -0.1)):
                with pytest.raises(UsageError):
                    await default.run_forever(interval, jitter=jitter)
            stopped = asyncio.Event()
            stopped.set()
            await default.run_forever(0.5, jitter=0.0, stop=stopped)
            await default.run_forever(0.5, stop=stopped)
            assert default.last_report is None, "a stopped schedule swept"

        self.run(backend, body)

    @promise("protocol.sweep.report")
    def test_report_counts_every_offered_key(self, backend: BackendUnderTest) -> None:
        tenant = self.tenant()
        doomed = [ConversationKey(tenant, f"doomed-{i}") for i in range(3)]
        renewed = [ConversationKey(tenant, f"renewed-{i}") for i in range(2)]

        async def body(stores: Stores) -> None:
            await _expired(stores, doomed + renewed)
            offered: list[tuple[str, list[ConversationKey]]] = []

            async def audit(rule: str, keys: list[ConversationKey]) -> None:
                offered.append((rule, list(keys)))
                later = await stores.now() + timedelta(days=1)
                for key in keys:
                    if key in renewed:
                        await stores.conversations.append_messages(
                            key, USER, [Message("u2", "user", "still here")], expires_at=later
                        )

            sweeper = Sweeper(stores, on_batch=audit)
            report = await sweeper.sweep_once()
            assert sweeper.last_report is report
            assert {rule for rule, _ in offered} == {"expired"}
            assert report.batches == len(offered)
            assert report.expired + report.survived == sum(len(keys) for _, keys in offered)
            assert report.survived >= len(renewed) and report.expired >= len(doomed)
            assert (report.idle, report.over_cap, report.erased) == (0, 0, report.expired)
            for key in doomed:
                assert await stores.conversations.get_conversation(key, USER) is None
            for key in renewed:
                assert await stores.conversations.get_conversation(key, USER) is not None

        self.run(backend, body)

    @promise("protocol.sweep.report")
    def test_max_batches_bounds_a_sweep(self, backend: BackendUnderTest) -> None:
        tenant = self.tenant()
        keys = [ConversationKey(tenant, f"doomed-{i}") for i in range(3)]

        async def body(stores: Stores) -> None:
            await _expired(stores, keys)
            report = await Sweeper(stores, batch_size=1, max_batches=1).sweep_once()
            assert report.batches == 1 and report.expired <= 1
            left = [k for k in keys if await stores.conversations.get_conversation(k, USER)]
            assert len(left) >= 2, "one batch of one erased two conversations"
            rest = await Sweeper(stores, batch_size=1).sweep_once()
            assert rest.batches >= len(left)
            assert rest.expired + rest.survived == rest.batches, "a batch of one counted twice"
            for key in keys:
                assert await stores.conversations.get_conversation(key, USER) is None

        self.run(backend, body)

    @promise("protocol.sweep.schedule")
    def test_run_forever_sweeps_until_stopped(self, backend: BackendUnderTest) -> None:
        key = self.key("doomed")

        async def body(stores: Stores) -> None:
            await _expired(stores, [key])
            stop = asyncio.Event()
            calls: list[str] = []

            async def audit_down(rule: str, keys: list[ConversationKey]) -> None:
                calls.append(rule)
                if len(calls) == 2:
                    stop.set()
                raise RuntimeError("audit log is down")

            failing = Sweeper(stores, on_batch=audit_down)
            await asyncio.wait_for(failing.run_forever(0.05, stop=stop), PATIENCE)
            assert failing.last_report is not None
            assert failing.last_report.errors == ["RuntimeError: audit log is down"]
            assert len(calls) == 2, "the schedule did not sweep again after a failure"
            assert await stores.conversations.get_conversation(key, USER) is not None

            stop = asyncio.Event()

            async def stop_after(rule: str, keys: list[ConversationKey]) -> None:
                stop.set()

            sweeper = Sweeper(stores, on_batch=stop_after)
            await asyncio.wait_for(sweeper.run_forever(0.05, stop=stop), PATIENCE)
            assert sweeper.last_report is not None and sweeper.last_report.errors == []
            assert sweeper.last_report.expired >= 1

        self.run(backend, body)
