"""The benchmark: per-operation throughput and latency, the raw floor, length costs, capacity.

Not a test: it measures, it asserts nothing about speed. Every figure comes from one run
on one machine; compare the adapter with its raw floor (measured in the same run, in
alternating rounds) rather than with numbers from elsewhere.

- **Operations**: ``clients`` concurrent clients, each with its own opened
  :class:`~agentstores.stores.Stores` bundle (so its own connections), each on its own
  keys, run one operation flat out for ``seconds`` after a ``warmup``.
- **Floor**: the backend's :class:`~agentstores_tools.bench.floor.RawFloor` CAS runs with the
  same clients in rounds alternating with the adapter's CAS (A F, F A, ...). Neither
  builds its arguments in the timed window: each client's key is built once, and the
  rows of the CAS epochs ahead before each window (the floor's are ints).
- **Lengths**: one client appends to and reads by index from a transcript of each
  length, built beforehand with batched appends of up to 1000 messages. Each timed
  append is followed by an untimed ``truncate`` back to the length, so every append
  lands on a transcript of exactly that length.
- **Capacity**: K held :class:`~agentstores.protocol.lease.Lease` objects on one bundle
  (one server's leases) run their real heartbeat, once a second each: the loop's
  :class:`~agentstores.protocol.ticker.HeartbeatTicker` and the store's
  :class:`~agentstores.protocol.heartbeats.HeartbeatCoalescer` (batched
  ``compare_and_swap_many``), or one CAS per beat with ``capacity_batched=False``
  (``LeaseConfig(coalesce=False)``). A step search finds the largest K whose p99 beat
  latency, from the moment a beat was due to the moment its lease had the answer, stays
  under a threshold, with at least 95% of the window's beats answered and no lease lost.
- **Follow**: latency from a producer's recording write to a follower's ``follow()``
  yielding it, and the store reads of idle followers, per mode (in-process wake-ups,
  push, polling) and number of followers (:mod:`.follow`).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import gc
import itertools
import math
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from agentstores.errors import AgentStoresError, UsageError
from agentstores.keys import ConversationKey
from agentstores.models import Message, RecordedEvent, SupervisionRow
from agentstores.plugins import create_stores, get_registry, scheme_of, unknown_scheme
from agentstores.protocol.heartbeats import coalescer_for
from agentstores.protocol.lease import Lease, LeaseConfig
from agentstores.stores import Stores
from agentstores.urls import redact_url

from ..redaction import Redaction
from .floor import RawFloor, load_floor
from .follow import FollowConfig, run_follow
from .stats import Sample, percentile

OPERATIONS: dict[str, str] = {
    "cas": "supervision CAS taking the next epoch (lease takeover)",
    "heartbeat": "supervision CAS at the same epoch (the 1 s heartbeat)",
    "put": "recording put of a ~1 KiB cumulative snapshot",
    "append": "transcript append of one message",
    "read": "transcript read of one message by index (100-message transcript)",
    "recent": "recent(20) on a 100-message transcript",
    "list": "list_conversations page of 20 (25 owned conversations)",
}
DEFAULT_OPS = tuple(OPERATIONS)
DEFAULT_LENGTHS = (10, 1_000, 100_000)
BATCH = 1000
"""Largest append batch used to build long transcripts."""
READ_LENGTH = 100
LIST_OWNED = 25
SNAPSHOT = "x" * 1000
STAGED_ROWS = 2048
"""CAS rows built ahead per client before each timed window."""


@dataclass
class BenchConfig:
    """What to measure and for how long. ``url=None`` means a fresh temp file store."""

    url: str | None = None
    clients: int = 32
    seconds: float = 5.0
    warmup: float = 1.0
    rounds: int = 4
    ops: tuple[str, ...] = DEFAULT_OPS
    lengths: tuple[int, ...] = DEFAULT_LENGTHS
    floor: bool = True
    capacity: bool = False
    capacity_batched: bool = True
    p99_ms: float = 100.0
    capacity_budget: float = 120.0
    capacity_window: float = 5.0
    capacity_start: int = 16
    capacity_max: int = 100_000
    capacity_gc_freeze: bool = False
    follow: FollowConfig | None = None
    """The follow-latency section (None: not measured)."""
    keep: bool = False
    seed: int = 0
    progress: Callable[[str], None] | None = None

    def validate(self) -> None:
        """Refuse a configuration that cannot be measured, before anything connects.

        Raises:
            UsageError: a count, duration or threshold is out of range, or an operation is unknown.
        """
        if self.clients < 1:
            raise UsageError("clients must be at least 1")
        if self.seconds <= 0 or self.warmup < 0:
            raise UsageError("seconds must be positive and warmup not negative")
        if self.rounds < 1:
            raise UsageError("rounds must be at least 1")
        unknown = [op for op in self.ops if op not in OPERATIONS]
        if unknown:
            raise UsageError(f"unknown operations {unknown}; choose from {sorted(OPERATIONS)}")
        if any(n < 1 for n in self.lengths):
            raise UsageError("transcript lengths must be at least 1")
        if self.p99_ms <= 0 or self.capacity_window <= 0 or self.capacity_budget <= 0:
            raise UsageError("p99_ms, capacity_window and capacity_budget must be positive")
        if not 1 <= self.capacity_start <= self.capacity_max:
            raise UsageError("need 1 <= capacity_start <= capacity_max")
        if self.follow is not None:
            self.follow.validate()


@dataclass
class _Client:
    """One benchmark client: its own bundle, principal and keys, and the state its ops need."""

    index: int
    stores: Stores
    tenant: str
    principal: str
    rng: random.Random
    cas_epoch: int = 1
    cas_rows: collections.deque[SupervisionRow] = field(default_factory=collections.deque)
    """Rows for the next CAS epochs, built before a timed window (:func:`_stage_cas_rows`)."""
    hb_epoch: int = 1
    rec_index: int = 0
    appended: int = 0
    floor_op: int = 0
    keys: dict[ConversationKey, None] = field(default_factory=dict)
    """Every key this client wrote under, in order (for cleanup)."""
    named: dict[str, ConversationKey] = field(default_factory=dict)

    def key(self, what: str) -> ConversationKey:
        """The client's key named ``what``, built once (a timed operation then builds no
        key, as the raw floor builds no path)."""
        key = self.named.get(what)
        if key is None:
            key = self.named[what] = ConversationKey(self.tenant, f"{what}-{self.index}")
            self.keys[key] = None
        return key


class BenchFailure(AgentStoresError):
    """An operation returned something a correct store never returns here."""


def _messages(prefix: str, start: int, count: int) -> list[Message]:
    return [
        Message(
            id=f"{prefix}{n}",
            role="user" if n % 2 == 0 else "assistant",
            content={"text": f"message {n} " + "lorem ipsum " * 8},
        )
        for n in range(start, start + count)
    ]


async def _build_transcript(
    stores: Stores, key: ConversationKey, principal: str, length: int
) -> None:
    """Append ``length`` messages in batches of up to :data:`BATCH`."""
    done = 0
    while done < length:
        n = min(BATCH, length - done)
        await stores.conversations.append_messages(key, principal, _messages("b", done, n))
        done += n


# --- operations ---------------------------------------------------------------------

Op = Callable[[_Client], Awaitable[None]]


async def _prepare(client: _Client, ops: tuple[str, ...]) -> None:
    """Create the keys each chosen operation works on (untimed)."""
    s, p = client.stores, client.principal
    for op, what in (("cas", "cas"), ("heartbeat", "hb")):
        if op in ops:
            row = SupervisionRow("running", "turn", 1)
            if not await s.supervision.compare_and_swap(client.key(what), p, None, row):
                raise BenchFailure(f"initial {op} claim refused")
    if "read" in ops or "recent" in ops:
        await _build_transcript(s, client.key("read"), p, READ_LENGTH)
    if "list" in ops:
        for n in range(LIST_OWNED):
            await s.conversations.append_messages(client.key(f"list{n}"), p, _messages("l", 0, 1))


def _stage_cas_rows(clients: list[_Client]) -> None:
    """Build the rows the next CAS window will write, untimed: a timed CAS then builds no
    argument, as the raw floor, whose value is an int, builds none. A client that uses
    them all builds the rest in the window."""
    for c in clients:
        rows = c.cas_rows
        epoch = rows[-1].epoch if rows else c.cas_epoch
        while len(rows) < STAGED_ROWS:
            epoch += 1
            rows.append(SupervisionRow("running", "turn", epoch))


async def _op_cas(c: _Client) -> None:
    rows = c.cas_rows
    row = rows.popleft() if rows else None
    if row is None or row.epoch != c.cas_epoch + 1:
        rows.clear()
        row = SupervisionRow("running", "turn", c.cas_epoch + 1)
    if not await c.stores.supervision.compare_and_swap(c.key("cas"), c.principal, c.cas_epoch, row):
        raise BenchFailure(f"CAS at epoch {c.cas_epoch} refused on the client's own key")
    c.cas_epoch += 1


async def _op_heartbeat(c: _Client) -> None:
    row = SupervisionRow("running", "turn", c.hb_epoch)
    if not await c.stores.supervision.compare_and_swap(c.key("hb"), c.principal, c.hb_epoch, row):
        raise BenchFailure("heartbeat CAS refused on the client's own key")


async def _op_put(c: _Client) -> None:
    c.rec_index += 1
    event = RecordedEvent(c.rec_index, {"text": SNAPSHOT}, "turn", 1)
    if not await c.stores.recording.put(c.key("rec"), c.principal, event):
        raise BenchFailure("recording put refused")


async def _op_append(c: _Client) -> None:
    c.appended += 1
    msg = Message(f"a{c.appended}", "assistant", {"text": "lorem ipsum " * 8})
    stored = await c.stores.conversations.append_messages(c.key("app"), c.principal, [msg])
    if len(stored) != 1:
        raise BenchFailure(f"append stored {len(stored)} messages, expected 1")


async def _op_read(c: _Client) -> None:
    index = c.rng.randrange(READ_LENGTH)
    rows = await c.stores.conversations.get_transcript(c.key("read"), c.principal, index=index)
    if len(rows) != 1:
        raise BenchFailure(f"read by index returned {len(rows)} rows, expected 1")


async def _op_recent(c: _Client) -> None:
    rows = await c.stores.conversations.recent(c.key("read"), c.principal, 20)
    if len(rows) != 20:
        raise BenchFailure(f"recent(20) returned {len(rows)} rows")


async def _op_list(c: _Client) -> None:
    page = await c.stores.conversations.list_conversations(c.tenant, c.principal, limit=20)
    if len(page.items) != 20:
        raise BenchFailure(f"list returned {len(page.items)} conversations, expected 20")


_OPS: dict[str, Op] = {
    "cas": _op_cas,
    "heartbeat": _op_heartbeat,
    "put": _op_put,
    "append": _op_append,
    "read": _op_read,
    "recent": _op_recent,
    "list": _op_list,
}


async def _run_clients(clients: list[_Client], op: Op, seconds: float) -> Sample:
    """Every client runs ``op`` back to back until ``seconds`` pass; one window."""
    sample = Sample()
    start = time.perf_counter_ns()
    deadline = start + int(seconds * 1e9)

    async def worker(c: _Client) -> None:
        lat = sample.latencies_ns
        while True:
            t0 = time.perf_counter_ns()
            if t0 >= deadline:
                return
            try:
                await op(c)
            except Exception as exc:  # reported in the results, not fatal to the run
                sample.add_error(f"{type(exc).__name__}: {exc}")
                return
            lat.append(time.perf_counter_ns() - t0)

    await asyncio.gather(*(worker(c) for c in clients))
    sample.elapsed_ns = time.perf_counter_ns() - start
    return sample


def _floor_op(floor: RawFloor) -> Op:
    async def op(c: _Client) -> None:
        if not await floor.cas(c.index, c.floor_op):
            raise BenchFailure(f"raw floor CAS {c.floor_op} refused on the client's own key")
        c.floor_op += 1

    return op


# --- lengths ------------------------------------------------------------------------


async def _length_costs(
    client: _Client, length: int, cfg: BenchConfig, note: Callable[[str], None]
) -> dict[str, Any]:
    s, p = client.stores, client.principal
    key = client.key(f"len{length}")
    note(f"building a {length}-message transcript")
    t0 = time.perf_counter()
    await _build_transcript(s, key, p, length)
    build_s = time.perf_counter() - t0
    counter = 0

    async def append_then_trim(measure: bool) -> int | None:
        nonlocal counter
        counter += 1
        msg = Message(f"x{counter}", "user", {"text": "lorem ipsum " * 8})
        t = time.perf_counter_ns()
        await s.conversations.append_messages(key, p, [msg])
        elapsed = time.perf_counter_ns() - t
        await s.conversations.truncate(key, p, msg.id)
        return elapsed if measure else None

    async def read(measure: bool) -> int | None:
        index = client.rng.randrange(length)
        t = time.perf_counter_ns()
        rows = await s.conversations.get_transcript(key, p, index=index)
        elapsed = time.perf_counter_ns() - t
        if len(rows) != 1:
            raise BenchFailure(f"read by index at length {length} returned {len(rows)} rows")
        return elapsed if measure else None

    out: dict[str, Any] = {"length": length, "build_seconds": round(build_s, 3)}
    for name, fn in (("append", append_then_trim), ("read", read)):
        note(f"length {length}: {name}")
        out[name] = (await _sequential(fn, cfg.warmup, cfg.seconds)).summary(1)
    return out


async def _sequential(
    fn: Callable[[bool], Awaitable[int | None]], warmup: float, seconds: float
) -> Sample:
    """One client, back to back: warm up, then time ``fn`` (which times its own core)."""
    end = time.perf_counter() + warmup
    while time.perf_counter() < end:
        await fn(False)
    sample = Sample()
    start = time.perf_counter_ns()
    deadline = start + int(seconds * 1e9)
    while time.perf_counter_ns() < deadline:
        try:
            elapsed = await fn(True)
        except Exception as exc:
            sample.add_error(f"{type(exc).__name__}: {exc}")
            break
        assert elapsed is not None
        sample.latencies_ns.append(elapsed)
    # Throughput of the timed core only: the untimed cleanup between calls is excluded.
    sample.elapsed_ns = sum(sample.latencies_ns) or (time.perf_counter_ns() - start)
    return sample


# --- capacity -----------------------------------------------------------------------


class _BeatLog:
    """What every lease's ``on_beat`` reports during one capacity step: for each beat due
    inside the measured window, due-to-answered, due-to-sent and sent-to-answered (loop
    clock, ns)."""

    def __init__(self) -> None:
        self.start = self.end = 0.0
        self.lat: list[int] = []
        self.late: list[int] = []
        self.wire: list[int] = []

    def window(self, start: float, end: float) -> None:
        self.start, self.end = start, end
        self.lat, self.late, self.wire = [], [], []

    def __call__(self, due: float, sent: float, answered: float) -> None:
        if self.start <= due < self.end:
            self.lat.append(int((answered - due) * 1e9))
            self.late.append(int((sent - due) * 1e9))
            self.wire.append(int((answered - sent) * 1e9))


async def _grow_leases(
    leases: list[Lease],
    clients: list[_Client],
    k: int,
    lease_config: LeaseConfig,
    names: itertools.count[int],
) -> None:
    """Claim conversations until ``k`` leases exist (untimed): each client claims its
    share on its own bundle (a claim is a CAS on no row, as
    :func:`~agentstores.protocol.claim` writes it after judging the row absent). Every
    lease then lives on the first client's bundle, as one server's leases share its
    stores."""
    stores = clients[0].stores
    fresh: list[tuple[_Client, ConversationKey]] = []
    for _ in range(k - len(leases)):
        j = next(names)
        c = clients[j % len(clients)]
        fresh.append((c, c.key(f"hb{j}")))
    row = SupervisionRow("running", "turn", 1)

    async def claim(c: _Client) -> None:
        for owner, key in fresh:
            if owner is c and not await c.stores.supervision.compare_and_swap(
                key, c.principal, None, row
            ):
                raise BenchFailure("capacity lease claim refused")

    await asyncio.gather(*(claim(c) for c in clients))
    leases.extend(
        Lease(stores, key, c.principal, "turn", 1, lease_config=lease_config) for c, key in fresh
    )


async def _capacity_step(
    leases: list[Lease], k: int, cfg: BenchConfig, log: _BeatLog
) -> dict[str, Any]:
    """K leases run their real heartbeat (:meth:`Lease.start_heartbeat`: the loop's ticker,
    the store's coalescer) for a warm-up plus the window; p99 is taken over the beats due
    in the window, from the moment each was due to the moment its lease had the answer
    (timer lag, batching wait and round trip all count)."""
    loop = asyncio.get_running_loop()
    warm = max(1.0, cfg.warmup)
    measure_from = loop.time() + warm
    end = measure_from + cfg.capacity_window
    log.window(measure_from, end)
    held = leases[:k]
    coalescer = coalescer_for(held[0].stores.supervision) if cfg.capacity_batched else None
    batches = coalescer.batches if coalescer is not None else 0
    if cfg.capacity_gc_freeze:
        # What a server holding many leases may do once they are claimed: leave every
        # object alive now out of the collector's full passes (a full pass over 20,000
        # leases stopped the loop for up to 235 ms).
        gc.collect()
        gc.freeze()
    cpu = time.process_time()
    try:
        for lease in held:
            lease.start_heartbeat()
        # one interval past the window: a beat due at its end is answered before the count
        await asyncio.sleep(end + 1.0 - loop.time())
    finally:
        cpu = time.process_time() - cpu
        if cfg.capacity_gc_freeze:
            gc.unfreeze()
    sample = Sample()
    for lease in held:
        await lease.stop_heartbeat()
        if lease.lost.is_set():
            sample.add_error(f"lease lost: {lease.lost_reason!r}")
    lat, late, wire = sorted(log.lat), sorted(log.late), sorted(log.wire)
    expected = k * cfg.capacity_window
    p99 = percentile(lat, 99)
    completed = len(lat) / expected if expected else 0.0
    ok = sample.errors == 0 and not math.isnan(p99) and p99 < cfg.p99_ms and completed >= 0.95
    step: dict[str, Any] = {
        "k": k,
        "batches": coalescer.batches - batches if coalescer is not None else None,
        "beats": len(lat),
        "beats_expected": round(expected),
        "p50_ms": round(percentile(lat, 50), 3) if lat else None,
        "p99_ms": round(p99, 3) if lat else None,
        "late_p99_ms": round(percentile(late, 99), 3) if late else None,
        "sent_p99_ms": round(percentile(wire, 99), 3) if wire else None,
        "cpu_us_per_beat": round(cpu * 1e6 / (k * (warm + cfg.capacity_window + 1.0)), 1),
        "errors": sample.errors,
        "ok": ok,
    }
    if sample.first_error is not None:
        step["first_error"] = sample.first_error
    if not ok:  # leases lost here stay lost: the next step gets fresh ones
        kept = [lease for lease in held if not lease.lost.is_set()]
        if len(kept) < len(held):
            leases[:k] = kept
    return step


async def _capacity(
    clients: list[_Client], cfg: BenchConfig, note: Callable[[str], None]
) -> dict[str, Any]:
    """Doubling then bisection on K, stopped by ``capacity_budget`` seconds."""
    log = _BeatLog()
    config = LeaseConfig(coalesce=cfg.capacity_batched, on_beat=log)
    leases: list[Lease] = []
    names = itertools.count()
    steps: list[dict[str, Any]] = []
    lo, hi = 0, None
    k = cfg.capacity_start
    began = time.perf_counter()
    step_cost = max(1.0, cfg.warmup) + cfg.capacity_window + 1.5
    stopped = "converged"
    while True:
        if time.perf_counter() - began + step_cost > cfg.capacity_budget:
            stopped = "time budget"
            break
        note(f"capacity: K={k}")
        await _grow_leases(leases, clients, k, config, names)
        step = await _capacity_step(leases, k, cfg, log)
        steps.append(step)
        if step["ok"]:
            lo = k
            if hi is None:
                if k >= cfg.capacity_max:
                    stopped = "capacity_max reached"
                    break
                k = min(k * 2, cfg.capacity_max)
                continue
        else:
            hi = k
        if hi is not None and (hi - lo <= max(1, lo // 10)):
            break
        k = (lo + hi) // 2 if hi is not None else k
        if k <= lo:
            break
    return {
        "path": "batched" if cfg.capacity_batched else "per-call",
        "gc_freeze": cfg.capacity_gc_freeze,
        "p99_ms_threshold": cfg.p99_ms,
        "window_seconds": cfg.capacity_window,
        "max_k": lo,
        "first_failing_k": hi,
        "stopped_by": stopped,
        "steps": steps,
    }


# --- the run ------------------------------------------------------------------------


async def run_bench(cfg: BenchConfig) -> dict[str, Any]:
    """Run every section ``cfg`` asks for and return the JSON-safe results; the URL's
    secrets are masked in them and in every progress line."""
    cfg.validate()
    redaction = Redaction(cfg.url)
    progress = cfg.progress

    def note(msg: str) -> None:
        if progress is not None:
            progress(redaction.text(msg))

    tmpdir: str | None = None
    url = cfg.url
    if url is None:
        tmpdir = tempfile.mkdtemp(prefix="agentstores-bench-")
        url = f"file://{tmpdir}"
    try:
        return redaction.data(await _run(cfg, url, note, temporary=tmpdir is not None))
    finally:
        if tmpdir is not None:
            shutil.rmtree(tmpdir, ignore_errors=True)


async def _run(
    cfg: BenchConfig, url: str, note: Callable[[str], None], *, temporary: bool
) -> dict[str, Any]:
    registry = get_registry()
    info = registry.by_scheme(scheme_of(url))
    if info is None:
        raise UsageError(unknown_scheme(scheme_of(url), registry))
    tenant = f"bench-{uuid.uuid4().hex[:12]}"
    result: dict[str, Any] = {
        "backend": info.name,
        "url": redact_url(url),
        "temporary_store": temporary,
        "tenant": tenant,
        "started_at": datetime.now(UTC).isoformat(),
        "clients": cfg.clients,
        "seconds": cfg.seconds,
        "warmup": cfg.warmup,
        "machine": {
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
        },
        "operations": {},
        "floor": None,
        "ratio": None,
        "lengths": [],
        "capacity": None,
        "follow": None,
    }
    clients: list[_Client] = []
    floor: RawFloor | None = None
    try:
        note(f"opening {cfg.clients} client bundles on {redact_url(url)}")
        for i in range(cfg.clients):
            stores = create_stores(url)
            await stores.open()
            clients.append(
                _Client(i, stores, tenant, f"user-{i}", random.Random(cfg.seed * 7919 + i))
            )
        await asyncio.gather(*(_prepare(c, cfg.ops) for c in clients))
        if cfg.floor and "cas" in cfg.ops:
            floor = load_floor(info.name)
            if floor is not None:
                await floor.setup(url, cfg.clients)
        for name in cfg.ops:
            note(f"operation {name}")
            if name == "cas" and floor is not None:
                adapter, raw, rounds, usage = await _alternate(clients, floor, cfg)
                result["operations"]["cas"] = adapter.summary(cfg.clients)
                result["floor"] = {"name": floor.name or type(floor).__name__}
                result["floor"]["cas"] = raw.summary(cfg.clients)
                result["ratio"] = _ratio(result["operations"]["cas"], result["floor"]["cas"])
                result["ratio"]["rounds"] = rounds
                ratios = sorted(r for r in rounds if r is not None)
                result["ratio"]["rounds_median"] = (
                    round(statistics.median(ratios), 3) if ratios else None
                )
                result["ratio"]["client_usage"] = usage
                continue
            op = _OPS[name]
            await _run_clients(clients, op, cfg.warmup)
            if name == "cas":
                _stage_cas_rows(clients)
            sample = await _run_clients(clients, op, cfg.seconds)
            result["operations"][name] = sample.summary(cfg.clients)
        for length in cfg.lengths:
            result["lengths"].append(await _length_costs(clients[0], length, cfg, note))
        if cfg.capacity:
            result["capacity"] = await _capacity(clients, cfg, note)
        if cfg.follow is not None:
            result["follow"] = await run_follow(
                url, tenant, cfg.follow, note, keep=cfg.keep or temporary
            )
        if not temporary and not cfg.keep:
            note("removing benchmark data")
            await asyncio.gather(*(_cleanup(c) for c in clients))
    finally:
        if floor is not None:
            with contextlib.suppress(Exception):
                await floor.close()
        for c in clients:
            with contextlib.suppress(Exception):
                await c.stores.close()
    return result


async def _alternate(
    clients: list[_Client], floor: RawFloor, cfg: BenchConfig
) -> tuple[Sample, Sample, list[float | None], dict[str, Any] | None]:
    """Adapter CAS and floor CAS in alternating rounds (A F, F A, ...), after warming both;
    also each round's adapter/floor throughput ratio (a round's two windows are next to
    each other, so load that drifts across the run moves both), and what this process
    spent per operation on each side (:func:`_usage`)."""
    raw_op = _floor_op(floor)
    await _run_clients(clients, _op_cas, cfg.warmup)
    await _run_clients(clients, raw_op, cfg.warmup)
    adapter, raw = Sample(), Sample()
    ratios: list[float | None] = []
    spent: dict[int, list[float]] = {id(adapter): [0.0, 0.0], id(raw): [0.0, 0.0]}
    window = cfg.seconds / cfg.rounds
    for r in range(cfg.rounds):
        order: list[tuple[Op, Sample]] = [(_op_cas, adapter), (raw_op, raw)]
        if r % 2:
            order.reverse()
        got: dict[int, float] = {}
        for op, into in order:
            if op is _op_cas:
                _stage_cas_rows(clients)
            before = _usage()
            sample = await _run_clients(clients, op, window)
            after = _usage()
            if before is not None and after is not None:
                spent[id(into)][0] += after[0] - before[0]
                spent[id(into)][1] += after[1] - before[1]
            into.merge(sample)
            got[id(into)] = sample.ops_per_s()
        a, f = got[id(adapter)], got[id(raw)]
        ratios.append(round(a / f, 3) if f > 0 else None)
    usage: dict[str, Any] | None = None
    if _usage() is not None and adapter.latencies_ns and raw.latencies_ns:
        usage = {}
        for side, sample in (("adapter", adapter), ("floor", raw)):
            cpu, switches = spent[id(sample)]
            ops = len(sample.latencies_ns)
            usage[side] = {
                "cpu_ms_per_op": round(cpu / ops * 1000, 3),
                "voluntary_switches_per_op": round(switches / ops, 2),
            }
    return adapter, raw, ratios, usage


def _usage() -> tuple[float, float] | None:
    """This process's CPU seconds (user + system, every thread) and voluntary context
    switches so far; None where ``resource`` is missing (Windows). Per operation they
    say what the client side costs, which a machine's load moves much less than it
    moves throughput (a server in another process is not counted)."""
    try:
        import resource
    except ImportError:
        return None
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime, float(u.ru_nvcsw)


def _ratio(adapter: dict[str, Any], raw: dict[str, Any]) -> dict[str, Any]:
    def div(a: float | None, b: float | None) -> float | None:
        if a is None or b is None or b == 0:
            return None
        return round(a / b, 3)

    return {
        "cas_ops_per_s": div(adapter["ops_per_s"], raw["ops_per_s"]),
        "cas_p50": div(adapter["p50_ms"], raw["p50_ms"]),
        "cas_p99": div(adapter["p99_ms"], raw["p99_ms"]),
    }


async def _cleanup(c: _Client) -> None:
    """Erase what this client created (best effort: a failed delete is not the result)."""
    for key in c.keys:
        with contextlib.suppress(Exception):
            await c.stores.conversations.delete(key, c.principal)
