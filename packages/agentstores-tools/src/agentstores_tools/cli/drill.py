"""``agentstores drill [URL]``: the kill-and-resume drill against one backend."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from agentstores.cli import CANNOT_RUN, FOUND_PROBLEM, OK, HelpFormatter, epilog
from agentstores.errors import AgentStoresError

from ..drill import Timings, render, run_drill
from ..redaction import Redaction


def register(subparsers: Any) -> None:
    """Add the ``drill`` subcommand to ``subparsers``."""
    seed = Timings()
    p = subparsers.add_parser(
        "drill",
        help="kill and pause real producer processes mid-turn; prove nothing is lost",
        description=(
            "Runs producer, standby and follower processes against one backend. Round 1 "
            "SIGKILLs the producer mid-answer: the standby must see it dead on the store "
            "clock, take over with a higher epoch and finish from the checkpoint while the "
            "follower streams with no gap and no rollback. Round 2 SIGSTOPs the producer, "
            "lets the standby take over, then SIGCONTs it: every write it attempts must be "
            "refused. Without URL: the file backend in a fresh temporary directory."
        ),
        epilog=epilog(
            "the drill passed: nothing lost, duplicated or written stale",
            "the drill found a problem (a lost or duplicated message, a stale write that "
            "landed) or could not finish a round",
            "usage error, or the drill could not run (a bad URL or option, memory://, the "
            "backend unreachable)",
        ),
        formatter_class=HelpFormatter,
    )
    p.add_argument("url", nargs="?", help="backend URL (file://, postgresql://, redis://, ...)")
    p.add_argument(
        "--fast",
        action="store_true",
        help="about four times quicker timings than the defaults (heartbeat 0.25s, dead 1s)",
    )
    p.add_argument("--heartbeat", type=float, help=f"heartbeat interval (s, {seed.heartbeat})")
    p.add_argument("--dead-after", type=float, help=f"dead after (s, {seed.dead_after})")
    p.add_argument("--flush", type=float, help=f"recording flush interval (s, {seed.flush})")
    p.add_argument("--checkpoint", type=float, help=f"state checkpoint (s, {seed.checkpoint})")
    p.add_argument("--tick", type=float, help=f"seconds per revealed chunk ({seed.tick})")
    p.add_argument("--chunk", type=int, help=f"characters per tick ({seed.chunk})")
    p.add_argument("--length", type=int, help=f"answer length in characters ({seed.length})")
    p.add_argument(
        "--rounds",
        default="kill,pause",
        help="comma-separated rounds to run, each kill or pause (default kill,pause)",
    )
    p.add_argument(
        "--factory",
        metavar="MODULE:CALLABLE",
        help="make the stores with this callable (given the URL) instead of the plugin "
        "registry; it must be importable by the worker processes",
    )
    p.add_argument("--json", metavar="PATH", help="also write the result as JSON to PATH")
    p.add_argument("--keep", action="store_true", help="keep the default temporary directory")
    p.set_defaults(run=run)


def timings_from(args: argparse.Namespace) -> Timings:
    """The drill's timings: the defaults (or ``--fast``'s), overridden by each option given."""
    base = Timings.fast() if args.fast else Timings()
    overrides = {
        name: getattr(args, attr)
        for name, attr in (
            ("heartbeat", "heartbeat"),
            ("dead_after", "dead_after"),
            ("flush", "flush"),
            ("checkpoint", "checkpoint"),
            ("tick", "tick"),
            ("chunk", "chunk"),
            ("length", "length"),
        )
        if getattr(args, attr) is not None
    }
    return dataclasses.replace(base, **overrides)


def run(args: argparse.Namespace) -> int:
    """Run the drill and print its report; exit 0 when it passed, 1 when it found a problem
    or could not finish a round, 2 on a usage or store error."""
    if args.url is not None and "://" not in args.url:
        print(
            f"agentstores drill: {args.url!r} is not a backend URL; give scheme://... (e.g. "
            "postgresql://user@host/db or file:///tmp/drill); to make the stores from that "
            "URL with your own code, add --factory module:callable",
            file=sys.stderr,
        )
        return CANNOT_RUN
    try:
        timings = timings_from(args)
        rounds = tuple(r.strip() for r in args.rounds.split(",") if r.strip())
        result = asyncio.run(
            run_drill(
                args.url, timings=timings, rounds=rounds, keep=args.keep, factory=args.factory
            )
        )
    except AgentStoresError as exc:
        # A backend's error may quote the URL it was given.
        print(f"agentstores drill: {Redaction(args.url).text(str(exc))}", file=sys.stderr)
        return CANNOT_RUN
    print(render(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result.to_json(), indent=2) + "\n")
    return OK if result.passed else FOUND_PROBLEM
