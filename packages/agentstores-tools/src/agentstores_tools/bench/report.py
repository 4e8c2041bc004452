"""Plain-text tables for a bench result (no dependencies beyond the standard library)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import follow_report


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 100 else f"{value:,.0f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Left-aligned first column, right-aligned figures."""
    cells = [list(headers)] + [[_cell(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for n, row in enumerate(cells):
        parts = [
            row[i].ljust(widths[i]) if i == 0 else row[i].rjust(widths[i]) for i in range(len(row))
        ]
        lines.append("  ".join(parts).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _row(name: str, s: dict[str, Any]) -> list[Any]:
    return [name, s["ops"], s["ops_per_s"], s["p50_ms"], s["p99_ms"], s["max_ms"], s["errors"]]


def render(result: dict[str, Any]) -> str:
    """The human report: operations, floor ratio, length costs, capacity, errors."""
    out = [
        f"agentstores bench: backend {result['backend']} ({result['url']})",
        f"{result['clients']} clients, {result['seconds']} s per operation after "
        f"{result['warmup']} s warm-up; python {result['machine']['python']}, "
        f"{result['machine']['cpus']} cpus",
        "",
    ]
    ops = result["operations"]
    problems: list[str] = []
    if ops:
        rows = []
        for name, s in ops.items():
            rows.append(_row(name, s))
            if name == "cas" and result["floor"] is not None:
                rows.append(_row("cas (raw floor)", result["floor"]["cas"]))
        headers = ["operation", "ops", "ops/s", "p50 ms", "p99 ms", "max ms", "errors"]
        out += [table(headers, rows), ""]
        for name, s in ops.items():
            if s.get("first_error"):
                problems.append(f"{name}: {s['first_error']}")
    ratio = result["ratio"]
    if ratio is not None:
        out.append(
            f"CAS adapter/floor ({result['floor']['name']}): throughput "
            f"{_cell(ratio['cas_ops_per_s'])}x, p50 latency {_cell(ratio['cas_p50'])}x, "
            f"p99 latency {_cell(ratio['cas_p99'])}x"
        )
        if ratio.get("rounds"):
            out.append(
                f"throughput by round ({len(ratio['rounds'])}): "
                + " ".join(_cell(r) for r in ratio["rounds"])
                + f"; median {_cell(ratio['rounds_median'])}x"
            )
        usage = ratio.get("client_usage")
        if usage:
            a, f = usage["adapter"], usage["floor"]
            out.append(
                f"this process per CAS: CPU {_cell(a['cpu_ms_per_op'])} ms against the "
                f"floor's {_cell(f['cpu_ms_per_op'])} ms, voluntary context switches "
                f"{_cell(a['voluntary_switches_per_op'])} against "
                f"{_cell(f['voluntary_switches_per_op'])}"
            )
        out.append("")
        if result["floor"]["cas"].get("first_error"):
            problems.append(f"raw floor: {result['floor']['cas']['first_error']}")
    elif "cas" in ops:
        out += ["CAS raw floor: this backend offers none", ""]
    if result["lengths"]:
        rows = []
        for entry in result["lengths"]:
            a, r = entry["append"], entry["read"]
            rows.append(
                [
                    entry["length"],
                    entry["build_seconds"],
                    a["ops_per_s"],
                    a["p50_ms"],
                    a["p99_ms"],
                    r["ops_per_s"],
                    r["p50_ms"],
                    r["p99_ms"],
                ]
            )
            for what, s in (("append", a), ("read", r)):
                if s.get("first_error"):
                    problems.append(f"length {entry['length']} {what}: {s['first_error']}")
        headers = [
            "transcript length",
            "build s",
            "append ops/s",
            "append p50",
            "append p99",
            "read[i] ops/s",
            "read[i] p50",
            "read[i] p99",
        ]
        out += ["Cost by transcript length (one client; ms)", table(headers, rows), ""]
    cap = result["capacity"]
    if cap is not None:
        rows = [
            [
                s["k"],
                s["beats"],
                s["beats_expected"],
                s["p50_ms"],
                s["p99_ms"],
                s["late_p99_ms"],
                s.get("sent_p99_ms"),
                s.get("cpu_us_per_beat"),
                s["errors"],
                "yes" if s["ok"] else "no",
            ]
            for s in cap["steps"]
        ]
        headers = ["K", "beats", "expected", "p50 ms", "p99 ms", "late p99", "sent p99"]
        headers += ["CPU µs/beat", "errors", "ok"]
        path = cap.get("path", "per-call")
        if cap.get("gc_freeze"):
            path += ", collector frozen once the leases are claimed"
        out += [
            f"Heartbeat capacity (K leases beating once a second, {path}, "
            f"p99 from due to answered < {cap['p99_ms_threshold']} ms; late: due to sent, "
            "sent: sent to answered)",
            table(headers, rows),
            f"largest passing K: {cap['max_k']:,} (stopped by: {cap['stopped_by']})",
            "",
        ]
    follow = result.get("follow")
    if follow is not None:
        out.append(follow_report.title(follow))
        out.append(table(follow_report.HEADERS, follow_report.rows(follow)))
        out += [f"  {line}" for line in follow_report.notes(follow)] + [""]
    if problems:
        out += ["Errors (first of each):"] + [f"  {p}" for p in problems] + [""]
    return "\n".join(out).rstrip() + "\n"
