"""PNG figures of a bench result (``agentstores bench --plot DIR``), drawn with matplotlib.

matplotlib is an optional extra (``pip install 'agentstores-tools[plot]'``), never a
requirement: it is imported when a figure is drawn, and its absence is a :class:`UsageError`
saying what to install. Each run gives up to four files, named after its backend:

- ``<backend>-throughput.png``: ops/s per operation, the CAS beside its raw floor;
- ``<backend>-latency.png``: p50, p99 and max per operation (log scale);
- ``<backend>-lengths.png``: append and read cost against transcript length (log-log);
- ``<backend>-capacity.png``: the heartbeat capacity search, p50/p99 against K;
- ``<backend>-follow.png``: follow latency p50/p99 per mode and shape (log scale).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentstores.errors import UsageError

INSTALL_HINT = "pip install 'agentstores-tools[plot]'"


def _pyplot() -> Any:
    """Matplotlib's pyplot on the file-only Agg backend, or a UsageError saying how to get it."""
    try:
        import matplotlib
    except ImportError as exc:
        raise UsageError(f"--plot needs matplotlib, an optional extra: {INSTALL_HINT}") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def check_available() -> None:
    """Fail before a long run, not after it, when the figures cannot be drawn.

    Raises:
        UsageError: matplotlib is not installed.
    """
    _pyplot()


def plot_runs(runs: Sequence[dict[str, Any]], directory: str | Path) -> list[Path]:
    """Write the figures of every run into ``directory`` (created if missing); returns
    the files written. Two runs of one backend get ``-2``, ``-3``... suffixes.

    Raises:
        UsageError: matplotlib is not installed.
    """
    plt = _pyplot()
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    seen: dict[str, int] = {}
    for run in runs:
        base = re.sub(r"[^A-Za-z0-9_.-]+", "-", str(run["backend"]))
        seen[base] = seen.get(base, 0) + 1
        stem = base if seen[base] == 1 else f"{base}-{seen[base]}"
        for suffix, draw in (
            ("throughput", _throughput),
            ("latency", _latency),
            ("lengths", _lengths),
            ("capacity", _capacity),
            ("follow", _follow),
        ):
            fig = draw(plt, run)
            if fig is None:
                continue
            path = out / f"{stem}-{suffix}.png"
            fig.tight_layout()
            fig.savefig(path, dpi=110)
            plt.close(fig)
            written.append(path)
    return written


def _title(run: dict[str, Any], what: str) -> str:
    return f"{run['backend']}: {what} ({run['clients']} clients, {run['started_at'][:10]})"


def _sections(run: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Each measured operation's summary, the raw floor's right after the CAS."""
    rows: list[tuple[str, dict[str, Any]]] = []
    for name, summary in run["operations"].items():
        rows.append((name, summary))
        if name == "cas" and run["floor"] is not None:
            rows.append(("cas floor", run["floor"]["cas"]))
    return rows


def _throughput(plt: Any, run: dict[str, Any]) -> Any:
    rows = _sections(run)
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(7, 3.6))
    names = [n for n, _ in rows]
    colors = ["tab:gray" if n == "cas floor" else "tab:blue" for n in names]
    bars = ax.bar(names, [s["ops_per_s"] for _, s in rows], color=colors)
    ax.bar_label(bars, fmt="{:,.0f}", fontsize=7)
    ax.set_ylabel("ops/s")
    ratio = run.get("ratio")
    extra = ""
    if ratio and ratio.get("cas_ops_per_s") is not None:
        extra = f"; CAS adapter/floor {ratio['cas_ops_per_s']:.2f}x"
    ax.set_title(_title(run, "throughput per operation" + extra), fontsize=9)
    ax.tick_params(axis="x", labelsize=8)
    return fig


def _latency(plt: Any, run: dict[str, Any]) -> Any:
    rows = [(n, s) for n, s in _sections(run) if s.get("p50_ms") is not None]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(7, 3.6))
    width = 0.27
    xs = range(len(rows))
    for i, (key, label) in enumerate((("p50_ms", "p50"), ("p99_ms", "p99"), ("max_ms", "max"))):
        values = [max(s[key] or 0.0, 1e-6) for _, s in rows]
        ax.bar([x + (i - 1) * width for x in xs], values, width, label=label)
    ax.set_xticks(list(xs), [n for n, _ in rows], fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("ms")
    ax.legend(fontsize=7)
    ax.set_title(_title(run, "latency percentiles"), fontsize=9)
    return fig


def _lengths(plt: Any, run: dict[str, Any]) -> Any:
    entries = run["lengths"]
    if not entries:
        return None
    fig, ax = plt.subplots(figsize=(6, 3.6))
    xs = [e["length"] for e in entries]
    for what, label in (("append", "append one message"), ("read", "read one by index")):
        for key, style in (("p50_ms", "-o"), ("p99_ms", ":^")):
            ys = [e[what][key] for e in entries]
            ax.plot(xs, ys, style, label=f"{label} {key[:3]}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("messages in the transcript")
    ax.set_ylabel("ms (one client)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title(_title(run, "cost against transcript length"), fontsize=9)
    return fig


def _capacity(plt: Any, run: dict[str, Any]) -> Any:
    cap = run["capacity"]
    if not cap or not cap["steps"]:
        return None
    steps = sorted((s for s in cap["steps"] if s["p99_ms"] is not None), key=lambda s: s["k"])
    if not steps:
        return None
    fig, ax = plt.subplots(figsize=(6, 3.6))
    ks = [s["k"] for s in steps]
    ax.plot(ks, [s["p99_ms"] for s in steps], "-o", label="p99")
    ax.plot(ks, [s["p50_ms"] for s in steps], "-s", label="p50")
    bad = [s for s in steps if not s["ok"]]
    if bad:
        ax.plot([s["k"] for s in bad], [s["p99_ms"] for s in bad], "x", color="red", label="fails")
    ax.axhline(cap["p99_ms_threshold"], color="gray", linestyle="--", label="p99 threshold")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("conversations heartbeating once a second (K)")
    ax.set_ylabel("CAS ms")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title(_title(run, f"heartbeat capacity, largest K {cap['max_k']:,}"), fontsize=9)
    return fig


def _follow(plt: Any, run: dict[str, Any]) -> Any:
    follow = run.get("follow")
    rows = [r for r in (follow or {}).get("rows", ()) if r.get("p50_ms") is not None]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(7, 3.6))
    width = 0.4
    xs = range(len(rows))
    for i, (key, label) in enumerate((("p50_ms", "p50"), ("p99_ms", "p99"))):
        # from the write's return; an early yield (a poll just after the commit) is 0
        values = [max(r[key], 1e-3) for r in rows]
        ax.bar([x + (i - 0.5) * width for x in xs], values, width, label=label)
    names = [f"{r['mode']}\n{r['followers']}x{r['conversations']}" for r in rows]
    ax.set_xticks(list(xs), names, fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("ms, write returned to follower yielded")
    ax.legend(fontsize=7)
    ax.set_title(_title(run, "follow latency by mode, followers x conversations"), fontsize=9)
    return fig
