"""Hypothesis settings per suite profile, and the concurrency sizes that go with them.

``ci`` (default) keeps the whole suite at a minute or two on the in-memory backend;
``deep`` runs about ten times the examples and rounds; ``moderate`` is between ``quick``
and ``ci`` (a server that spends milliseconds on every request, such as an emulated S3
or MongoDB, where ``ci`` takes ten minutes); ``quick`` is for running the suite many
times (the broken-backend catalogue); ``mutation`` is quick-sized and derandomized, so a
mutant a run kills is killed again by the next.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from hypothesis import HealthCheck, Phase, settings

PROFILE_ENV = "AGENTSTORES_CONTRACT_PROFILE"
DEFAULT_PROFILE = "ci"


@dataclass(frozen=True)
class Profile:
    name: str
    examples: int
    """Hypothesis examples per property or state machine."""
    steps: int
    """Rule steps per state-machine example."""
    clients: int
    """Concurrent clients racing one key."""
    rounds: int
    """Rounds of each race."""
    processes: int
    """OS processes racing one key (multi-process backends)."""
    history_ops: int
    """Operations per client in a recorded history checked for linearizability."""
    shrink: bool = True
    derandomize: bool = False
    """Draw the same examples every run (a mutation run needs reproducible kills)."""

    def hypothesis(self, **overrides: object) -> settings:
        phases = [Phase.explicit, Phase.reuse, Phase.generate, Phase.target]
        if self.shrink:
            phases.append(Phase.shrink)
        base = settings(
            max_examples=self.examples,
            stateful_step_count=self.steps,
            deadline=None,
            database=None,
            derandomize=self.derandomize,
            print_blob=True,
            phases=phases,
            suppress_health_check=list(HealthCheck),
        )
        return settings(base, **overrides)  # type: ignore[arg-type]


PROFILES: dict[str, Profile] = {
    "quick": Profile(
        "quick",
        examples=8,
        steps=15,
        clients=16,
        rounds=3,
        processes=3,
        history_ops=6,
        shrink=False,
    ),
    "moderate": Profile(
        "moderate", examples=24, steps=25, clients=16, rounds=4, processes=4, history_ops=8
    ),
    "ci": Profile("ci", examples=60, steps=35, clients=16, rounds=6, processes=4, history_ops=8),
    "mutation": Profile(
        "mutation",
        examples=12,
        steps=20,
        clients=16,
        rounds=3,
        processes=3,
        history_ops=6,
        shrink=False,
        derandomize=True,
    ),
    "deep": Profile(
        "deep", examples=600, steps=60, clients=32, rounds=60, processes=6, history_ops=12
    ),
}

for _profile in PROFILES.values():
    settings.register_profile(f"agentstores-{_profile.name}", _profile.hypothesis())

_active = os.environ.get(PROFILE_ENV, DEFAULT_PROFILE)


def set_active(name: str) -> Profile:
    global _active
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; choose from {sorted(PROFILES)}")
    _active = name
    return PROFILES[name]


def active() -> Profile:
    return PROFILES.get(_active, PROFILES[DEFAULT_PROFILE])
