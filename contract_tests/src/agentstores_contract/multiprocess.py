"""Races between OS processes, for backends that declare Capability.MULTI_PROCESS."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from agentstores.keys import ConversationKey
from agentstores.stores import Capability, Stores

from .backend import BackendUnderTest
from .base import ContractBase
from .multi_record import assert_erased, erasure_setup
from .promises import promise

TIMEOUT = 300


def race_processes(
    url: str, mode: str, key: ConversationKey, processes: int, rounds: int
) -> list[Any]:
    """Start the workers, release them together, return each one's JSON result.

    Each worker reads the URL from its stdin, never its command line: any local user can
    read a process's command line, and a URL may carry a password.
    """
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "agentstores_contract._worker",
                mode,
                key.tenant,
                key.session_id,
                f"w{i}",
                str(rounds),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(processes)
    ]
    try:
        for p in procs:
            assert p.stdin is not None
            p.stdin.write(f"{url}\n")
            p.stdin.flush()
        for p in procs:
            assert p.stdout is not None
            line = p.stdout.readline().strip()
            if line != "ready":
                _, err = p.communicate(timeout=TIMEOUT)
                raise AssertionError(f"a worker failed to start: {line!r}\n{err[-2000:]}")
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        results = []
        for p in procs:
            out, err = p.communicate(timeout=TIMEOUT)
            if p.returncode != 0:
                raise AssertionError(f"a worker failed (exit {p.returncode}):\n{err[-2000:]}")
            results.append(json.loads(out.strip().splitlines()[-1]))
        return results
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


class MultiProcessContract(ContractBase):
    def _url(self, backend: BackendUnderTest) -> str:
        self.require(backend, Capability.MULTI_PROCESS, "races between OS processes")
        if backend.url is None:
            pytest.skip("the backend has no URL other processes can open")
        return backend.url

    @promise("multiprocess.supervision.cas")
    def test_cas_across_processes(self, backend: BackendUnderTest) -> None:
        url = self._url(backend)
        key = self.key()
        rounds = self.profile.rounds * 4
        won = race_processes(url, "cas", key, self.profile.processes, rounds)
        winners = {r: [w for w, rs in enumerate(won) if r in rs] for r in range(rounds)}
        bad = {r: ws for r, ws in winners.items() if len(ws) != 1}
        assert not bad, f"rounds without exactly one winner (round: workers): {bad}"

        async def body(stores: Stores) -> None:
            view = await stores.supervision.read(key, "p")
            assert view.row is not None and view.row.epoch == rounds
            assert view.row.message_id == f"w{winners[rounds - 1][0]}"

        self.run(backend, body)

    @promise("multiprocess.conversations.append")
    def test_conditional_appends_across_processes(self, backend: BackendUnderTest) -> None:
        url = self._url(backend)
        key = self.key()
        total = self.profile.processes * self.profile.rounds
        results = race_processes(url, "append", key, self.profile.processes, total)
        successes = [tuple(pair) for worker in results for pair in worker]
        tails = [tail for tail, _ in successes]
        assert len(tails) == len(set(tails)), (
            f"two processes appended on the same tail: {sorted(map(str, tails))}"
        )

        async def body(stores: Stores) -> None:
            stored = [m.id for m in await stores.conversations.read_messages(key, "p")]
            assert len(stored) == total, f"{len(stored)} messages, expected {total}"
            chain = {mid: tail for tail, mid in successes}
            assert set(chain) == set(stored), "reported appends and the transcript differ"
            for prev, mid in zip([None, *stored], stored, strict=False):
                assert chain[mid] == prev, f"{mid} was appended on {chain[mid]!r}, not on {prev!r}"

        self.run(backend, body)

    @promise("multiprocess.erasure.appends")
    def test_erasure_racing_appends_across_processes(self, backend: BackendUnderTest) -> None:
        url = self._url(backend)
        key = self.key()
        self.run(backend, lambda stores: erasure_setup(stores, key))
        results = race_processes(url, "erase", key, self.profile.processes, self.profile.rounds)
        assert [r["erased"] for r in results][:1] == [True], f"the erasure failed: {results}"
        late = {f"w{i}": r["late"] for i, r in enumerate(results) if r["late"]}
        assert not late, f"appends accepted after the key refused the same worker: {late}"
        unrefused = [f"w{i}" for i, r in enumerate(results) if not r["refused"]]
        assert not unrefused, f"workers never refused after the erasure: {unrefused}"
        self.run(backend, lambda stores: assert_erased(stores, key, ["tok"]))

    @promise("durability.restart")
    def test_acknowledged_writes_outlive_their_process(self, backend: BackendUnderTest) -> None:
        self.require(backend, Capability.DURABLE, "writes that outlive the writing process")
        if backend.url is None:
            pytest.skip("the backend has no URL another process can open")
        key = self.key()
        assert race_processes(backend.url, "write", key, 1, 1) == [["w0"]]

        async def body(stores: Stores) -> None:
            view = await stores.supervision.read(key, "p")
            assert view.row is not None and view.row.message_id == "w0", view
            assert await stores.state.load(key, "p") == {"written_by": "w0"}
            assert [m.id for m in await stores.conversations.read_messages(key, "p")] == ["w0"]

        self.run(backend, body)
