"""Store URLs for the two-server proof, one per backend, and the perf servers themselves."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

from tests.servers.moto import MotoServer, free_port, use_test_credentials

ROOT = Path(__file__).resolve().parents[2]
PROJECT = Path(__file__).resolve().parent / "perf_project"
WORDS = 80
"""Words in the test agent's answer, one every 0.1 s: an 8 s turn, so the SDK's 5 s
checkpoint lands before the producer is killed."""

BACKENDS = ["file", "postgres", "redis", "mongo", "s3"]
"""Every backend the project has."""


@contextlib.contextmanager
def store_url(backend: str, tmp: Path) -> Iterator[str]:
    """A fresh store on ``backend``: on the servers the environment names
    (``AGENTSTORES_TEST_POSTGRES_URL``, ``AGENTSTORES_TEST_REDIS_URL``,
    ``MONGODB_URI``), else on ones started here (embedded PostgreSQL, Valkey, nx-27017,
    moto); a server that cannot start fails."""
    if backend == "file":
        yield f"file://{tmp / 'stores'}"
    elif backend == "postgres":
        from tests.servers.postgres import ENV_URL, EmbeddedPostgres, Installation

        with contextlib.ExitStack() as stack:
            admin = os.environ.get(ENV_URL) or stack.enter_context(EmbeddedPostgres()).url
            yield stack.enter_context(Installation(admin)).url
    elif backend == "redis":
        from tests.servers.valkey import ValkeyServer

        stack = contextlib.ExitStack()
        base = (
            os.environ.get("AGENTSTORES_TEST_REDIS_URL") or stack.enter_context(ValkeyServer()).url
        )
        prefix = f"aszav-{uuid.uuid4().hex[:10]}"
        url = f"{base}{'&' if '?' in base else '?'}key_prefix={prefix}"
        try:
            yield url
        finally:
            from tests.redis.conftest import purge

            purge(url)
            stack.close()
    elif backend == "mongo":
        from tests.servers.mongo import Installation, mongo_base_url

        with mongo_base_url() as base, Installation(base) as installation:
            yield installation.url
    elif backend == "s3":
        use_test_credentials()
        from tests.s3.conftest import make_bucket

        with MotoServer() as server:
            url = server.url("zav-test", prefix=f"aszav-{uuid.uuid4().hex[:10]}")
            make_bucket(url)
            yield url
    else:
        raise ValueError(backend)


class Zygote:
    """``tests.zav.zygote`` running: it imported the SDK once and forks perf servers."""

    def __init__(self) -> None:
        env = {
            **os.environ,
            "JSON_LOGGING": "0",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        }
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.zav.zygote"],
            env=env,
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._stdin, self._stdout = self.proc.stdin, self.proc.stdout
        if self._stdout.readline().strip() != "ready":
            self.close()
            raise RuntimeError("the perf server zygote did not start")

    def spawn(self, env: dict[str, str], log: Path, port: int) -> int:
        """A new perf server process; its pid."""
        request = {"env": env, "log": str(log), "port": port, "cwd": str(ROOT)}
        self._stdin.write(json.dumps(request) + "\n")
        self._stdin.flush()
        answer = self._stdout.readline()
        if not answer:
            raise RuntimeError("the perf server zygote exited")
        return int(json.loads(answer)["pid"])

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


class PerfServer:
    """One ``perf_app`` process under uvicorn, as ``za agents perf server`` runs one
    (forked by the :class:`Zygote`, so the SDK's import is paid once)."""

    def __init__(self, label: str, url: str, log_dir: Path, zygote: Zygote) -> None:
        self.label = label
        self.port = free_port()
        self.log = log_dir / f"{label}.log"
        env = {
            **os.environ,  # as it is now (the S3 test credentials are set late)
            "AGENTSTORES_URL": url,
            "ZAV_PROJECT_DIR": str(PROJECT),
            "ZAV_PERF_LABEL": label,
            "ZAV_TEST_WORDS": str(WORDS),
            "JSON_LOGGING": "0",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        }
        self.pid = zygote.spawn(env, self.log, self.port)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return self.log.read_text(errors="replace")[-3000:]
        return "(no log)"

    def wait_ready(self, timeout: float = 180.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not _alive(self.pid):
                raise RuntimeError(f"{self.label} exited: {self._log_tail()}")
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(f"{self.base}/perf/info", timeout=2) as resp,
            ):
                if resp.status == 200:
                    return
            time.sleep(0.3)
        raise RuntimeError(f"{self.label} did not start: {self._log_tail()}")

    def freeze(self) -> None:
        os.kill(self.pid, signal.SIGSTOP)

    def wake(self) -> None:
        os.kill(self.pid, signal.SIGCONT)

    def stop(self) -> None:
        """SIGTERM (after waking it), then SIGKILL after 10 s; gone when this returns."""
        if not _alive(self.pid):
            return
        with contextlib.suppress(ProcessLookupError):
            self.wake()
            os.kill(self.pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while _alive(self.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while _alive(self.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
