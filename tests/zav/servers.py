"""Store URLs for the two-server proof, one per backend, and the perf servers themselves."""

from __future__ import annotations

import contextlib
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


class PerfServer:
    """One ``perf_app`` process under uvicorn, as ``za agents perf server`` runs one."""

    def __init__(self, label: str, url: str, log_dir: Path) -> None:
        self.label = label
        self.port = free_port()
        self.log = log_dir / f"{label}.log"
        env = {
            **os.environ,
            "AGENTSTORES_URL": url,
            "ZAV_PROJECT_DIR": str(PROJECT),
            "ZAV_PERF_LABEL": label,
            "ZAV_TEST_WORDS": str(WORDS),
            "JSON_LOGGING": "0",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        }
        cmd = [sys.executable, "-m", "uvicorn", "tests.zav.perf_app:app", "--host", "127.0.0.1"]
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [*cmd, "--port", str(self.port)],
                env=env,
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wait_ready(self, timeout: float = 180.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.label} exited: {self.log.read_text()[-3000:]}")
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(f"{self.base}/perf/info", timeout=2) as resp,
            ):
                if resp.status == 200:
                    return
            time.sleep(0.3)
        raise RuntimeError(f"{self.label} did not start: {self.log.read_text()[-3000:]}")

    def freeze(self) -> None:
        os.kill(self.proc.pid, signal.SIGSTOP)

    def wake(self) -> None:
        os.kill(self.proc.pid, signal.SIGCONT)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.wake()
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
