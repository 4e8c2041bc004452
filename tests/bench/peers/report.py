"""The peer bench's Markdown table and its plot (cost against transcript length)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .measure import LABELS, OPERATIONS


def _ms(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:,.2f}" if x < 100 else f"{x:,.0f}"


def _ratio_rows(
    summary: dict[str, Any], lengths: list[str], systems: list[str], field: str
) -> list[str]:
    """A row per system holding ``field`` (``ratio_to``, ``overhead_to``, ``ratio_to_bridge``)
    and per operation it was measured at: ``median (lowest round - highest round)``."""
    rows = []
    for name in systems:
        first = summary["lengths"][lengths[0]][name].get(field)
        if first is None:
            continue
        for op in OPERATIONS:
            if op not in first:
                continue
            row = []
            for n in lengths:
                r = summary["lengths"][n][name][field].get(op)
                row.append(
                    "-" if r is None else f"{r['median']:,.2f}x ({r['min']:,.2f}-{r['max']:,.2f}x)"
                )
            rows.append(f"| {name} | {first['system']} | {LABELS[op]} | " + " | ".join(row) + " |")
    return rows


def _bytes(x: int | None) -> str:
    if x is None:
        return "-"
    return f"{x / 1024:,.0f} KiB" if x >= 10_240 else f"{x:,} B"


def markdown(summary: dict[str, Any], meta: dict[str, Any]) -> str:
    """One table per server: a row per operation, a column per system, each cell the
    p50 at every length; then the peers' per-round ratios and storage per append."""
    lengths = sorted(summary["lengths"], key=int)
    head = " / ".join(f"{int(n):,}" for n in lengths)
    out = [
        f"Measured {meta['date']}, {meta['machine']}; {meta['rounds']} interleaved rounds, "
        f"up to {meta['samples']} calls per operation per round; single client, p50 in ms "
        f"at {head} messages. Versions: {meta['versions']}.",
        "",
    ]
    for server, systems in meta["servers"].items():
        out.append(f"**{server}**")
        out.append("")
        out.append("| operation | " + " | ".join(systems) + " |")
        out.append("|---" * (len(systems) + 1) + "|")
        for op in OPERATIONS:
            if all(
                summary["lengths"][n][s][op]["median_ms"] is None for n in lengths for s in systems
            ):
                continue
            cells = [
                " / ".join(_ms(summary["lengths"][n][s][op]["median_ms"]) for n in lengths)
                for s in systems
            ]
            out.append(f"| {LABELS[op]} | " + " | ".join(cells) + " |")
        stored = [
            " / ".join(_bytes(summary["lengths"][n][s]["bytes_per_append"]) for n in lengths)
            for s in systems
        ]
        out.append("| storage per append | " + " | ".join(stored) + " |")
        out.append("")
        columns = " | ".join(f"{int(n):,}" for n in lengths)
        for field, title in (
            (
                "ratio_to",
                "Peer p50 / agentstores p50, per round (median, lowest-highest round; "
                "above 1: agentstores is faster):",
            ),
            (
                "ratio_to_bridge",
                "Native store p50 / its framework's bridge p50, per round "
                "(above 1: the bridge is faster):",
            ),
            (
                "overhead_to",
                "Bridge p50 / agentstores' own call p50, per round: everything the bridge "
                "costs, the framework's own object building included:",
            ),
            (
                "net_overhead_to",
                "Bridge p50 / (the agentstores calls the bridge makes, made directly, p50 + "
                "the framework's own encoding or decoding p50, timed alone), per round: what "
                "the bridge's own code adds beyond both (1.20x is the ceiling it must stay "
                "under; ADK's get_session reads three records, the session and its app's and "
                "user's state, where agentstores' recent 20 reads one):",
            ),
            (
                "glue_overhead_to",
                "Bridge p50 / the same store calls and framework work written by hand, back to "
                "back in one timed call (the least glue a user writes), per round:",
            ),
        ):
            rows = _ratio_rows(summary, lengths, systems, field)
            if rows:
                out += [title, "", f"| system | against | operation | {columns} |"]
                out += ["|---|---|---" + "|---" * len(lengths) + "|", *rows, ""]
    return "\n".join(out).rstrip() + "\n"


def plot(summary: dict[str, Any], meta: dict[str, Any], path: Path) -> None:
    """p50 against transcript length, log-log, one panel per operation and server."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, NullFormatter

    plain = FuncFormatter(lambda v, _pos: f"{v:g}")

    lengths = sorted(summary["lengths"], key=int)
    xs = [int(n) for n in lengths]
    servers = meta["servers"]
    fig, axes = plt.subplots(
        len(servers),
        len(OPERATIONS),
        figsize=(4.2 * len(OPERATIONS), 3.4 * len(servers)),
        squeeze=False,
    )
    for row, (server, systems) in enumerate(servers.items()):
        for col, op in enumerate(OPERATIONS):
            ax = axes[row][col]
            for i, s in enumerate(systems):
                ys = [summary["lengths"][n][s][op]["median_ms"] for n in lengths]
                if None in ys:  # the system does not offer this operation
                    continue
                style = "-o" if s.startswith("agentstores") else "--s"
                width = 2 if s.startswith("agentstores") else 1.2
                ax.plot(xs, ys, style, label=s, linewidth=width, color=f"C{i}")  # one per system
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.xaxis.set_major_formatter(plain)
            ax.yaxis.set_major_formatter(plain)
            ax.yaxis.set_minor_formatter(NullFormatter())
            ax.set_title(f"{server}: {LABELS[op]}", fontsize=10)
            ax.set_xlabel("messages in the transcript")
            ax.set_ylabel("p50 ms")
            ax.grid(True, which="both", alpha=0.3)
            if col == 0:
                ax.legend(fontsize=7)
    fig.suptitle(f"Cost against transcript length ({meta['date']}, {meta['machine']})", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
