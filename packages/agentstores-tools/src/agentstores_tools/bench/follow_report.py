"""The follow section of a bench result, as a plain-text table and as a Markdown page."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

HEADERS = [
    "mode",
    "followers",
    "conversations",
    "samples",
    "p50 ms",
    "p99 ms",
    "p50 from issue",
    "p99 from issue",
    "idle reads/follower/s",
    "CPU %",
    "load",
    "errors",
]


def rows(follow: dict[str, Any]) -> list[list[Any]]:
    """One row per mode and shape measured (a mode the backend cannot run: in :func:`notes`)."""
    out: list[list[Any]] = []
    for r in follow["rows"]:
        if "unavailable" in r:
            continue
        figures = [
            r.get("samples"),
            r.get("p50_ms"),
            r.get("p99_ms"),
            r.get("issue_p50_ms"),
            r.get("issue_p99_ms"),
            r.get("idle_reads_per_follower_s"),
            r.get("cpu_percent"),
            r.get("load_1m"),
            r.get("errors"),
        ]
        out.append([r["mode"], r["followers"], r["conversations"], *figures])
    return out


def title(follow: dict[str, Any]) -> str:
    """What the figures are, in one line."""
    return (
        "Follow latency (ms from the producer's recording write returning, and from "
        f"before it was issued, to a follower yielding it; {follow['seconds']} s of writes "
        f"per row, at most {follow['rate']:g} writes/s; idle: {follow['idle_s']} s of a "
        f"live turn writing nothing; followers poll {follow['poll_s']} s, "
        f"{follow['safety_poll_s']} s while pushed)"
    )


def notes(follow: dict[str, Any]) -> list[str]:
    """Why a mode is missing, and the first error of a row that had any."""
    out: list[str] = []
    for r in follow["rows"]:
        shape = f"{r['mode']} {r['followers']}x{r['conversations']}"
        if "unavailable" in r:
            line = f"{r['mode']}: not measured: {r['unavailable']}"
            if line not in out:
                out.append(line)
        elif r.get("first_error"):
            out.append(f"{shape}: {r['first_error']}")
    return out


def _md_cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 100 else f"{value:,.0f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def markdown(runs: Sequence[dict[str, Any]], command: str) -> str:
    """One table per backend (the runs' follow sections), with how they were made."""
    first = runs[0]
    machine = first["machine"]
    out = [
        f"Measured {first['started_at'][:10]}, {machine['cpus']} cpus, Python "
        f"{machine['python']}, with `{command}`.",
        "",
    ]
    for run in runs:
        follow = run.get("follow")
        if follow is None:
            continue
        out += [f"**{run['backend']}**", ""]
        out.append("| " + " | ".join(HEADERS) + " |")
        out.append("|" + "---|" * len(HEADERS))
        for row in rows(follow):
            out.append("| " + " | ".join(_md_cell(v) for v in row) + " |")
        out.append("")
        for line in notes(follow):
            out.append(f"- {line}")
        out.append("")
    out.append(title(first["follow"]) + ".")
    return "\n".join(out).rstrip() + "\n"
