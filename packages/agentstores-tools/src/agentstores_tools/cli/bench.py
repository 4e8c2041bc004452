"""``agentstores bench``: throughput and latency of a backend beside its raw floor."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from agentstores.cli import CANNOT_RUN, FOUND_PROBLEM, OK, HelpFormatter, epilog
from agentstores.errors import AgentStoresError

from ..bench.follow import DEFAULT_MODES, DEFAULT_SHAPES, MODES, FollowConfig, parse_shape
from ..bench.harness import DEFAULT_LENGTHS, DEFAULT_OPS, OPERATIONS, BenchConfig, run_bench
from ..bench.plot import check_available as check_plot
from ..bench.plot import plot_runs
from ..bench.report import render
from ..redaction import Redaction


def _csv(value: str) -> tuple[str, ...]:
    if value.strip().lower() in {"", "none"}:
        return ()
    return tuple(part.strip() for part in value.split(",") if part.strip())


def _lengths(value: str) -> tuple[int, ...]:
    try:
        return tuple(int(part.replace("_", "")) for part in _csv(value))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"lengths are integers: {value!r}") from exc


def _shapes(value: str) -> tuple[tuple[int, int], ...]:
    try:
        return tuple(parse_shape(part) for part in _csv(value))
    except AgentStoresError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _shape_text(shape: tuple[int, int]) -> str:
    return str(shape[0]) if shape[0] == shape[1] else f"{shape[0]}x{shape[1]}"


def register(subparsers: Any) -> None:
    """Add the ``bench`` subcommand to ``subparsers``."""
    p = subparsers.add_parser(
        "bench",
        help="measure a backend (ops/s, p50/p99) beside its raw-driver floor",
        description=(
            "A benchmark, not a test. Operations: "
            + "; ".join(f"{k}: {v}" for k, v in OPERATIONS.items())
            + ". Without --url it measures the file backend in a fresh temporary directory."
        ),
        epilog=epilog(
            "every operation measured without an error",
            "an operation reported errors (its figures are suspect)",
            "usage error, or the benchmark could not run (bad URL or option, backend unreachable)",
        ),
        formatter_class=HelpFormatter,
    )
    p.add_argument(
        "--url",
        action="append",
        help="backend URL; repeat to measure several backends one after another "
        "(default: the file backend in a fresh temp dir)",
    )
    p.add_argument(
        "--clients", type=int, default=32, help="concurrent clients (default: %(default)s)"
    )
    p.add_argument(
        "--seconds",
        type=float,
        default=5.0,
        help="measured seconds per operation (default: %(default)s)",
    )
    p.add_argument(
        "--warmup",
        type=float,
        default=1.0,
        help="warm-up seconds per operation (default: %(default)s)",
    )
    p.add_argument(
        "--rounds",
        type=int,
        default=4,
        help="adapter/floor alternating CAS rounds (default: %(default)s)",
    )
    p.add_argument(
        "--ops",
        type=_csv,
        default=DEFAULT_OPS,
        help=f"comma-separated, or none (default: {','.join(DEFAULT_OPS)})",
    )
    p.add_argument(
        "--lengths",
        type=_lengths,
        default=DEFAULT_LENGTHS,
        help="transcript lengths for append/read cost, or none "
        f"(default: {','.join(str(n) for n in DEFAULT_LENGTHS)})",
    )
    p.add_argument(
        "--no-floor", action="store_true", help="skip the raw-driver floor (default: measure it)"
    )
    p.add_argument(
        "--capacity",
        action="store_true",
        help="also run the heartbeat capacity search (default: off)",
    )
    p.add_argument(
        "--capacity-gc-freeze",
        action="store_true",
        help="move every object alive once the leases are claimed out of the garbage "
        "collector's passes (gc.freeze()) while beats are measured, as a server holding "
        "many leases may (default: off)",
    )
    p.add_argument(
        "--capacity-per-call",
        action="store_true",
        help="capacity beats as one CAS each instead of through the heartbeat coalescer's "
        "batches (default: batched, as leases beat)",
    )
    p.add_argument(
        "--p99-ms",
        type=float,
        default=100.0,
        help="capacity p99 CAS threshold (default: %(default)s)",
    )
    p.add_argument(
        "--capacity-budget",
        type=float,
        default=120.0,
        help="capacity search time bound in seconds (default: %(default)s)",
    )
    p.add_argument(
        "--capacity-window",
        type=float,
        default=5.0,
        help="measured seconds per K (default: %(default)s)",
    )
    p.add_argument(
        "--capacity-start", type=int, default=16, help="first K tried (default: %(default)s)"
    )
    p.add_argument(
        "--capacity-max", type=int, default=100_000, help="largest K tried (default: %(default)s)"
    )
    p.add_argument(
        "--follow",
        action="store_true",
        help="also measure follow latency (a producer's recording write to a follower's "
        "follow() yielding it) and idle followers' store reads (default: off)",
    )
    p.add_argument(
        "--follow-modes",
        type=_csv,
        default=DEFAULT_MODES,
        help="comma-separated: "
        + "; ".join(f"{k}: {v}" for k, v in MODES.items())
        + f" (default: {','.join(DEFAULT_MODES)})",
    )
    p.add_argument(
        "--follow-shapes",
        type=_shapes,
        default=DEFAULT_SHAPES,
        help="comma-separated N (N followers of N conversations, each its own producer) "
        "or NxC (N followers spread over C conversations) "
        f"(default: {','.join(_shape_text(s) for s in DEFAULT_SHAPES)})",
    )
    p.add_argument(
        "--follow-seconds",
        type=float,
        default=10.0,
        help="seconds of writes per mode and shape (default: %(default)s)",
    )
    p.add_argument(
        "--follow-interval",
        type=float,
        default=0.1,
        help="seconds between two writes of one conversation (default: %(default)s)",
    )
    p.add_argument(
        "--follow-rate",
        type=float,
        default=500.0,
        help="most writes per second over all conversations: many conversations each "
        "write less often (default: %(default)s)",
    )
    p.add_argument(
        "--follow-idle",
        type=float,
        default=6.0,
        help="seconds the live turns write nothing while the followers' reads are "
        "counted (default: %(default)s)",
    )
    p.add_argument(
        "--keep",
        action="store_true",
        help="leave the benchmark data in the store (default: removed)",
    )
    p.add_argument(
        "--seed", type=int, default=0, help="seed of the generated workload (default: %(default)s)"
    )
    p.add_argument(
        "--json", action="store_true", help="print the results as JSON (default: a table)"
    )
    p.add_argument(
        "--plot",
        metavar="DIR",
        help="also write PNG figures into DIR: throughput beside the floor, latency "
        "percentiles, cost by transcript length, the capacity curve; needs matplotlib, "
        "pip install 'agentstores-tools[plot]' (default: no figures)",
    )
    p.add_argument(
        "--quiet", action="store_true", help="no progress lines on stderr (default: shown)"
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Benchmark each ``--url`` in turn and print the report (every URL's secrets
    masked); exit 1 when an operation reported an error (the figures are suspect), 2 on
    a usage or store error."""

    redaction = Redaction(*(args.url or []))

    def progress(msg: str) -> None:
        print(f"bench: {redaction.text(msg)}", file=sys.stderr, flush=True)

    configs = [_config(args, url, progress) for url in (args.url or [None])]
    runs: list[dict[str, Any]] = []
    try:
        if args.plot:
            check_plot()
        for cfg in configs:
            runs.append(asyncio.run(run_bench(cfg)))
        written = plot_runs(runs, args.plot) if args.plot else []
    except AgentStoresError as exc:
        # A backend's error may quote the URL it was given.
        print(f"agentstores bench: {redaction.text(str(exc))}", file=sys.stderr)
        return CANNOT_RUN
    if args.json:
        print(json.dumps({"runs": runs}, indent=2))
    else:
        print("\n".join(render(r) for r in runs), end="")
    for path in written:
        print(f"bench: wrote {path}", file=sys.stderr)
    return FOUND_PROBLEM if any(_failed(r) for r in runs) else OK


def _config(args: argparse.Namespace, url: str | None, progress: Any) -> BenchConfig:
    return BenchConfig(
        url=url,
        clients=args.clients,
        seconds=args.seconds,
        warmup=args.warmup,
        rounds=args.rounds,
        ops=args.ops,
        lengths=args.lengths,
        floor=not args.no_floor,
        capacity=args.capacity,
        capacity_batched=not args.capacity_per_call,
        p99_ms=args.p99_ms,
        capacity_budget=args.capacity_budget,
        capacity_window=args.capacity_window,
        capacity_start=args.capacity_start,
        capacity_max=args.capacity_max,
        capacity_gc_freeze=args.capacity_gc_freeze,
        follow=_follow_config(args) if args.follow else None,
        keep=args.keep,
        seed=args.seed,
        progress=None if args.quiet else progress,
    )


def _follow_config(args: argparse.Namespace) -> FollowConfig:
    return FollowConfig(
        modes=args.follow_modes,
        shapes=args.follow_shapes,
        seconds=args.follow_seconds,
        interval=args.follow_interval,
        rate=args.follow_rate,
        idle=args.follow_idle,
    )


def _failed(result: dict[str, Any]) -> bool:
    """Exit 1 when any measured operation reported an error (the figures are suspect)."""
    sections: list[dict[str, Any]] = list(result["operations"].values())
    if result["floor"] is not None:
        sections.append(result["floor"]["cas"])
    for entry in result["lengths"]:
        sections += [entry["append"], entry["read"]]
    if result["capacity"] is not None:
        sections += result["capacity"]["steps"]
    if result.get("follow") is not None:
        sections += result["follow"]["rows"]
    return any(s.get("errors") for s in sections)
