"""Kill-round timings the two-server proof records and the session summary prints."""

from __future__ import annotations

KILL_ROUND_TIMES: list[dict[str, object]] = []
"""Detect, takeover and finish seconds of each backend's kill round (reported, not asserted)."""
