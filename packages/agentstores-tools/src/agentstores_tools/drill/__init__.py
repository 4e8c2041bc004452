"""The kill-and-resume drill: proves a backend keeps a turn across a producer's death."""

from .runner import DrillError, DrillResult, RoundResult, render, run_drill
from .script import Timings, expected_text

__all__ = [
    "DrillError",
    "DrillResult",
    "RoundResult",
    "Timings",
    "expected_text",
    "render",
    "run_drill",
]
