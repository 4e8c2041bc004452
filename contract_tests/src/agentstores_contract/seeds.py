"""One seed per suite run: it drives every generated value, and a failure names it.

Hypothesis examples and the operations planned for concurrent clients are drawn from
this seed, so a failing run is replayed by passing the seed it printed
(``--agentstores-seed``, ``agentstores check --seed``, ``validate(seed=...)``). Thread and
process scheduling is not seeded: a race replays the same planned operations, not the
same interleaving.
"""

from __future__ import annotations

import os
import random
import shlex

from agentstores.urls import redact_url

SEED_ENV = "AGENTSTORES_CONTRACT_SEED"

_seed: int | None = None


def fresh() -> int:
    """A new random seed (32 bits, short enough to type)."""
    return int.from_bytes(os.urandom(4), "big")


def parse(text: str) -> int:
    """A seed from the command line or the environment: a non-negative integer."""
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"a seed is a non-negative integer, got {text!r}") from None
    if value < 0:
        raise ValueError(f"a seed is a non-negative integer, got {text!r}")
    return value


def set_seed(seed: int | None) -> int:
    """Fix this run's seed (``None``: ``$AGENTSTORES_CONTRACT_SEED``, else a fresh one)."""
    global _seed
    if seed is None:
        from_env = os.environ.get(SEED_ENV)
        seed = parse(from_env) if from_env else fresh()
    _seed = seed
    return seed


def current() -> int:
    """This run's seed (fixed on first use when no plugin set one)."""
    return _seed if _seed is not None else set_seed(None)


def rng(label: str) -> random.Random:
    """A generator for one named use, derived from the run's seed."""
    return random.Random(f"{current()}:{label}")


def replay_command(
    *,
    nodeid: str,
    promises: list[str],
    profile: str,
    url: str | None = None,
    factory: str | None = None,
) -> str:
    """The pytest command that replays one test with this run's seed and profile (a
    password in ``url`` shown as ``***``: the command is printed)."""
    if url or factory:
        if url:
            target = ["--agentstores-url", redact_url(url)]
        else:
            target = ["--agentstores-factory", str(factory)]
        chosen = [arg for name in promises for arg in ("--agentstores-promise", name)]
    else:
        target, chosen = [nodeid], []
    args = ["pytest", *target, *chosen, "--agentstores-profile", profile]
    return shlex.join([*args, "--agentstores-seed", str(current())])
