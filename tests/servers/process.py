"""A test server as a child process on a free loopback port: start it, wait until it
answers, stop or crash it, start it again on the same port and data.

:class:`LoopbackServer` is the life cycle; a backend's server class says how to run its
program (:meth:`LoopbackServer.args`), when it is ready (:meth:`LoopbackServer.ready`)
and where it logs (:attr:`LoopbackServer.log_path`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Self

MAX_PORT = 55535
"""Ports stay below 55536 so that port + 10000 (a Valkey cluster's default bus port) is
valid."""


def free_port(exclude: set[int] | None = None) -> int:
    """A loopback port nobody listens on now (the OS picks; retried until below MAX_PORT)."""
    for _ in range(200):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port <= MAX_PORT and (exclude is None or port not in exclude):
            return port
    raise RuntimeError("no free loopback port below 55536")


def listening(port: int) -> bool:
    """Whether something accepts TCP connections on 127.0.0.1:``port``."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


class LoopbackServer:
    """One server process on a free loopback port (or ``port``), in a private directory
    (or ``directory``, which is then kept at :meth:`close`). ``restart()`` keeps the port
    and the directory."""

    name = "server"
    """The program's name, for errors."""
    start_timeout = 30.0
    poll_interval = 0.05

    def __init__(
        self, *, port: int | None, directory: str | os.PathLike[str] | None, prefix: str
    ) -> None:
        self.port = port or 0
        self._own_dir = directory is None
        self.directory = Path(directory) if directory else Path(tempfile.mkdtemp(prefix=prefix))
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def log_path(self) -> Path:
        raise NotImplementedError

    def args(self) -> list[str]:
        """The command line that serves on :attr:`port`."""
        raise NotImplementedError

    def ready(self) -> bool:
        """Whether the server answers on :attr:`port` (default: it accepts connections)."""
        return listening(self.port)

    def start(self, timeout: float | None = None) -> Self:
        """Start the server (on a fresh free port unless one is set) and wait until it is
        ready. A server that dies or never gets ready on a port it picked is tried again
        on another port, up to five times."""
        if self.process is not None and self.process.poll() is None:
            return self
        fixed = self.port != 0
        for _attempt in range(5):
            if not fixed:
                self.port = free_port()
            self.process = subprocess.Popen(
                self.args(),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            deadline = time.monotonic() + (timeout or self.start_timeout)
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    break
                if self.ready():
                    return self
                time.sleep(self.poll_interval)
            self._reap()
            if fixed:
                break
        raise RuntimeError(f"{self.name} did not start on port {self.port}: {self.log_tail()}")

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def _reap(self, sig: int = signal.SIGKILL) -> None:
        proc, self.process = self.process, None
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(sig)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)

    def stop(self) -> None:
        """Graceful shutdown: SIGTERM, and wait for the process to exit."""
        self._reap(signal.SIGTERM)

    def kill(self) -> None:
        """Crash: SIGKILL, no chance to flush anything."""
        self._reap(signal.SIGKILL)

    def restart(self, *, crash: bool = False) -> None:
        """Stop (or crash) and start again on the same port and directory."""
        if crash:
            self.kill()
        else:
            self.stop()
        self.start()

    def close(self) -> None:
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()
