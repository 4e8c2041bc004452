"""Latency samples and their summary (ops/s, p50, p99), kept free of any timing policy."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


def percentile(sorted_ns: list[int], pct: float) -> float:
    """Nearest-rank percentile of sorted nanosecond latencies, in milliseconds."""
    if not sorted_ns:
        return math.nan
    rank = max(1, math.ceil(pct / 100.0 * len(sorted_ns)))
    return sorted_ns[rank - 1] / 1e6


@dataclass
class Sample:
    """Latencies of successful operations over ``elapsed_ns`` of wall time, plus failures."""

    latencies_ns: list[int] = field(default_factory=list)
    elapsed_ns: int = 0
    errors: int = 0
    first_error: str | None = None

    def add_error(self, message: str) -> None:
        """Count one failed operation, keeping the first message for the report."""
        self.errors += 1
        if self.first_error is None:
            self.first_error = message

    def merge(self, other: Sample) -> None:
        """Fold another measurement window (e.g. a later round) into this one."""
        self.latencies_ns.extend(other.latencies_ns)
        self.elapsed_ns += other.elapsed_ns
        self.errors += other.errors
        if self.first_error is None:
            self.first_error = other.first_error

    def ops_per_s(self) -> float:
        """Successful operations per second of wall time (0 before any time passed)."""
        return len(self.latencies_ns) / (self.elapsed_ns / 1e9) if self.elapsed_ns > 0 else 0.0

    def summary(self, clients: int) -> dict[str, Any]:
        """The report figures (ops/s, p50, p99, max, errors) for ``clients`` concurrent clients,
        with a note when there are too few operations for p99 to mean anything."""
        ops = len(self.latencies_ns)
        lat = sorted(self.latencies_ns)
        seconds = self.elapsed_ns / 1e9
        out: dict[str, Any] = {
            "clients": clients,
            "ops": ops,
            "seconds": round(seconds, 3),
            "ops_per_s": round(ops / seconds, 1) if seconds > 0 else 0.0,
            "p50_ms": _ms(percentile(lat, 50)),
            "p99_ms": _ms(percentile(lat, 99)),
            "max_ms": _ms(lat[-1] / 1e6) if lat else None,
            "errors": self.errors,
        }
        if self.first_error is not None:
            out["first_error"] = self.first_error
        if ops < 100:
            out["note"] = f"only {ops} ops: p99 is not meaningful"
        return out


def _ms(value: float) -> float | None:
    # Nanosecond resolution (the clock's): an in-process store's p50 is below a
    # microsecond, and a ratio of latencies rounded to microseconds would read 0.
    return None if math.isnan(value) else round(value, 6)
