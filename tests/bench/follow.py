"""``python -m tests.bench.follow``: follow latency on every backend with push or polling.

Starts the servers (:mod:`tests.bench.run_all`'s starters: a temporary directory, an
embedded PostgreSQL 18, a private Valkey 9) plus ``memory://``, runs ``agentstores
bench``'s follow section (:mod:`agentstores_tools.bench.follow`) on each, prints the
report and writes ``follow.md`` (the tables the docs include) and ``follow.json`` (every
figure) into ``--out``::

    python -m tests.bench.follow --only postgres,redis --seconds 5 --out /tmp/follow
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import shlex
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agentstores_tools.bench.follow import DEFAULT_MODES, DEFAULT_SHAPES, FollowConfig, parse_shape
from agentstores_tools.bench.follow_report import markdown
from agentstores_tools.bench.harness import BenchConfig, run_bench
from agentstores_tools.bench.report import render

from .run_all import _file, _mongo, _postgres, _redis

BACKENDS = ("memory", "file", "postgres", "redis")
"""Measured by default; ``--only mongo`` adds MongoDB (nx-27017 or ``$MONGODB_URI``)."""
MODES = {
    "memory": ("local",),
    "file": ("local", "push", "poll"),
    "postgres": ("push", "poll"),
    "redis": ("push", "poll"),
    "mongo": ("push", "poll"),
}
"""What each backend is measured with by default: in-process wake-ups where a producer
cannot be elsewhere (memory) or as the embedded backend's everyday case (file), push
against polling everywhere else (a backend without a ``push`` option yet says so in its
notes)."""


@contextlib.contextmanager
def _memory() -> Any:
    yield "memory://follow-bench"


def _starters() -> dict[str, Callable[[], contextlib.AbstractContextManager[str]]]:
    return {
        "memory": _memory,
        "file": _file,
        "postgres": _postgres,
        "redis": _redis("everysec"),
        "mongo": _mongo,
    }


def _modes(given: str | None, backend: str) -> tuple[str, ...]:
    if given is None:
        return MODES[backend]
    return tuple(m.strip() for m in given.split(",") if m.strip())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.follow")
    parser.add_argument("--only", default=",".join(BACKENDS), help="comma-separated backends")
    parser.add_argument("--out", default="docs/bench", help="where follow.md/.json go")
    parser.add_argument(
        "--modes",
        help=f"comma-separated, for every backend (default: {MODES}; all: "
        f"{','.join(DEFAULT_MODES)})",
    )
    parser.add_argument("--shapes", default="1,1000,1000x1")
    parser.add_argument("--seconds", type=float, default=FollowConfig.seconds)
    parser.add_argument("--interval", type=float, default=FollowConfig.interval)
    parser.add_argument("--rate", type=float, default=FollowConfig.rate)
    parser.add_argument("--idle", type=float, default=FollowConfig.idle)
    args = parser.parse_args(argv)
    wanted = [b.strip() for b in args.only.split(",") if b.strip()]
    unknown = set(wanted) - set(MODES)
    if unknown:
        parser.error(f"unknown backends {sorted(unknown)}; choose from {tuple(MODES)}")
    follow = FollowConfig(
        shapes=tuple(parse_shape(s) for s in args.shapes.split(",") if s.strip()) or DEFAULT_SHAPES,
        seconds=args.seconds,
        interval=args.interval,
        rate=args.rate,
        idle=args.idle,
    )
    starters = _starters()
    runs: list[dict[str, Any]] = []
    with contextlib.ExitStack() as stack:
        for name in wanted:
            url = stack.enter_context(starters[name]())
            cfg = BenchConfig(
                url=url,
                clients=1,
                ops=(),
                lengths=(),
                floor=False,
                follow=dataclasses.replace(follow, modes=_modes(args.modes, name)),
                keep=True,  # the servers are thrown away afterwards
                progress=lambda msg: print(f"bench: {msg}", file=sys.stderr, flush=True),
            )
            runs.append(asyncio.run(run_bench(cfg)))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    command = "python3 run.py nox -s bench-follow"
    if argv:
        command += " -- " + shlex.join(argv)
    (out / "follow.md").write_text(markdown(runs, command))
    (out / "follow.json").write_text(json.dumps({"runs": runs}, indent=1) + "\n")
    print("\n".join(render(r) for r in runs), end="")
    failed = any(row.get("errors") for r in runs for row in r["follow"]["rows"])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
