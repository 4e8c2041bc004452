"""The measurement: rounds interleaved across systems, medians, per-round ratios.

At each transcript length, every round visits every system (in an order rotated each
round) and times each operation a few times. Short lengths use a conversation built
fresh for each round, so every append lands near the stated length; long ones share
one conversation per system, grown to the length between lengths (the timed appends
add at most ``rounds * samples`` messages to it). Storage per append is the growth of
the system's database across its timed appends, divided by their number.

Listing is measured apart (:func:`measure_listing`): a user of its own gets as many
sessions as the length, and every system that offers a listing lists them all.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .systems import Listing, System, text_of

OPERATIONS = ("append", "first_user", "recent20", "list_sessions")
LABELS = {
    "append": "append one message",
    "first_user": "read the first user message",
    "recent20": "recent 20",
    "list_sessions": "list a user's sessions (as many)",
}
FRAMEWORK_OPERATIONS = ("append", "first_user", "recent20")
"""What a bridge's ``framework_cost(op, conv)`` times: the framework's own encoding or
decoding that ``op`` needs (its event or message objects built from stored rows, or
dumped for storing), with no store call. Any store of that framework pays it, its native
one included. A bridge's ``store_calls(op, conv)`` times, for the same operations, the
agentstores calls the bridge makes, made directly (no framework object, no bridge code:
ADK's ``get_session`` reads three records, the session and its app's and user's state);
the bridge's net overhead is measured over the two."""
FRESH_BELOW = 100
"""Lengths below this get a conversation built anew for every round."""


@dataclass
class Cell:
    """One system at one length: latencies per operation and round, storage growth."""

    latencies: dict[str, list[list[float]]] = field(default_factory=dict)
    grown_bytes: int = 0
    appends: int = 0

    def round_medians(self, op: str) -> list[float]:
        return [statistics.median(r) for r in self.latencies.get(op, []) if r]

    def median(self, op: str) -> float | None:
        """The median over every round; None where the system does not offer ``op``."""
        values = [x for r in self.latencies.get(op, []) for x in r]
        return statistics.median(values) if values else None


async def _timed(
    fn: Callable[[], Awaitable[Any]], samples: int, budget: float, into: list[float]
) -> None:
    """Up to ``samples`` calls, at least 2, stopping once ``budget`` seconds are spent."""
    began = time.perf_counter()
    for i in range(samples):
        t0 = time.perf_counter_ns()
        await fn()
        into.append((time.perf_counter_ns() - t0) / 1e6)
        if i >= 1 and time.perf_counter() - began > budget:
            return


async def measure(
    systems: Sequence[System],
    lengths: Sequence[int],
    rounds: int,
    samples: int,
    budget: float,
    note: Callable[[str], None],
) -> dict[int, dict[str, Cell]]:
    """Every system at every length; ``{length: {system name: Cell}}``."""
    grown: dict[str, tuple[Any, int]] = {}  # the shared long conversation and its length
    counter = {s.name: 10_000_000 for s in systems}  # message numbers of the timed appends
    out: dict[int, dict[str, Cell]] = {}
    for length in sorted(lengths):
        cells = {s.name: Cell({op: [] for op in OPERATIONS}) for s in systems}
        out[length] = cells
        if length >= FRESH_BELOW:
            for s in systems:
                conv, have = grown.get(s.name) or (await s.new(), 0)
                note(f"{s.name}: growing a transcript {have:,} -> {length:,}")
                t0 = time.perf_counter()
                if length > have:
                    await s.build(conv, have, length - have)
                note(f"{s.name}: built in {time.perf_counter() - t0:.1f} s")
                grown[s.name] = (conv, max(have, length))
        for r in range(rounds):
            order = list(systems[r % len(systems) :]) + list(systems[: r % len(systems)])
            note(f"length {length:,}: round {r + 1}/{rounds}")
            for s in order:
                cell = cells[s.name]
                if length < FRESH_BELOW:
                    conv = await s.new()
                    await s.build(conv, 0, length)
                else:
                    conv = grown[s.name][0]
                if await s.first_user(conv) != text_of(0):  # a wrong answer is no win
                    raise RuntimeError(f"{s.name}: the first user message read back wrong")
                if await s.recent(conv, 20) < min(20, length):
                    raise RuntimeError(f"{s.name}: recent(20) returned too few messages")
                before = await s.storage_bytes()
                lat: list[float] = []
                start = counter[s.name]

                async def append(s: System = s, conv: Any = conv) -> None:
                    counter[s.name] += 1
                    await s.append(conv, counter[s.name])

                await _timed(append, samples, budget, lat)
                cell.latencies["append"].append(lat)
                cell.appends += counter[s.name] - start
                cell.grown_bytes += await s.storage_bytes() - before
                for op, call in (
                    ("first_user", lambda s=s, conv=conv: s.first_user(conv)),
                    ("recent20", lambda s=s, conv=conv: s.recent(conv, 20)),
                ):
                    lat = []
                    await _timed(call, samples, budget, lat)
                    cell.latencies[op].append(lat)
                if getattr(s, "framework_cost", None):
                    # the rows the framework decodes, as they are now (after the appends)
                    await s.refresh_rows(conv)  # type: ignore[attr-defined]
                for prefix, call in _parts(s):
                    for op in FRAMEWORK_OPERATIONS:
                        lat = []
                        await _timed(
                            lambda op=op, conv=conv, call=call: call(op, conv),
                            samples,
                            budget,
                            lat,
                        )
                        cell.latencies.setdefault(f"{prefix}:{op}", []).append(lat)
    return out


async def measure_listing(
    systems: Sequence[System],
    lengths: Sequence[int],
    rounds: int,
    samples: int,
    budget: float,
    results: dict[int, dict[str, Cell]],
    note: Callable[[str], None],
) -> None:
    """Every system that lists sessions, at every length: its listing user is given
    sessions up to the length, then each round times listing them all (into
    ``results``' cells)."""
    listing = [s for s in systems if isinstance(s, Listing)]
    have = dict.fromkeys((s.name for s in listing), 0)
    for length in sorted(lengths):
        for s in listing:
            assert isinstance(s, Listing)
            note(f"{s.name}: sessions to list {have[s.name]:,} -> {length:,}")
            for n in range(have[s.name], length):
                await s.add_listed(n)
            have[s.name] = max(have[s.name], length)
            if (listed := await s.list_sessions()) != have[s.name]:
                raise RuntimeError(f"{s.name}: listed {listed} sessions of {have[s.name]}")
        for r in range(rounds):
            order = listing[r % len(listing) :] + listing[: r % len(listing)]
            for s in order:
                assert isinstance(s, Listing)
                lat: list[float] = []
                await _timed(s.list_sessions, samples, budget, lat)
                results[length][s.name].latencies["list_sessions"].append(lat)


def _parts(s: System) -> list[tuple[str, Callable[[str, Any], Awaitable[None]]]]:
    """What a bridge's calls are measured against, each timed on its own: the
    framework's work alone, the store calls alone, and both in one call, back to back
    (``glue``: what a user who writes the least glue by hand runs)."""
    framework = getattr(s, "framework_cost", None)
    store = getattr(s, "store_calls", None)
    parts: list[tuple[str, Callable[[str, Any], Awaitable[None]]]] = []
    if framework is not None:
        parts.append(("framework", framework))
    if store is not None:
        parts.append(("store", store))
    if framework is not None and store is not None:

        async def glue(op: str, conv: Any) -> None:
            if op == "append":  # the object dumped, then stored
                await framework(op, conv)
                await store(op, conv)
            else:  # the rows read, then decoded
                await store(op, conv)
                await framework(op, conv)

        parts.append(("glue", glue))
    return parts


def _ratios(base: Cell, other: Cell) -> dict[str, Any]:
    """``other / base`` per round, per operation both offer (above 1: base is faster)."""
    out: dict[str, Any] = {}
    for op in OPERATIONS:
        a, p = base.round_medians(op), other.round_medians(op)
        if not a or not p:
            continue
        per_round = [round(y / x, 3) for x, y in zip(a, p, strict=True) if x > 0]
        out[op] = {
            "per_round": per_round,
            "median": round(statistics.median(per_round), 3) if per_round else None,
            "min": min(per_round) if per_round else None,
            "max": max(per_round) if per_round else None,
        }
    return out


def _net_overhead(ours: Cell, bridge: Cell) -> dict[str, Any]:
    """``bridge / (the store calls it makes + the framework's own work)`` per round: what
    the bridge's own code adds beyond both. The store calls are the bridge's
    ``store_calls`` made directly where it times them, else agentstores' own call for the
    operation; the framework's work is zero for a framework with none (plain JSON)."""
    out: dict[str, Any] = {}
    for op in FRAMEWORK_OPERATIONS:
        a = bridge.round_medians(f"store:{op}") or ours.round_medians(op)
        p = bridge.round_medians(op)
        f = bridge.round_medians(f"framework:{op}") or [0.0] * len(p)
        timed_apart = f"framework:{op}" in bridge.latencies or f"store:{op}" in bridge.latencies
        if not (a and p and timed_apart):
            continue
        per_round = [round(z / (x + y), 3) for x, y, z in zip(a, f, p, strict=True)]
        out[op] = {
            "per_round": per_round,
            "median": round(statistics.median(per_round), 3),
            "min": min(per_round),
            "max": max(per_round),
        }
    return out


def _glue_overhead(bridge: Cell) -> dict[str, Any]:
    """``bridge / glue`` per round: the bridge against the same store calls and framework
    work run back to back in one call (see :func:`_parts`)."""
    out: dict[str, Any] = {}
    for op in FRAMEWORK_OPERATIONS:
        g, p = bridge.round_medians(f"glue:{op}"), bridge.round_medians(op)
        if not (g and p):
            continue
        per_round = [round(z / x, 3) for x, z in zip(g, p, strict=True) if x > 0]
        out[op] = {
            "per_round": per_round,
            "median": round(statistics.median(per_round), 3),
            "min": min(per_round),
            "max": max(per_round),
        }
    return out


def summarize(
    results: dict[int, dict[str, Cell]],
    pairs: dict[str, list[str]],
    bridges: dict[str, str],
    natives: dict[str, str],
) -> dict[str, Any]:
    """JSON-safe figures: per cell the median, the per-round medians, bytes per append;
    per peer the per-round ratios ``peer / agentstores`` (above 1: agentstores faster);
    per bridge (``bridges``: bridge -> agentstores system) its overhead, the per-round
    ratios ``bridge / agentstores``; per framework's native store (``natives``: native ->
    bridge) ``native / bridge``."""
    out: dict[str, Any] = {"lengths": {}}
    for length, cells in results.items():
        entry: dict[str, Any] = {}
        for name, cell in cells.items():
            entry[name] = {
                op: {
                    "median_ms": None if (m := cell.median(op)) is None else round(m, 4),
                    "round_medians_ms": [round(x, 4) for x in cell.round_medians(op)],
                    "samples": sum(len(r) for r in cell.latencies[op]),
                }
                for op in OPERATIONS
            }
            entry[name]["bytes_per_append"] = (
                round(cell.grown_bytes / cell.appends) if cell.appends else None
            )
        for ours, peers in pairs.items():
            for peer in peers:
                entry[peer]["ratio_to"] = {"system": ours, **_ratios(cells[ours], cells[peer])}
        for bridge, ours in bridges.items():
            entry[bridge]["overhead_to"] = {"system": ours, **_ratios(cells[ours], cells[bridge])}
            net = _net_overhead(cells[ours], cells[bridge])
            if net:
                entry[bridge]["net_overhead_to"] = {"system": "its store calls + framework", **net}
            glue = _glue_overhead(cells[bridge])
            if glue:
                entry[bridge]["glue_overhead_to"] = {"system": "the same work by hand", **glue}
            entry[bridge]["store_calls_ms"] = {
                op: round(statistics.median(x for r in cell_rounds for x in r), 4)
                for op in FRAMEWORK_OPERATIONS
                if (cell_rounds := cells[bridge].latencies.get(f"store:{op}"))
            }
            entry[bridge]["framework_ms"] = {
                op: round(statistics.median(x for r in cell_rounds for x in r), 4)
                for op in FRAMEWORK_OPERATIONS
                if (cell_rounds := cells[bridge].latencies.get(f"framework:{op}"))
            }
        for native, bridge in natives.items():
            entry[native]["ratio_to_bridge"] = {
                "system": bridge,
                **_ratios(cells[bridge], cells[native]),
            }
        out["lengths"][str(length)] = entry
    return out
