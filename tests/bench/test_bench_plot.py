"""``agentstores bench --plot DIR``: the five figures are written as PNGs, and without
matplotlib the command refuses before measuring, saying what to install."""

from __future__ import annotations

import subprocess
import sys
import uuid
import warnings
from pathlib import Path

import pytest

from agentstores.memory.stores import EphemeralStoreWarning
from agentstores_tools.bench.follow import FollowConfig
from agentstores_tools.bench.harness import BenchConfig, run_bench
from agentstores_tools.bench.plot import plot_runs

from .test_bench_smoke import TINY

PNG = b"\x89PNG\r\n\x1a\n"
FIGURES = ("throughput", "latency", "lengths", "capacity", "follow")
FOLLOW = FollowConfig(modes=("local",), shapes=((1, 1),), seconds=0.3, idle=0.1)


async def test_every_figure_is_a_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="tests-core installs agentstores-tools[plot]")
    cfg = BenchConfig(url=f"memory://plot-{uuid.uuid4().hex}", follow=FOLLOW, **TINY)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EphemeralStoreWarning)
        result = await run_bench(cfg)
    written = plot_runs([result, result], tmp_path / "figs")
    names = sorted(p.name for p in written)
    expected = [f"memory{tag}-{f}.png" for tag in ("", "-2") for f in FIGURES]
    assert names == sorted(expected)
    for path in written:
        data = path.read_bytes()
        assert data.startswith(PNG) and len(data) > 5_000, path


def test_a_run_without_measurements_draws_nothing(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="tests-core installs agentstores-tools[plot]")
    run = {
        "backend": "memory",
        "clients": 1,
        "started_at": "2026-01-01T00:00:00",
        "operations": {},
        "floor": None,
        "ratio": None,
        "lengths": [],
        "capacity": None,
    }
    assert plot_runs([run], tmp_path) == []


def test_without_matplotlib_the_cli_says_what_to_install(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['matplotlib'] = None\n"
        "from agentstores.cli import main\n"
        f"raise SystemExit(main(['bench', '--url', 'memory://x', '--plot', {str(tmp_path)!r}]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    assert "pip install 'agentstores-tools[plot]'" in out.stderr
    assert "opening" not in out.stderr  # refused before measuring anything
    assert list(tmp_path.iterdir()) == []
