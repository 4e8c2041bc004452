"""run.py picks a supported interpreter and fails loudly when nox cannot use it.

The nox runs here go through run.py's own ``run_nox`` over the real noxfile with every
session tagged ``tests`` (what ``python3 run.py test`` runs), on a machine made to lack
the interpreter: PATH empty, no pyenv, no uv-managed Pythons, no downloads. Every session
stops at interpreter lookup, so nothing is installed and nothing else runs.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import run

ROOT = Path(run.__file__).resolve().parent
CURRENT = (sys.version_info.major, sys.version_info.minor)
MISSING = next(v for v in reversed(run.SUPPORTED) if v != CURRENT)
"""A supported version that is not the one running nox, so it can be made to be absent."""


def _hidden_pythons(tmp_path: Path) -> dict[str, str]:
    """An environment where only the interpreter running nox itself can be found."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYENV", "UV_PYTHON", "VIRTUAL_ENV", "CONDA", "MISE", "ASDF"))
    }
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    env.update(
        PATH=str(empty),
        HOME=str(tmp_path / "home"),
        XDG_CACHE_HOME=str(tmp_path / "cache"),
        XDG_DATA_HOME=str(tmp_path / "data"),
        PYENV_ROOT=str(tmp_path / "no-pyenv"),
        UV_PYTHON_INSTALL_DIR=str(tmp_path / "no-uv-pythons"),
        UV_PYTHON_DOWNLOADS="never",
    )
    env[run.PYTHON_ENV] = f"{MISSING[0]}.{MISSING[1]}"
    return env


def _nox(tmp_path: Path, *flags: str) -> list[str]:
    noxfile = str(ROOT / "noxfile.py")
    envdir = str(tmp_path / "envs")
    return [sys.executable, "-m", "nox", "-f", noxfile, "-t", "tests", "--envdir", envdir, *flags]


@pytest.mark.timeout(120)  # a noxfile ignoring run.py's interpreter would run for real
def test_missing_interpreter_fails_the_run(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    code = run.run_nox(_nox(tmp_path), _hidden_pythons(tmp_path), cwd=ROOT)
    out = "".join(capfd.readouterr())
    assert code != 0, out
    assert f"interpreter {MISSING[0]}.{MISSING[1]} not found" in out, out
    assert "was successful" not in out, out


@pytest.mark.timeout(120)
def test_a_skipped_session_fails_the_run_even_when_nox_passes(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    flags = ("--no-error-on-missing-interpreters",)
    code = run.run_nox(_nox(tmp_path, *flags), _hidden_pythons(tmp_path), cwd=ROOT)
    out = "".join(capfd.readouterr())
    assert code != 0, out
    assert "run.py: session lint was skipped" in out, out
    assert "run.py: failing:" in out, out


def test_no_supported_interpreter_is_none(tmp_path: Path) -> None:
    env = _hidden_pythons(tmp_path)
    assert run.find_python((3, 10), "/nowhere/python3.10", env) is None


def test_the_running_interpreter_is_used_when_supported(tmp_path: Path) -> None:
    env = _hidden_pythons(tmp_path)
    assert run.find_python(CURRENT, sys.executable, env) == (sys.executable, CURRENT)


def _link(directory: Path) -> Path:
    directory.mkdir(parents=True)
    link = directory / f"python{CURRENT[0]}.{CURRENT[1]}"
    link.symlink_to(sys.executable)
    return link


def test_an_unsupported_interpreter_finds_one_on_path(tmp_path: Path) -> None:
    env = _hidden_pythons(tmp_path)
    link = _link(tmp_path / "bin")
    env["PATH"] = str(link.parent)
    assert run.find_python((3, 14), "/nowhere/python3.14", env) == (str(link), CURRENT)


def test_an_unsupported_interpreter_finds_one_under_pyenv_root(tmp_path: Path) -> None:
    env = _hidden_pythons(tmp_path)
    version_dir = f"{CURRENT[0]}.{CURRENT[1]}.99"
    link = _link(Path(env["PYENV_ROOT"]) / "versions" / version_dir / "bin")
    assert run.find_python((3, 14), "/nowhere/python3.14", env) == (str(link), CURRENT)


def test_main_refuses_without_a_supported_interpreter(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, value in _hidden_pythons(tmp_path).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(run.sys, "version_info", (3, 10, 0, "final", 0))
    monkeypatch.setattr(run.sys, "executable", "/nowhere/python3.10")
    assert run.main(["test"]) == 2
    assert "needs Python 3.11, 3.12, 3.13" in capsys.readouterr().err


@pytest.mark.timeout(120)
def test_a_report_the_caller_asked_for_is_kept_and_read(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "mine.json"
    flags = ("--no-error-on-missing-interpreters", "--report", str(report))
    code = run.run_nox(_nox(tmp_path, *flags), _hidden_pythons(tmp_path), cwd=ROOT)
    out = "".join(capfd.readouterr())
    assert code != 0, out
    assert report.exists() and '"skipped"' in report.read_text()


def test_lanes_split_by_weight_and_keep_the_noxfile_order() -> None:
    sessions = ["lint", "tests-core", "tests-file", "tests-s3", "docs"]
    lanes = run.split_lanes(sessions, 2)
    assert sorted(name for lane in lanes for name in lane) == sorted(sessions)
    assert not set(lanes[0]) & set(lanes[1])
    assert {"tests-core", "tests-s3"} - set(lanes[0]) and {"tests-core", "tests-s3"} - set(lanes[1])
    for lane in lanes:
        assert lane == sorted(lane, key=sessions.index)
    assert run.split_lanes(sessions, 1) == [sessions]


@pytest.mark.timeout(180)
def test_a_session_skipped_in_any_lane_fails_the_run(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    nox = [sys.executable, "-m", "nox", "-f", str(ROOT / "noxfile.py")]
    nox += ["--envdir", str(tmp_path / "envs")]
    flags = ["--no-error-on-missing-interpreters"]
    code = run.run_lanes(nox, [["lint"], ["docs"]], flags, _hidden_pythons(tmp_path), cwd=ROOT)
    out = "".join(capfd.readouterr())
    assert code != 0, out
    assert "[lane 1] lint: skipped" in out and "[lane 2] docs: skipped" in out, out
    assert "session lint was skipped" in out and "session docs was skipped" in out, out


_FAKE_NOX = """
import sys, time
failing = "broken" in sys.argv
if failing:
    print("FAILED tests/core/test_x.py::test_it - assert 1 == 2")
    print("nox > Session broken failed.")
else:
    time.sleep(0.5)
print("agentstores: not run: a real MongoDB ($MONGODB_URI does not name one)")
for n in range(200):
    print(f"filler {n}")
sys.exit(1 if failing else 0)
"""


def test_a_failing_lane_is_named_again_at_the_end_of_the_run(
    capfd: pytest.CaptureFixture[str],
) -> None:
    nox = [sys.executable, "-c", _FAKE_NOX]
    code = run.run_lanes(nox, [["broken"], ["fine"]], [], dict(os.environ), cwd=ROOT)
    out = "".join(capfd.readouterr())
    assert code != 0, out
    ending = out[out.rindex("[lane 2] filler 199") :]
    assert "[lane 1] FAILED tests/core/test_x.py::test_it" in ending, out
    assert "[lane 1] nox > Session broken failed." in ending, out
    assert "lane(s) [1] failed" in ending, out
    # A server variant the run did not cover is named once at the end, whichever lanes said so.
    not_run = "agentstores: not run: a real MongoDB ($MONGODB_URI does not name one)"
    assert ending.count(not_run) == 1, out
