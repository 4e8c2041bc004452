#!/usr/bin/env python3
"""Set up and run agentstores from a fresh clone, with nothing but Python 3.11 to 3.13.

    python3 run.py drill     the main job: a kill-and-resume drill on the embedded file backend
    python3 run.py demo      two replicas behind a proxy serving a chat page; kill one mid-answer
    python3 run.py test      the whole test suite (every backend; servers start themselves),
                             its sessions in two lanes at once (AGENTSTORES_TEST_LANES=1: one)
    python3 run.py nox ARGS  any other nox session (lint, typecheck, build, bench, deep, ...)

The first call creates ``.venv`` beside this file and installs what the command needs.
Everything runs on the Python that started this script (``python3.12 run.py test`` tests
on 3.12); started by an unsupported one, it picks a supported Python from PATH or pyenv.
A nox session skipped for any reason (a missing interpreter above all) fails the run.
"""

from __future__ import annotations

import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
GROUPS = ["setup", "core", "file", "tools", "demo"]
"""The workspace's dependency groups ``.venv`` holds (pyproject.toml): nox and uv, core,
the contract suite, the file backend, the tools (``drill``) and the web demo (``demo``), at
the versions uv.lock pins."""
SUPPORTED = ((3, 11), (3, 12), (3, 13))
"""The Python versions every distribution's ``requires-python`` (>=3.11,<3.14) admits."""
PYTHON_ENV = "AGENTSTORES_PYTHON"
"""Tells the noxfile which interpreter its sessions use (a version such as ``3.12``)."""
NOX_INFO_FLAGS = {"-l", "--list", "--list-sessions", "--json", "--usage", "-h", "--help"}
NOX_INFO_FLAGS |= {"--version"}
LANES_ENV = "AGENTSTORES_TEST_LANES"
"""How many nox processes ``run.py test`` runs at once (default 2: much of the suite waits
on servers and on the suite's own short sleeps, so two lanes fill two cores)."""
MINUTES = {"tests-core": 7, "tests-s3": 12, "tests-postgres": 9, "tests-mongo": 4}
MINUTES |= {"tests-redis": 6, "tests-zav": 4, "tests-redis-floor": 3, "tests-file": 2}
MINUTES |= {"tests-wheels": 2, "typecheck": 1, "tests-langgraph": 1, "tests-openai-agents": 1}
MINUTES |= {"tests-adk": 1, "tests-pydantic-ai": 1, "tests-web": 1, "tests-asgi": 1}
"""Rough minutes per session on two cores, to balance the lanes (others count 1)."""
TAIL_LINES = 60
"""How many of a failing lane's last lines the run repeats at its end."""
FAILURE_LINE = re.compile(
    r"(FAILED|ERROR) [\w./-]+\.py|nox > Session \S+ (failed|aborted|interrupted)"
)
"""A line naming a failed test (pytest's short summary) or a failed session (nox)."""
NOT_RUN_LINE = re.compile(r"agentstores: not run: .*")
"""A line naming a server variant the run did not cover (tests/servers/variants.py)."""


def _version_of(python: str) -> tuple[int, int] | None:
    """The (major, minor) of the interpreter at ``python``, or None if it does not run."""
    try:
        out = subprocess.run(
            [python, "-c", "import sys; print(*sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.split()
        return int(out[0]), int(out[1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def _pyenv_roots(env: Mapping[str, str]) -> Iterator[Path]:
    """Where pyenv keeps its interpreters: ``$PYENV_ROOT``, else what ``pyenv root`` says."""
    if env.get("PYENV_ROOT"):
        yield Path(env["PYENV_ROOT"])
        return
    pyenv = shutil.which("pyenv", path=env.get("PATH", ""))
    if pyenv:
        try:
            out = subprocess.run(
                [pyenv, "root"], capture_output=True, text=True, timeout=30, check=True
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return
        if out:
            yield Path(out)


def _candidates(env: Mapping[str, str]) -> Iterator[str]:
    """Supported interpreters on PATH, then under pyenv's root, newest first."""
    for major, minor in reversed(SUPPORTED):
        found = shutil.which(f"python{major}.{minor}", path=env.get("PATH", ""))
        if found:
            yield found
    for root in _pyenv_roots(env):
        for major, minor in reversed(SUPPORTED):
            pattern = f"{major}.{minor}.*/bin/python{major}.{minor}"
            yield from (str(p) for p in sorted(root.glob(f"versions/{pattern}"), reverse=True))


def find_python(
    current: tuple[int, int], executable: str, env: Mapping[str, str]
) -> tuple[str, tuple[int, int]] | None:
    """The interpreter to run on: ``executable`` (of version ``current``) if supported,
    else a supported one found on PATH or under pyenv's root."""
    if current in SUPPORTED and executable:
        return executable, current
    for candidate in _candidates(env):
        version = _version_of(candidate)
        if version in SUPPORTED:
            return candidate, version
    return None


def locked_version(name: str, lock: str) -> str:
    """The version of package ``name`` that the text of uv.lock pins.

    Raises:
        LookupError: the lock has no such package.
    """
    found = re.search(rf'^name = "{re.escape(name)}"\nversion = "([^"]+)"', lock, re.MULTILINE)
    if found is None:
        raise LookupError(f"uv.lock pins no {name}")
    return found.group(1)


def ensure_venv(python: str, version: tuple[int, int]) -> None:
    """Create ``.venv`` on ``python`` (anew if it holds another version), then sync it to
    :data:`GROUPS` as uv.lock pins them (a no-op in a few milliseconds when it is)."""
    stamp = VENV / ".agentstores-setup"
    wanted = f"python {version[0]}.{version[1]}"
    if not (stamp.exists() and stamp.read_text() == wanted and (BIN / "python").exists()):
        print(f"creating {VENV} on Python {version[0]}.{version[1]} ...", flush=True)
        subprocess.run([python, "-m", "venv", "--clear", str(VENV)], check=True)
        uv = f"uv=={locked_version('uv', (ROOT / 'uv.lock').read_text())}"
        pip = [str(BIN / "python"), "-m", "pip", "install", "--quiet"]
        subprocess.run([*pip, "--disable-pip-version-check", uv], check=True)
        stamp.write_text(wanted)
    sync = [str(BIN / "uv"), "sync", "--locked", "--no-default-groups", "--quiet"]
    sync += [arg for group in GROUPS for arg in ("--group", group)]
    env = dict(os.environ, UV_PROJECT_ENVIRONMENT=str(VENV), UV_PYTHON=str(BIN / "python"))
    subprocess.run(sync, check=True, cwd=ROOT, env=env)


def run_nox(command: Sequence[str], env: Mapping[str, str], cwd: Path = ROOT) -> int:
    """Run nox; non-zero when it fails or when any session it ran was skipped.

    nox exits 0 when a session is skipped (``--no-error-on-missing-interpreters``, a
    ``session.skip()``), which would let a run that tested nothing pass.
    """
    command = list(command)
    at = command.index("--") if "--" in command else len(command)  # nox's own args end here
    own = command[:at]
    if NOX_INFO_FLAGS.intersection(own):
        return subprocess.call(command, cwd=cwd, env=dict(env))
    with tempfile.TemporaryDirectory(prefix="agentstores-nox-") as tmp:
        if "--report" in own[:-1]:
            report = cwd / own[own.index("--report") + 1]
        else:
            report = Path(tmp) / "report.json"
            command[at:at] = ["--report", str(report)]
        code = subprocess.call(command, cwd=cwd, env=dict(env))
        sessions = json.loads(report.read_text())["sessions"] if report.exists() else []
    skipped = [s for s in sessions if s.get("result") == "skipped"]
    for session in skipped:
        reason = session.get("reason") or "no reason given"
        print(f"run.py: session {session['name']} was skipped ({reason})", file=sys.stderr)
    if skipped:
        print(f"run.py: failing: {len(skipped)} session(s) skipped", file=sys.stderr)
        return code or 1
    return code


def tagged_sessions(nox: str, tag: str, env: Mapping[str, str]) -> list[str]:
    """The names of the noxfile's sessions carrying ``tag``, in the noxfile's order."""
    out = subprocess.run(
        [nox, "-t", tag, "--list", "--json"],
        cwd=ROOT,
        env=dict(env),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [entry["name"] for entry in json.loads(out)]


def split_lanes(sessions: Sequence[str], lanes: int) -> list[list[str]]:
    """Longest first onto the least loaded lane; each lane keeps the noxfile's order."""
    load = [0] * lanes
    assigned: list[list[str]] = [[] for _ in range(lanes)]
    for name in sorted(sessions, key=lambda n: -MINUTES.get(n, 1)):
        lane = load.index(min(load))
        assigned[lane].append(name)
        load[lane] += MINUTES.get(name, 1)
    order = {name: i for i, name in enumerate(sessions)}
    return [sorted(lane, key=order.__getitem__) for lane in assigned if lane]


def run_lanes(
    nox: Sequence[str],
    lanes: Sequence[Sequence[str]],
    posargs: Sequence[str],
    env: Mapping[str, str],
    cwd: Path = ROOT,
) -> int:
    """Run each lane's sessions in its own ``nox`` process, all lanes at once, each output
    line prefixed with its lane; fails when any lane fails or skips a session."""
    lock = threading.Lock()
    codes: list[int] = [0] * len(lanes)
    summaries: list[list[str]] = [[] for _ in lanes]
    not_run: dict[str, None] = {}  # in order, once each: every session names its own
    tails: list[collections.deque[str]] = [collections.deque(maxlen=TAIL_LINES) for _ in lanes]

    def lane(index: int, sessions: Sequence[str]) -> None:
        with tempfile.TemporaryDirectory(prefix="agentstores-lane-") as tmp:
            report = Path(tmp) / "report.json"
            command = [*nox, "-s", *sessions, "--report", str(report), *posargs]
            proc = subprocess.Popen(
                command,
                cwd=cwd,
                env=dict(env),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
            )
            assert proc.stdout is not None
            for line in proc.stdout:
                tagged = f"[lane {index + 1}] {line}"
                tails[index].append(tagged)
                if FAILURE_LINE.match(line):
                    summaries[index].append(tagged)
                elif NOT_RUN_LINE.match(line):
                    not_run[line.strip()] = None
                with lock:
                    sys.stdout.write(tagged)
                    sys.stdout.flush()
            code = proc.wait()
            results = json.loads(report.read_text())["sessions"] if report.exists() else []
        with lock:
            for session in results:
                result = session.get("result")
                verdict = f"[lane {index + 1}] {session['name']}: {result}\n"
                summaries[index].append(verdict)
                sys.stdout.write(verdict)
                if result == "skipped":
                    reason = session.get("reason") or "no reason given"
                    print(f"run.py: session {session['name']} was skipped ({reason})")
                    code = code or 1
            sys.stdout.flush()
        codes[index] = code

    print("run.py: lanes: " + "; ".join(", ".join(lane) for lane in lanes), flush=True)
    threads = [threading.Thread(target=lane, args=(i, s)) for i, s in enumerate(lanes)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    failed = [i + 1 for i, code in enumerate(codes) if code]
    if failed:
        # A CI log is often read from its end: repeat each failing lane's last lines there,
        # since the lane that failed first has long scrolled away.
        for number in failed:
            print(f"run.py: the last {TAIL_LINES} lines of lane {number}:")
            sys.stdout.writelines(tails[number - 1])
    print("run.py: summary (sessions, and failing tests as pytest named them):")
    for lines in summaries:
        sys.stdout.writelines(lines)
    for line in not_run:
        print(line)
    sys.stdout.flush()
    if failed:
        print(f"run.py: failing: lane(s) {failed} failed", file=sys.stderr)
    return next((code for code in codes if code), 0)


def run_tests(rest: Sequence[str], env: Mapping[str, str]) -> int:
    """Every session tagged ``tests``: in lanes, unless nox options were given."""
    lanes = int(env.get(LANES_ENV, "2") or "2")
    own = list(rest[: rest.index("--")] if "--" in rest else rest)
    if lanes <= 1 or own:
        return run_nox([str(BIN / "nox"), "-t", "tests", *rest], env)
    sessions = tagged_sessions(str(BIN / "nox"), "tests", env)
    return run_lanes([str(BIN / "nox")], split_lanes(sessions, lanes), list(rest), env)


def main(argv: list[str]) -> int:
    """Run one command of the module docstring; return its exit code."""
    if not argv or argv[0] in {"-h", "--help"}:
        print(__doc__)
        return 0
    current = (sys.version_info[0], sys.version_info[1])
    found = find_python(current, sys.executable, os.environ)
    if found is None:
        wanted = ", ".join(f"{major}.{minor}" for major, minor in SUPPORTED)
        print(
            f"run.py: agentstores needs Python {wanted}; this is {current[0]}.{current[1]} "
            "and none of those was found on PATH or under pyenv's root",
            file=sys.stderr,
        )
        return 2
    python, version = found
    if python != sys.executable:
        print(f"run.py: using {python} (Python {version[0]}.{version[1]})", flush=True)
    ensure_venv(python, version)
    command, rest = argv[0], argv[1:]
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    env[PYTHON_ENV] = f"{version[0]}.{version[1]}"
    env["NOX_ENABLE_STALENESS_CHECK"] = "1"  # a reused env built on another Python is rebuilt
    if command == "test":
        return run_tests(rest, env)
    if command == "nox":
        return run_nox([str(BIN / "nox"), *rest], env)
    if command == "drill":
        return subprocess.call([str(BIN / "agentstores"), "drill", *rest], cwd=ROOT, env=env)
    if command == "demo":
        demo = [str(BIN / "python"), "-m", "agentstores_tools.demo", *rest]
        proc = subprocess.Popen(demo, cwd=ROOT, env=env)
        try:
            return proc.wait()
        except KeyboardInterrupt:  # the demo got the Ctrl-C too: it stops its replicas
            return proc.wait()
    return subprocess.call([str(BIN / "agentstores"), command, *rest], cwd=ROOT, env=env)


if __name__ == "__main__":
    if sys.version_info < (3, 8):  # noqa: UP036 - an old python3 must still get the message
        sys.exit("agentstores needs Python 3.11 to 3.13")
    sys.exit(main(sys.argv[1:]))
