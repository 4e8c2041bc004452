"""The kill-and-resume drill: real OS processes against one store URL.

Round ``kill``: producer A streams a long turn; the drill SIGKILLs it after a
checkpoint; standby B sees it dead on the store clock, takes over with a higher epoch,
resumes from the checkpoint and finishes. Round ``pause``: producer P is SIGSTOPped
instead; standby S takes over; P is SIGCONTed mid-turn and every write it then attempts
must be refused. A follower streams each turn from the recording throughout. The drill
then checks the stores themselves: every message exactly once, the winners' epochs,
the winners' state.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agentstores.errors import UsageError
from agentstores.plugins import scheme_of
from agentstores.stores import Capability
from agentstores.urls import redact_url

from ..redaction import Redaction
from .script import (
    PRINCIPAL,
    Timings,
    answer_message_id,
    conversation_key,
    expected_text,
    user_message_id,
)
from .worker import URL_ENV, open_bundle

Event = dict[str, Any]
Say = Callable[[str], None]


class DrillError(Exception):
    """The drill could not carry a round through (a worker died early, a wait timed out)."""


class DrillTimeout(DrillError):
    """A worker printed nothing matching within the wait."""


def default_url() -> tuple[str, Path]:
    """The embedded file backend in a fresh temporary directory."""
    root = Path(tempfile.mkdtemp(prefix="agentstores-drill-"))
    return root.as_uri(), root


class Worker:
    """One worker process and the JSON events it has printed so far."""

    def __init__(self, name: str, proc: asyncio.subprocess.Process) -> None:
        self.name = name
        self.proc = proc
        self.events: list[Event] = []
        self.stderr: deque[str] = deque(maxlen=40)
        self._changed = asyncio.Event()
        self._readers = [
            asyncio.create_task(self._read_stdout()),
            asyncio.create_task(self._read_stderr()),
        ]
        self.stopped = False

    async def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        async for raw in self.proc.stdout:
            line = raw.decode(errors="replace").strip()
            if not line:
                continue
            try:
                event = json.loads(line)
            except ValueError:
                event = {"event": "output", "line": line}
            if not isinstance(event, dict):
                event = {"event": "output", "line": line}
            self.events.append(event)
            self._changed.set()
        self._changed.set()

    async def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        async for raw in self.proc.stderr:
            self.stderr.append(raw.decode(errors="replace").rstrip())

    @property
    def exited(self) -> bool:
        return self._readers[0].done()

    def first(self, name: str, since: int = 0) -> tuple[int, Event] | None:
        for i in range(since, len(self.events)):
            if self.events[i].get("event") == name:
                return i, self.events[i]
        return None

    def all(self, name: str) -> list[Event]:
        return [e for e in self.events if e.get("event") == name]

    async def wait_for(
        self,
        name: str,
        within: float,
        *,
        since: int = 0,
        where: Callable[[Event], bool] = lambda e: True,
    ) -> tuple[int, Event]:
        """The first event ``name`` at or after position ``since`` that satisfies ``where``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        i = since
        while True:
            while i < len(self.events):
                event = self.events[i]
                i += 1
                if event.get("event") == name and where(event):
                    return i - 1, event
                if event.get("event") == "error":
                    raise DrillError(f"{self.name} failed: {event.get('error')}{self._tail()}")
            if self.exited:
                await self.proc.wait()
                raise DrillError(
                    f"{self.name} exited with code {self.proc.returncode} before {name!r}"
                    f"{self._tail()}"
                )
            self._changed.clear()
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise DrillTimeout(f"{self.name}: no {name!r} within {within:.0f}s{self._tail()}")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)

    async def exit_code(self, within: float) -> int:
        try:
            code = await asyncio.wait_for(self.proc.wait(), within)
        except TimeoutError as exc:
            raise DrillError(f"{self.name} did not exit within {within:.0f}s") from exc
        await asyncio.gather(*self._readers)
        return code

    def signal(self, sig: signal.Signals) -> None:
        if self.proc.returncode is None:
            self.proc.send_signal(sig)

    async def terminate(self) -> None:
        """Make sure the process is gone (resume it first if it was stopped)."""
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGCONT)
                self.proc.kill()
            await self.proc.wait()
        for reader in self._readers:
            reader.cancel()
        await asyncio.gather(*self._readers, return_exceptions=True)

    def _tail(self) -> str:
        if not self.stderr:
            return ""
        return "\n    " + "\n    ".join(list(self.stderr)[-12:])


@dataclass
class RoundResult:
    """What one round measured. Times are seconds after the producer was killed/stopped."""

    mode: str
    first_epoch: int = 0
    takeover_epoch: int = 0
    checkpoint_chars: int = 0
    chars_before: int = 0
    recording_at_takeover: int = 0
    recording_consistent: bool = False
    heartbeat_age_at_detection: float | None = None
    detect_after: float | None = None
    takeover_after: float | None = None
    first_new_chars_after: float | None = None
    finished_after: float | None = None
    follower: Event = field(default_factory=dict)
    stale_writes: Event | None = None
    resumed_before_takeover: bool = False
    """Pause round: the producer had to be resumed before the takeover (see ``notes``)."""
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


@dataclass
class DrillResult:
    """The outcome of one drill: each round's measurements, the checks made on the stores
    afterwards, and the error that stopped it, if any."""

    url: str
    """The store's URL as shown: its secrets masked (:func:`~agentstores.urls.redact_url`)."""
    backend: str
    timings: Timings
    rounds: list[RoundResult] = field(default_factory=list)
    checks: list[tuple[str, bool, str]] = field(default_factory=list)
    error: str | None = None

    @property
    def passed(self) -> bool:
        """True when every round (at least one) ran through and no check or round failed."""
        return (
            self.error is None
            and bool(self.rounds)
            and all(ok for _, ok, _ in self.checks)
            and not any(r.problems for r in self.rounds)
        )

    def to_json(self) -> dict[str, Any]:
        """A JSON-safe view of the result, ``passed`` included (what ``--json`` writes)."""
        return {
            "url": self.url,
            "backend": self.backend,
            "timings": asdict(self.timings),
            "rounds": [asdict(r) for r in self.rounds],
            "checks": [{"check": c, "ok": ok, "detail": d} for c, ok, d in self.checks],
            "error": self.error,
            "passed": self.passed,
        }


class Drill:
    def __init__(self, url: str, timings: Timings, say: Say, factory: str | None = None) -> None:
        self.url = url
        self.factory = factory
        self.timings = timings
        self.say = say
        self.tenant = f"drill-{uuid.uuid4().hex[:12]}"
        self.key = conversation_key(self.tenant)
        self.workers: list[Worker] = []
        t = timings
        self.max_wait = 3 * t.turn_seconds + 6 * t.dead_after + 60
        """Bound on any one wait: generous, since CI machines stall; never asserted."""

    async def spawn(self, name: str, role: str, turn: int, *extra: str) -> Worker:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "agentstores_tools.drill.worker",
            role,
            "--tenant",
            self.tenant,
            "--turn",
            str(turn),
            "--timings",
            self.timings.to_json(),
            "--max-wait",
            str(self.max_wait),
            *(("--factory", self.factory) if self.factory else ()),
            *extra,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            # The URL goes in the environment, which only this user can read: any local
            # user can read a process's command line.
            env={**os.environ, "PYTHONUNBUFFERED": "1", URL_ENV: self.url},
        )
        worker = Worker(name, proc)
        self.workers.append(worker)
        return worker

    async def run_round(self, turn: int, mode: str) -> RoundResult:
        """One turn: producer, standby and follower; interrupt the producer mid-turn."""
        t, wait = self.timings, self.max_wait
        result = RoundResult(mode=mode)
        tail = answer_message_id(turn - 1) if turn > 1 else None
        who = ("A", "B") if mode == "kill" else ("P", "S")
        self.say(f"round {turn} ({mode}): starting follower, standby {who[1]}, producer {who[0]}")
        follower = await self.spawn(f"follower {turn}", "follower", turn)
        standby = await self.spawn(f"standby {who[1]}", "standby", turn)
        await follower.wait_for("following", wait)
        await standby.wait_for("watching", wait)
        extra = ["--probe-on-loss"] if mode == "pause" else []
        if tail is not None:
            extra += ["--expected-tail", tail]
        producer = await self.spawn(f"producer {who[0]}", "producer", turn, *extra)

        _, claimed = await producer.wait_for("claimed", wait)
        result.first_epoch = claimed["epoch"]
        self.say(f"  {who[0]} claimed the turn at epoch {claimed['epoch']} ({claimed['reason']})")
        at, checkpoint = await producer.wait_for("checkpoint", wait)
        result.checkpoint_chars = checkpoint["position"]
        at, _ = await producer.wait_for(
            "flush", wait, since=at, where=lambda e: e["index"] > checkpoint["position"]
        )
        _, flushed = await producer.wait_for("flush", wait, since=at + 1)
        verb = "SIGKILLed" if mode == "kill" else "SIGSTOPped"
        stall = 2 * t.dead_after + 10
        for attempt in range(1, 4):
            producer.signal(signal.SIGKILL if mode == "kill" else signal.SIGSTOP)
            producer.stopped = mode == "pause"
            hit_mono = time.monotonic()
            result.chars_before = flushed["index"]
            self.say(
                f"  {verb} {who[0]} mid-turn: checkpoint at {result.checkpoint_chars} chars, "
                f"{result.chars_before} of {t.length} chars streamed"
            )
            if mode == "kill":
                break
            try:
                await standby.wait_for("claimed", stall)
                break
            except DrillTimeout:
                # A process stopped inside a store write can hold that key's lock (the
                # file backend locks per key for writes): the takeover's claim then
                # waits until the stopped process resumes and lets go.
                at = len(producer.events)
                producer.signal(signal.SIGCONT)
                producer.stopped = False
                result.notes.append(
                    f"stop {attempt}: no takeover within {stall:.0f}s; {who[0]} was probably "
                    "stopped holding a store lock; resumed it"
                )
                self.say(f"  {result.notes[-1]}")
                try:
                    await standby.wait_for("claimed", stall)
                    result.resumed_before_takeover = True
                    break
                except DrillTimeout:
                    if attempt == 3:
                        raise
                    _, flushed = await producer.wait_for("flush", wait, since=at)

        def since_hit(event: Event) -> float:
            return float(event["t"]) - hit_mono

        _, dead = await standby.wait_for("dead_detected", wait)
        _, took = await standby.wait_for("claimed", wait)
        _, resumed = await standby.wait_for("resumed", wait)
        result.takeover_epoch = took["epoch"]
        result.heartbeat_age_at_detection = dead["heartbeat_age"]
        result.detect_after = since_hit(dead)
        result.takeover_after = since_hit(took)
        result.recording_at_takeover = resumed["recorded"]
        result.recording_consistent = resumed["recording_consistent"]
        self.say(
            f"  {who[1]} saw {who[0]} dead on the store clock after {result.detect_after:.2f}s "
            f"(heartbeat {dead['heartbeat_age']:.2f}s old) and took over at epoch "
            f"{took['epoch']} after {result.takeover_after:.2f}s"
        )
        self.say(
            f"  {who[1]} resumed from the checkpoint at {resumed['checkpoint']} chars; the "
            f"recording held {resumed['recorded']} (consistent: {resumed['recording_consistent']})"
        )
        _, first_new = await standby.wait_for("flush", wait)
        result.first_new_chars_after = since_hit(first_new)

        if mode == "pause":
            if not result.resumed_before_takeover:
                producer.signal(signal.SIGCONT)
                producer.stopped = False
                self.say(
                    f"  SIGCONTed {who[0]} while {who[1]} streams "
                    f"({first_new['index']} chars published at epoch {first_new['epoch']})"
                )
            _, stale = await producer.wait_for("stale_writes", wait)
            result.stale_writes = stale
            fenced = producer.first("fenced")
            how = fenced[1].get("reason") if fenced else "no fenced event"
            self.say(
                f"  {who[0]} woke up fenced ({how}); of {stale['attempted']} writes it then "
                f"attempted with epoch {stale['epoch']}: {len(stale['refused'])} refused, "
                f"{len(stale['landed'])} landed, {len(stale['errors'])} failed otherwise"
            )
            for landed in stale["landed"]:
                result.problems.append(f"stale write landed: {landed}")
            for error in stale["errors"]:
                result.problems.append(f"stale write neither refused nor landed: {error}")
            code = await producer.exit_code(wait)
            if code != 0:
                result.problems.append(f"paused producer exited with code {code}")
        else:
            code = await producer.exit_code(wait)
            if code != -signal.SIGKILL:
                result.problems.append(f"killed producer exited with code {code}")

        _, finished = await standby.wait_for("finished", wait)
        result.finished_after = since_hit(finished)
        _, followed = await follower.wait_for("followed", wait)
        result.follower = followed
        self.say(
            f"  {who[1]} finished the answer ({finished['chars']} chars) "
            f"{result.finished_after:.2f}s after the {mode}"
        )
        self.say(
            f"  follower: {followed['updates']} updates across epochs {followed['epochs']}, "
            f"{followed['rollbacks']} rollbacks, {followed['divergences']} divergences, longest "
            f"stall {followed['longest_stall']:.2f}s, final text matches: "
            f"{followed['final_matches']}"
        )
        result.problems.extend(f"follower: {p}" for p in followed["problems"])
        for worker, expected in ((standby, 0), (follower, 0)):
            code = await worker.exit_code(wait)
            if code != expected:
                result.problems.append(f"{worker.name} exited with code {code}")
        if result.takeover_epoch <= result.first_epoch:
            result.problems.append("the takeover did not take a higher epoch")
        if not result.recording_consistent:
            result.problems.append("the recording at takeover was not the expected prefix")
        return result

    async def verify(self, result: DrillResult) -> None:
        """Read the stores back: exactly the messages expected, written by the winners."""
        length = self.timings.length
        winners = {r + 1: rnd.takeover_epoch for r, rnd in enumerate(result.rounds)}
        turns = sorted(winners)
        check = result.checks.append
        async with open_bundle(self.url, self.factory) as stores:
            messages = await stores.conversations.read_messages(self.key, PRINCIPAL)
            ids = [m.id for m in messages]
            want = [i for n in turns for i in (user_message_id(n), answer_message_id(n))]
            check(("every message exactly once, in order", ids == want, f"transcript ids {ids}"))
            for n in turns:
                answers = [m for m in messages if m.id == answer_message_id(n)]
                ok = len(answers) == 1 and answers[0].content == expected_text(n, length)
                check((f"turn {n}: answer complete and exact", ok, f"{len(answers)} found"))
                epoch = answers[0].metadata.get("epoch") if answers else None
                check(
                    (
                        f"turn {n}: answer written by the takeover's epoch",
                        epoch == winners[n],
                        f"epoch {epoch}, takeover {winners[n]}",
                    )
                )
            view = await stores.supervision.read(self.key, PRINCIPAL)
            row, last = view.row, turns[-1]
            ok = (
                row is not None
                and row.status == "done"
                and row.message_id == answer_message_id(last)
                and row.epoch == winners[last]
            )
            check(("supervision row sealed by the last winner", ok, f"{row}"))
            check(
                (
                    "no epoch above the last winner's was ever written",
                    view.fence == winners[last],
                    f"fence {view.fence}",
                )
            )
            state = await stores.state.load(self.key, PRINCIPAL)
            want_state = {"message_id": answer_message_id(last), "position": length, "done": True}
            check(("checkpoint is the winner's final state", state == want_state, f"{state}"))
            record = await stores.recording.read(self.key, PRINCIPAL)
            check(
                (
                    "recording dropped by the winner after sealing",
                    record is None,
                    f"{record.index if record else None}",
                )
            )
            info = await stores.conversations.get_conversation(self.key, PRINCIPAL)
            ok = info is not None and info.last_turn_status == "complete"
            check(("last turn status complete", ok, f"{info.last_turn_status if info else None}"))

    async def cleanup(self) -> None:
        await asyncio.gather(*(w.terminate() for w in self.workers), return_exceptions=True)


async def run_drill(
    url: str | None = None,
    *,
    timings: Timings | None = None,
    rounds: tuple[str, ...] = ("kill", "pause"),
    say: Say = print,
    keep: bool = False,
    factory: str | None = None,
) -> DrillResult:
    """Run the drill against ``url`` (default: a fresh file store in a temporary dir).

    ``factory`` (``"module:callable"``, importable by the worker processes) makes the
    stores from the URL instead of the plugin registry, to drill a backend that has no
    entry point (or a deliberately broken one). The workers get the URL through their
    environment, never their command line; what ``say`` is given and the result show it
    with its secrets masked.
    """
    timings = timings or Timings()
    redaction = Redaction(url)

    def tell(line: str) -> None:
        say(redaction.text(line))

    for mode in rounds:
        if mode not in ("kill", "pause"):
            raise UsageError(f"unknown drill round {mode!r}; expected kill or pause")
    tmp: Path | None = None
    if url is None:
        url, tmp = default_url()
    if scheme_of(url) == "memory":
        raise UsageError(
            "the drill runs separate OS processes and memory:// shares nothing across "
            "processes; give a file://, postgresql:// or redis:// URL"
        )
    drill = Drill(url, timings, tell, factory)
    try:
        async with open_bundle(url, factory) as stores:
            backend, caps = stores.backend, stores.capabilities
        result = DrillResult(url=redact_url(url), backend=backend, timings=timings)
        tell(f"drill against {result.url} (backend {backend}; tenant {drill.tenant})")
        if Capability.MULTI_PROCESS not in caps:
            tell(f"  note: backend {backend} does not declare {Capability.MULTI_PROCESS!r}")
        tell(
            f"  timings: heartbeat {timings.heartbeat}s, dead after {timings.dead_after}s, "
            f"flush {timings.flush}s, checkpoint {timings.checkpoint}s, "
            f"{timings.length} chars at {timings.chunk} per {timings.tick}s"
        )
        try:
            for turn, mode in enumerate(rounds, start=1):
                result.rounds.append(await drill.run_round(turn, mode))
            await drill.verify(result)
        except DrillError as exc:
            result.error = str(exc)
        return redaction.data(result)
    finally:
        await drill.cleanup()
        if tmp is not None and not keep:
            shutil.rmtree(tmp, ignore_errors=True)


def render(result: DrillResult) -> str:
    """The human summary: figures per round, every check, and the verdict."""
    lines = ["", f"kill-and-resume drill on {result.backend} ({result.url})"]
    for n, r in enumerate(result.rounds, start=1):
        lines.append(
            f"  round {n} ({r.mode}): epoch {r.first_epoch} -> {r.takeover_epoch}; "
            f"{r.chars_before} chars streamed before, checkpoint at {r.checkpoint_chars}"
        )
        lines.append(
            f"    detected dead after {_s(r.detect_after)} (store-clock heartbeat age "
            f"{_s(r.heartbeat_age_at_detection)}), taken over after {_s(r.takeover_after)}, "
            f"new chars after {_s(r.first_new_chars_after)}, finished after {_s(r.finished_after)}"
        )
        f = r.follower
        if f:
            lines.append(
                f"    follower: {f['updates']} updates, epochs {f['epochs']}, "
                f"{f['rollbacks']} rollbacks, {f['divergences']} divergences, "
                f"final {f['final_chars']} chars, matches: {f['final_matches']}"
            )
        if r.stale_writes is not None:
            s = r.stale_writes
            lines.append(
                f"    fenced writes after SIGCONT: {len(s['refused'])}/{s['attempted']} refused, "
                f"{len(s['landed'])} landed"
            )
        lines.extend(f"    note: {n}" for n in r.notes)
        lines.extend(f"    PROBLEM: {p}" for p in r.problems)
    for name, ok, detail in result.checks:
        lines.append(f"  [{'ok' if ok else 'FAIL'}] {name}" + ("" if ok else f": {detail}"))
    if result.error:
        lines.append(f"  ERROR: {result.error}")
    lines.append(f"verdict: {'PASS' if result.passed else 'FAIL'}")
    return "\n".join(lines)


def _s(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}s"


__all__ = [
    "DrillError",
    "DrillResult",
    "DrillTimeout",
    "RoundResult",
    "Timings",
    "render",
    "run_drill",
]
