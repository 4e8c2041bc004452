"""Writers SIGKILLed at random moments, round after round, on one directory.

Each round starts three writer processes (see ``_worker.write``) that append to a shared
conversation, CAS their supervision row, save state, put recordings and append / truncate
their own conversation in a tight loop, then kills each at a random moment. After every
round the test checks the whole store structurally (every record parses and agrees with
the indexes, counts match) and against the writers' logs: everything acknowledged is
there, and each record is either what the last acknowledged call left or what the call
in flight at the kill would have left; no message body is torn. The next round's writers
then work on top of whatever the kills left behind.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from agentstores_file.stores import FileStores

from ._verify import verify_store
from ._worker import PRINCIPAL, SHARED, own_key, whole
from .test_race import REPO, worker_env

WORKERS = 3
ROUNDS = 40
BUDGET_SECONDS = 45.0


@dataclass
class Truth:
    """One writer's records as last observed (after the previous round's kills)."""

    cas: int | None = None
    state: int | None = None
    recording: int | None = None
    own: list[str] = field(default_factory=list)


@dataclass
class Round:
    """One writer's calls in one round: all acknowledged but perhaps the last."""

    acked: list[tuple[str, ...]]
    in_flight: tuple[str, ...] | None


def read_round(path: Path, offset: int) -> tuple[Round, int]:
    """The calls logged since ``offset``; a kill can only interrupt the last one."""
    if not path.exists():
        return Round([], None), offset
    with path.open() as f:
        f.seek(offset)
        text = f.read()
    lines = text.splitlines()
    assert text == "" or text.endswith("\n"), f"torn log line in {path}"
    acked: list[tuple[str, ...]] = []
    pending: tuple[str, ...] | None = None
    for line in lines:
        if line == "ok":
            assert pending is not None, f"an ok without a call in {path}"
            acked.append(pending)
            pending = None
        else:
            assert line.startswith("begin ") and pending is None, f"bad log line {line!r}"
            pending = tuple(line.split()[1:])
    return Round(acked, pending), offset + len(text)


def _apply(truth: Truth, op: tuple[str, ...]) -> Truth:
    kind, *args = op
    out = Truth(truth.cas, truth.state, truth.recording, list(truth.own))
    if kind == "cas":
        out.cas = int(args[0])
    elif kind == "state":
        out.state = int(args[0])
    elif kind == "recording":
        out.recording = int(args[0])
    elif kind == "pair":
        out.own += args
    elif kind == "truncate":
        users = [i for i in out.own if i.startswith("u")]
        assert users and users[-1] == args[0], f"truncate at {args[0]} but users are {users[-2:]}"
        del out.own[out.own.index(args[0]) :]
    return out


async def check_round(
    url: str,
    root: str,
    rounds: list[Round],
    truths: list[Truth],
    shared_truth: list[str],
    outcomes: Counter[str],
) -> tuple[list[Truth], list[str]]:
    """Check what the kills left against what each writer did; return it as the new truth."""
    verify_store(root)
    async with FileStores(url) as stores:
        conv = stores.conversations
        shared = await conv.read_messages(SHARED, PRINCIPAL)
        ids = [m.id for m in shared]
        assert all(whole(m.content) for m in shared), "a torn message in the shared transcript"
        assert ids[: len(shared_truth)] == shared_truth, "the shared transcript lost its past"
        added = set(ids[len(shared_truth) :])
        acked = {op[1] for r in rounds for op in r.acked if op[0] == "append"}
        maybe = {r.in_flight[1] for r in rounds if r.in_flight and r.in_flight[0] == "append"}
        assert acked <= added, f"acknowledged appends lost: {sorted(acked - added)[:5]}"
        assert added <= acked | maybe, f"messages nobody wrote: {sorted(added - acked - maybe)}"
        observed: list[Truth] = []
        for worker, (r, truth) in enumerate(zip(rounds, truths, strict=True)):
            for op in r.acked:
                truth = _apply(truth, op)
            options = [truth]
            if r.in_flight is not None and r.in_flight[0] != "append":
                options.append(_apply(truth, r.in_flight))
            key = own_key(worker)
            view = await stores.supervision.read(key, PRINCIPAL)
            state = await stores.state.load(key, PRINCIPAL)
            recording = await stores.recording.read(key, PRINCIPAL)
            own = await conv.read_messages(key, PRINCIPAL)
            assert not state or whole(state), "a torn state blob"
            assert recording is None or whole(recording.message), "a torn recording"
            assert all(whole(m.content) for m in own), "a torn message"
            seen = Truth(
                view.row.epoch if view.row is not None else None,
                state["n"] if state else None,
                recording.index if recording is not None else None,
                [m.id for m in own],
            )
            assert seen in options, f"writer {worker}: {seen} is neither of {options}"
            if len(options) == 2 and options[0] != options[1]:
                outcomes["new" if seen == options[1] else "old"] += 1
            observed.append(seen)
    return observed, ids


def _run_round(url: str, logs: list[Path], rng: random.Random) -> None:
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.file._worker", "write", url, str(w), str(logs[w])],
            cwd=REPO,
            env=worker_env(),
            stdout=subprocess.PIPE,
            text=True,
        )
        for w in range(WORKERS)
    ]
    try:
        for p in procs:
            assert p.stdout is not None
            assert p.stdout.readline().strip() == "ready", "a writer failed to start"
        start = time.monotonic()
        kills = sorted((rng.uniform(0.005, 0.4), i) for i in range(WORKERS))
        for at, i in kills:
            time.sleep(max(0.0, start + at - time.monotonic()))
            assert procs[i].poll() is None, f"writer {i} stopped by itself"
            procs[i].send_signal(signal.SIGKILL)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
            if p.stdout is not None:
                p.stdout.close()
    assert all(p.returncode == -signal.SIGKILL for p in procs), [p.returncode for p in procs]


def test_sigkill_at_random_moments_leaves_every_record_old_or_new(tmp_path: Path) -> None:
    root = str(tmp_path / "store")
    url = f"file://{root}"
    logs = [tmp_path / f"writer-{w}.log" for w in range(WORKERS)]
    offsets = [0] * WORKERS
    truths = [Truth() for _ in range(WORKERS)]
    shared: list[str] = []
    seed = int(os.environ.get("AGENTSTORES_CRASH_SEED", time.time_ns() % 100_000))
    rng = random.Random(seed)
    began = time.monotonic()
    rounds = calls = interrupted = 0
    outcomes: Counter[str] = Counter()
    while rounds < ROUNDS and time.monotonic() - began < BUDGET_SECONDS:
        _run_round(url, logs, rng)
        rounds += 1
        this_round = []
        for w in range(WORKERS):
            r, offsets[w] = read_round(logs[w], offsets[w])
            this_round.append(r)
            calls += len(r.acked)
            interrupted += r.in_flight is not None
        truths, shared = asyncio.run(check_round(url, root, this_round, truths, shared, outcomes))
    assert rounds >= 10, f"only {rounds} rounds (seed {seed})"
    assert calls > 100 * WORKERS, f"the writers barely wrote ({calls} calls, seed {seed})"
    assert interrupted > rounds, f"kills rarely hit a call in flight (seed {seed})"
    assert shared, "nothing was appended to the shared conversation"
    # Kills landed both before and after calls took effect.
    assert outcomes["old"] and outcomes["new"], (outcomes, seed)
    print(f"rounds={rounds} calls={calls} interrupted={interrupted} {dict(outcomes)}")
