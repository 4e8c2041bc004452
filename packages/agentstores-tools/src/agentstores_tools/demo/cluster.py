"""Two (or more) replicas of the demo app over one store, behind the round-robin proxy.

Each replica is its own process (``python -m agentstores_asgi.demo --port P --url URL``),
so killing one is a real crash: its turn's lease stops beating and a replica that follows
the answer takes the turn over. The proxy runs in this process on a thread of its own.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

import uvicorn

from .proxy import create_proxy

REPLICA_MODULE = "agentstores_asgi.demo"
"""The app each replica serves: the demo app of agentstores-asgi."""
START_TIMEOUT = 60.0


def free_port() -> int:
    """A loopback port nobody listens on now (the OS picks)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


@dataclass
class Replica:
    """One replica process and where it serves."""

    name: str
    port: int
    log_path: Path
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """Crash the replica (SIGKILL): nothing flushed, its lease left to expire."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self) -> None:
        """Stop the replica gracefully (SIGTERM, then SIGKILL after 10 s)."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()


class DemoCluster:
    """``replicas`` demo app processes on ``url`` and the proxy in front of them.

    ``replica_args`` are added to every replica's command line (the demo app's pace,
    lease timings...); ``module`` is the app module each replica runs."""

    def __init__(
        self,
        url: str,
        *,
        replicas: int = 2,
        port: int = 0,
        replica_args: Sequence[str] = (),
        module: str = REPLICA_MODULE,
        log_dir: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.url = url
        self.port = port or free_port()
        self.module = module
        self.replica_args = list(replica_args)
        self.env = dict(os.environ if env is None else env)
        self.log_dir = log_dir or Path.cwd()
        self.replicas = [
            Replica(f"replica-{i + 1}", free_port(), self.log_dir / f"replica-{i + 1}.log")
            for i in range(replicas)
        ]
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def proxy_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self, replica: Replica) -> list[str]:
        """The command line that runs ``replica``."""
        return [
            sys.executable,
            *("-m", self.module, "--port", str(replica.port), "--url", self.url),
            *self.replica_args,
        ]

    def start_replica(self, replica: Replica) -> None:
        """Start ``replica`` (again, after a kill) and wait until it listens."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with replica.log_path.open("ab") as log:
            replica.process = subprocess.Popen(
                self.command(replica),
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                start_new_session=True,
            )
        deadline = time.monotonic() + START_TIMEOUT
        while not _listening(replica.port):
            if replica.process.poll() is not None or time.monotonic() > deadline:
                replica.stop()
                tail = replica.log_path.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"{replica.name} did not start on {replica.url}:\n{tail}")
            time.sleep(0.05)

    def start(self) -> Self:
        """Start every replica, then the proxy; return when all of them listen."""
        try:
            for replica in self.replicas:
                self.start_replica(replica)
            app = create_proxy(
                [r.url for r in self.replicas], names=[r.name for r in self.replicas]
            )
            config = uvicorn.Config(
                app,
                host="127.0.0.1",
                port=self.port,
                log_level="warning",
                lifespan="on",
                timeout_graceful_shutdown=2,  # a page still streaming does not hold the exit
            )
            self._server = uvicorn.Server(config)
            self._thread = threading.Thread(target=self._server.run, name="demo-proxy", daemon=True)
            self._thread.start()
            deadline = time.monotonic() + START_TIMEOUT
            while not self._server.started:
                if not self._thread.is_alive() or time.monotonic() > deadline:
                    raise RuntimeError(f"the proxy did not start on {self.proxy_url}")
                time.sleep(0.05)
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Stop the proxy and every replica."""
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=10)
        self._server = self._thread = None
        for replica in self.replicas:
            with contextlib.suppress(OSError):
                replica.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()
