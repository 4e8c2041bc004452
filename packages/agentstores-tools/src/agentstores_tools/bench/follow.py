"""Follow latency: from a producer's recording write to a follower's ``follow()`` yielding it.

For each mode and each shape (F followers over C conversations, one producing turn per
conversation), in one process of followers:

- **idle reads**: every turn is claimed and heart-beating but writes nothing; the store
  reads the followers make over ``idle`` seconds (``supervision.read``,
  ``recording.read`` and ``conversations.get_transcript``, counted by wrapping the
  followers' bundle's methods and only in the followers' tasks), per follower per second;
- **latency**: each conversation then writes ``writes`` snapshots ``interval`` seconds
  apart (the conversations spread evenly over the interval, the total held under
  ``rate`` writes/s). A write's latency is from the moment it returned (and, separately,
  from the moment before it was issued) to the moment each follower of its conversation
  yields an update holding it (index at least the write's): a follower that reads two
  writes at once yields the later one, which holds both.

Modes, each the same code path with the producers elsewhere and push on or off as a URL
option (``push=true`` / ``push=false``):

- ``local``: the producers write through the followers' own bundle, so the process's own
  wake-ups wake the followers (the only mode of ``memory://``, whose data never leave
  the process);
- ``push``: the producers run in a separate process, the URL with ``push=true``; the
  row is kept only if the followers' bundle really hears other processes
  (``stores.wakeups.remote``), else it reports the mode unavailable;
- ``poll``: the producers run in a separate process, the URL with ``push=false`` (as
  given when the backend has no such option); the followers' bundle must not hear other
  processes, so other processes' writes reach them only by their poll.

``cpu_percent`` is this process's CPU time over the wall time from the first write to
the last follower's end (every thread; with ``local``, the producers' share included):
near 100, the followers' process is saturated and queueing shows in the latency.
``load_1m``, the machine's load average when the row ends, says how much else ran.

Followers use ``follow()``'s defaults (``poll`` 0.3 s, ``safety_poll`` 2 s). They arrive
spread evenly over one safety poll, as independent users do: started in the same instant,
their polls would stay nearly in step and read the store in bursts, a write landing in one
waiting behind it (a reconnect storm, which ``follow()``'s random stretch of each wait
dissolves only over a few polls). Times are ``time.monotonic_ns``, one clock for every
process of the machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import math
import os
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from agentstores.errors import UsageError
from agentstores.keys import ConversationKey
from agentstores.plugins import create_stores, scheme_of
from agentstores.protocol.follow import FollowEnd, FollowUpdate, follow
from agentstores.stores import Stores

from ..redaction import Redaction
from .follow_producer import ProducerPlan, Write, message_id, plan_json, produce
from .stats import percentile

MODES: dict[str, str] = {
    "local": "producers write through the followers' bundle (in-process wake-ups)",
    "push": "producers in another process, push=true",
    "poll": "producers in another process, push=false (reads only at the poll)",
}
DEFAULT_MODES = tuple(MODES)
DEFAULT_SHAPES: tuple[tuple[int, int], ...] = ((1, 1), (1000, 1000), (1000, 1))
"""(followers, conversations): one follower of one answer; 1,000 followers of 1,000
answers, each with its own producer; 1,000 followers of one answer."""
IN_PROCESS_SCHEMES = frozenset({"memory"})
"""Backends whose data never leave the process: no producer can be elsewhere."""
COUNTED_READS = (
    ("supervision", "read"),
    ("recording", "read"),
    ("conversations", "get_transcript"),
)
"""The store reads a follower makes, counted in the idle window."""
POLL = 0.3
SAFETY_POLL = 2.0
"""``follow()``'s default poll and safety poll (seconds), which the followers use."""
START_TIMEOUT = 120.0
"""Failure timeout for claiming the turns and the followers' first reads (not a measure)."""

_FOLLOWING: contextvars.ContextVar[bool] = contextvars.ContextVar("following", default=False)


@dataclass(frozen=True)
class FollowConfig:
    """What the follow benchmark measures, and for how long."""

    modes: tuple[str, ...] = DEFAULT_MODES
    shapes: tuple[tuple[int, int], ...] = DEFAULT_SHAPES
    seconds: float = 10.0
    interval: float = 0.1
    rate: float = 500.0
    idle: float = 6.0

    def validate(self) -> None:
        """Refuse what cannot be measured, before anything connects.

        Raises:
            UsageError: an unknown mode, a shape with no follower per conversation, or a
                duration, interval or rate that is not positive.
        """
        unknown = [m for m in self.modes if m not in MODES]
        if unknown:
            raise UsageError(f"unknown follow modes {unknown}; choose from {list(MODES)}")
        for followers, conversations in self.shapes:
            if not 1 <= conversations <= followers or followers % conversations:
                raise UsageError(
                    f"follow shape {followers}x{conversations}: need 1 <= conversations "
                    "<= followers, followers a multiple of conversations"
                )
        for name in ("seconds", "interval", "rate", "idle"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise UsageError(f"follow {name} must be a positive number, got {value!r}")

    def pace(self, conversations: int) -> tuple[float, int]:
        """(seconds between two writes of one conversation, writes per conversation)."""
        interval = max(self.interval, conversations / self.rate)
        return interval, max(1, int(self.seconds / interval))


def parse_shape(text: str) -> tuple[int, int]:
    """``"1000"``: 1,000 followers of 1,000 conversations; ``"1000x1"``: of one.

    Raises:
        UsageError: not ``N`` or ``NxC`` with positive integers.
    """
    followers, _, conversations = text.strip().lower().partition("x")
    try:
        f = int(followers.replace("_", ""))
        c = int(conversations.replace("_", "")) if conversations else f
    except ValueError:
        raise UsageError(
            f"a follow shape is N or NxC (followers x conversations), got {text!r}"
        ) from None
    if f < 1 or c < 1:
        raise UsageError(f"a follow shape counts at least one of each, got {text!r}")
    return f, c


def with_push(url: str, push: bool) -> str:
    """``url`` with its ``push`` query option set."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "push"]
    query.append(("push", "true" if push else "false"))
    return urlunsplit(parts._replace(query=urlencode(query)))


@dataclass(frozen=True)
class Unavailable:
    """Why a mode cannot be measured on a backend."""

    reason: str


def mode_url(url: str, mode: str) -> str | Unavailable:
    """The URL both sides of ``mode`` open, or why the backend cannot run it."""
    if mode == "local":
        return url
    if scheme_of(url) in IN_PROCESS_SCHEMES:
        return Unavailable("its data never leave the process: no producer can be elsewhere")
    wanted = with_push(url, mode == "push")
    try:
        create_stores(wanted)
    except UsageError as exc:
        if mode == "push":  # the refusal's first clause (the rest lists every option)
            return Unavailable(f"no push option ({str(exc).split(';')[0]})")
        return url  # no option: it never pushes
    return wanted


# --- counting reads -----------------------------------------------------------------


class ReadCounter:
    """Counts the followers' store reads: wraps the bundle's read methods, counting only
    calls made in a follower's task (a producer sharing the bundle is not counted)."""

    def __init__(self, stores: Stores) -> None:
        self.count = 0
        self.target = 0
        self.reached = asyncio.Event()
        """Set once :attr:`count` is at least :attr:`target`."""
        for store_name, method in COUNTED_READS:
            store = getattr(stores, store_name)
            setattr(store, method, self._counting(getattr(store, method)))

    def _counting(self, read: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def counted(*args: Any, **kwargs: Any) -> Any:
            if _FOLLOWING.get():
                self.count += 1
                if self.count >= self.target:
                    self.reached.set()
            return await read(*args, **kwargs)

        return counted


# --- one row ------------------------------------------------------------------------


@dataclass
class _Follower:
    """One follower's yields: (index, monotonic ns) of each update, and how it ended."""

    conversation: int
    yields: list[tuple[int, int]]
    verdict: str | None = None
    error: str | None = None


async def _follow(
    stores: Stores, key: ConversationKey, principal: str, f: _Follower, after: float = 0.0
) -> None:
    """Follow ``key`` from ``after`` seconds on, logging each update into ``f``."""
    await asyncio.sleep(after)
    _FOLLOWING.set(True)
    try:
        async for event in follow(
            stores,
            key,
            principal,
            message_id=message_id(key.session_id),
            poll=POLL,
            safety_poll=SAFETY_POLL,
        ):
            now = time.monotonic_ns()
            if isinstance(event, FollowUpdate):
                f.yields.append((event.index, now))
            elif isinstance(event, FollowEnd):
                f.verdict = event.verdict
    except Exception as exc:  # reported in the row, not fatal to the run
        f.error = f"{type(exc).__name__}: {exc}"


def latencies(
    writes: Sequence[Write], followers: Sequence[_Follower]
) -> tuple[list[int], list[int], int]:
    """(from return, from issue, in ns; writes some follower never yielded)."""
    by_conversation: dict[int, list[Write]] = {}
    for w in writes:
        by_conversation.setdefault(w[0], []).append(w)
    from_return: list[int] = []
    from_issue: list[int] = []
    missed = 0
    for f in followers:
        mine = sorted(by_conversation.get(f.conversation, ()), key=lambda w: w[1])
        at = 0
        for _, index, issued, returned in mine:
            while at < len(f.yields) and f.yields[at][0] < index:
                at += 1
            if at == len(f.yields):
                missed += 1
                continue
            seen = f.yields[at][1]
            from_return.append(seen - returned)
            from_issue.append(seen - issued)
    return from_return, from_issue, missed


def _ms(values: list[int], pct: float) -> float | None:
    ordered = sorted(values)
    return round(percentile(ordered, pct), 3) if ordered else None


def _load() -> float | None:
    """The machine's one-minute load average (None where the OS has none): on a shared
    machine, what else ran beside the row."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


class _Elsewhere:
    """The producers in a process of their own (this Python, this environment)."""

    def __init__(self, plan: ProducerPlan) -> None:
        self.plan = plan
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "agentstores_tools.bench.follow_producer",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            limit=1 << 26,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(plan_json(self.plan).encode() + b"\n")
        await self.proc.stdin.drain()
        line = await asyncio.wait_for(self.proc.stdout.readline(), START_TIMEOUT)
        if line.strip() != b"ready":
            raise RuntimeError(await self._failure("did not claim its turns"))

    async def go(self) -> list[Write]:
        assert self.proc is not None and self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.proc.stdin.write(b"go\n")
        await self.proc.stdin.drain()
        line = await self.proc.stdout.readline()
        if not line.strip():
            raise RuntimeError(await self._failure("ended without its write log"))
        await self.proc.wait()
        return [(int(c), int(i), int(t0), int(t1)) for c, i, t0, t1 in json.loads(line)["writes"]]

    async def _failure(self, what: str) -> str:
        assert self.proc is not None and self.proc.stderr is not None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.proc.wait(), 10.0)
        err = (await self.proc.stderr.read()).decode(errors="replace").strip().splitlines()
        return f"the producer process {what}: {err[-1] if err else 'no message'}"

    async def stop(self) -> None:
        proc = self.proc
        if proc is not None and proc.returncode is None:
            proc.kill()
            await proc.wait()


async def _row(
    url: str,
    mode: str,
    shape: tuple[int, int],
    tenant: str,
    cfg: FollowConfig,
    note: Callable[[str], None],
    label: str,
) -> dict[str, Any]:
    followers_n, conversations_n = shape
    interval, writes_n = cfg.pace(conversations_n)
    row: dict[str, Any] = {
        "mode": mode,
        "followers": followers_n,
        "conversations": conversations_n,
        "interval_s": round(interval, 3),
        "writes": conversations_n * writes_n,
    }
    chosen = mode_url(url, mode)
    if isinstance(chosen, Unavailable):
        row["unavailable"] = chosen.reason
        return row
    stores = create_stores(chosen)
    principal = "follow-bench"
    sessions = [f"{label}-{i}" for i in range(conversations_n)]
    plan = ProducerPlan(chosen, tenant, principal, sessions, interval, writes_n)
    await stores.open()
    elsewhere: _Elsewhere | None = None
    local: asyncio.Task[list[Write]] | None = None
    tasks: list[asyncio.Task[None]] = []
    try:
        remote = stores.wakeups.remote
        if mode == "push" and not remote:
            row["unavailable"] = "push=true accepted, but the bundle hears no other process"
            return row
        if mode == "poll" and remote:
            row["unavailable"] = "push=false accepted, but the bundle still hears other processes"
            return row
        counter = ReadCounter(stores)
        go = asyncio.get_running_loop().create_future()
        claimed = asyncio.Event()

        async def on_claimed() -> None:
            claimed.set()

        if mode == "local":
            local = asyncio.create_task(produce(stores, plan, on_claimed, go))
            waiting = asyncio.ensure_future(claimed.wait())
            await asyncio.wait(
                {local, waiting}, timeout=START_TIMEOUT, return_when=asyncio.FIRST_COMPLETED
            )
            waiting.cancel()
            if local.done():
                await local  # it failed before claiming: its error is the row's
            if not claimed.is_set():
                raise TimeoutError(f"the producers did not claim in {START_TIMEOUT:g} s")
        else:
            elsewhere = _Elsewhere(plan)
            await elsewhere.start()
        note(f"follow {mode} {followers_n}x{conversations_n}: claimed; starting followers")
        per = followers_n // conversations_n
        followers = [_Follower(i // per, []) for i in range(followers_n)]
        arrivals = SAFETY_POLL if followers_n > 1 else 0.0
        all_in = time.monotonic() + arrivals
        tasks = [
            asyncio.create_task(
                _follow(
                    stores,
                    plan.key(sessions[f.conversation]),
                    principal,
                    f,
                    after=arrivals * i / followers_n,
                )
            )
            for i, f in enumerate(followers)
        ]
        # A first look at each conversation's row and recording: followers of one answer
        # share reads (agentstores.protocol.shared_reads), so not one per follower.
        counter.target = 2 * conversations_n
        await asyncio.wait_for(counter.reached.wait(), START_TIMEOUT)
        await asyncio.sleep(max(0.0, all_in - time.monotonic()))  # every follower in
        await asyncio.sleep(0.5)  # and answered
        before = counter.count
        started = time.monotonic()
        await asyncio.sleep(cfg.idle)
        reads = counter.count - before
        idle_s = time.monotonic() - started
        row["idle_reads_per_follower_s"] = round(reads / idle_s / followers_n, 3)
        note(f"follow {mode} {followers_n}x{conversations_n}: {row['writes']} writes")
        cpu, wall = time.process_time(), time.monotonic()
        go.set_result(None)
        if local is not None:
            log = await local
        else:
            assert elsewhere is not None
            log = await elsewhere.go()
        await asyncio.wait_for(asyncio.gather(*tasks), START_TIMEOUT)
        row["cpu_percent"] = round(100 * (time.process_time() - cpu) / (time.monotonic() - wall), 1)
        row["load_1m"] = _load()
        _summarize(row, log, followers)
    except Exception as exc:  # reported in the row, not fatal to the run
        row["errors"] = row.get("errors", 0) + 1
        row["first_error"] = f"{type(exc).__name__}: {exc}"
    finally:
        for task in [*tasks, *([local] if local is not None else [])]:
            task.cancel()
        await asyncio.gather(*tasks, *([local] if local else []), return_exceptions=True)
        if elsewhere is not None:
            await elsewhere.stop()
        await stores.close()
    return row


def _summarize(row: dict[str, Any], log: list[Write], followers: list[_Follower]) -> None:
    """Put the latency percentiles and what went wrong (if anything) into ``row``."""
    from_return, from_issue, missed = latencies(log, followers)
    row["samples"] = len(from_return)
    for name, values in (("", from_return), ("issue_", from_issue)):
        row[f"{name}p50_ms"] = _ms(values, 50)
        row[f"{name}p99_ms"] = _ms(values, 99)
        row[f"{name}max_ms"] = _ms(values, 100)
    problems = [f.error for f in followers if f.error]
    problems += [f"follower ended {f.verdict}" for f in followers if f.verdict != "done"]
    if len(log) != row["writes"]:
        problems.append(f"{len(log)} writes logged of {row['writes']}")
    if missed:
        problems.append(f"{missed} writes never yielded to a follower")
    row["errors"] = len(problems)
    if problems:
        row["first_error"] = problems[0]


async def run_follow(
    url: str,
    tenant: str,
    cfg: FollowConfig,
    note: Callable[[str], None],
    *,
    keep: bool = False,
) -> dict[str, Any]:
    """Every mode at every shape on ``url``, one row each (a mode the backend cannot run
    is a row saying why); the conversations are deleted afterwards unless ``keep``."""
    cfg.validate()
    redaction = Redaction(url)
    rows: list[dict[str, Any]] = []
    labels: list[tuple[str, int]] = []
    for mode in cfg.modes:
        for n, shape in enumerate(cfg.shapes):
            label = f"follow-{mode}-{n}"
            note(f"follow {mode} {shape[0]}x{shape[1]}")
            row = await _row(url, mode, shape, tenant, cfg, note, label)
            if "unavailable" not in row:
                labels.append((label, shape[1]))
            rows.append(redaction.data(row))
    if not keep and labels:
        note("follow: removing its conversations")
        await _cleanup(url, tenant, labels)
    return {
        "poll_s": POLL,
        "safety_poll_s": SAFETY_POLL,
        "seconds": cfg.seconds,
        "idle_s": cfg.idle,
        "rate": cfg.rate,
        "rows": rows,
    }


async def _cleanup(url: str, tenant: str, labels: list[tuple[str, int]]) -> None:
    """Delete every conversation a row wrote (best effort: the figures are the result)."""
    stores = create_stores(url)
    await stores.open()
    try:
        for label, count in labels:
            for i in range(count):
                with contextlib.suppress(Exception):
                    await stores.conversations.delete(
                        ConversationKey(tenant, f"{label}-{i}"), "follow-bench"
                    )
    finally:
        await stores.close()
