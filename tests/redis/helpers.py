"""Tools for the Redis tests: killing the adapter's own connections, pausing a server's
writes, a TCP relay that can lose a reply after the server sent it, and ``MONITOR``'s
account of the commands a call ran."""

from __future__ import annotations

import asyncio
import contextlib
import re
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import redis.asyncio as aioredis

from tests.servers.relay import Relay as BaseRelay


def host_port(url: str) -> tuple[str, int]:
    rest = url.split("://", 1)[1].split("/", 1)[0].split("?", 1)[0]
    host, _, port = rest.rpartition(":")
    return host or "127.0.0.1", int(port)


class Admin:
    """A plain redis-py connection per server node, for CLIENT KILL / CLIENT PAUSE."""

    def __init__(self, ports: list[int], host: str = "127.0.0.1") -> None:
        self.clients = [aioredis.Redis(host=host, port=p, protocol=2) for p in ports]

    async def close(self) -> None:
        for c in self.clients:
            await c.aclose()

    async def connections(self, name: str) -> list[tuple[int, int]]:
        """``(node index, client id)`` of every connection named ``name``."""
        found = []
        for i, c in enumerate(self.clients):
            for entry in await c.client_list():
                if entry.get("name") == name:
                    found.append((i, int(entry["id"])))
        return found

    async def kill(self, name: str) -> int:
        """CLIENT KILL every connection named ``name`` (only ours: never other clients)."""
        killed = 0
        for i, cid in await self.connections(name):
            with contextlib.suppress(Exception):
                killed += int(await self.clients[i].execute_command("CLIENT", "KILL", "ID", cid))
        return killed

    async def pause_writes(self, ms: int) -> None:
        for c in self.clients:
            await c.execute_command("CLIENT", "PAUSE", ms, "WRITE")

    async def unpause(self) -> None:
        for c in self.clients:
            await c.execute_command("CLIENT", "UNPAUSE")

    async def info(self, section: str, node: int = 0) -> dict[str, Any]:
        result: dict[str, Any] = await self.clients[node].info(section)
        return result


class Relay(BaseRelay):
    """A loopback TCP relay in front of one server.

    ``lose_next_reply()``: the next bytes the server sends (on any connection) are
    dropped and that connection is cut, so a command runs but its reply never arrives.
    ``lose_next_request()``: the next bytes a client sends are dropped and the
    connection cut, so the command never reaches the server.
    """

    def __init__(self, target_port: int) -> None:
        super().__init__("127.0.0.1", target_port)
        self._lose_reply = False
        self._skip_replies = 0
        self._lose_request = False
        self.cut = 0

    def url(self, prefix: str) -> str:
        return f"redis://127.0.0.1:{self.port}/0?key_prefix={prefix}"

    def lose_next_reply(self, skip: int = 0) -> None:
        """Drop the next reply (after letting ``skip`` replies through)."""
        self._skip_replies = skip
        self._lose_reply = True

    def lose_next_request(self) -> None:
        self._lose_request = True

    def request(self, data: bytes, marks: list[Any]) -> bool:
        if not self._lose_request:
            return True
        self._lose_request = False
        self.cut += 1
        return False

    async def reply(self, data: bytes, mark: Any | None) -> bool:
        if not self._lose_reply:
            return True
        if self._skip_replies:
            self._skip_replies -= 1
            return True
        self._lose_reply = False
        self.cut += 1
        return False


_TOKEN = re.compile(rb'"((?:[^"\\]|\\.)*)"')
_SOURCE = re.compile(rb"^[\d.]+ \[\d+ ([^\]]+)\]")
"""A ``MONITOR`` line's source: ``lua``, or the client's ``host:port``."""


async def monitored(
    port: int, op: Callable[[], Awaitable[Any]], client_name: str = "agentstores"
) -> list[tuple[bytes, int]]:
    """``(command, argument count)`` of every command :func:`commands_during` ``op``."""
    return [(c[0], len(c) - 1) for c in await commands_during(port, op, client_name)]


async def commands_during(
    port: int, op: Callable[[], Awaitable[Any]], client_name: str = "agentstores"
) -> list[list[bytes]]:
    """Every command (name in lower case, then its arguments) the server on ``port`` ran
    during ``op`` (``MONITOR`` shows every command, those a Lua script calls included)
    for the connections named ``client_name`` (the adapter's): a command another client
    sent meanwhile is not the call's cost."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"MONITOR\r\n")
    await writer.drain()
    assert (await reader.readline()).startswith(b"+OK")
    await op()
    sentinel = uuid.uuid4().hex.encode()
    probe_reader, probe = await asyncio.open_connection("127.0.0.1", port)
    probe.write(b"CLIENT LIST\r\n")
    await probe.drain()
    size = int((await probe_reader.readline())[1:])
    listing = (await probe_reader.readexactly(size + 2)).decode()
    ours = {
        fields["addr"].encode()
        for fields in (
            dict(f.split("=", 1) for f in line.split() if "=" in f) for line in listing.splitlines()
        )
        if fields.get("name") == client_name
    }
    probe.write(b"ECHO " + sentinel + b"\r\n")
    await probe.drain()
    seen: list[list[bytes]] = []
    while True:
        line = await asyncio.wait_for(reader.readline(), 30)
        tokens = _TOKEN.findall(line)
        if not tokens:
            continue
        name = tokens[0].lower()
        if name == b"echo" and sentinel in line:
            break
        source = _SOURCE.search(line)
        if source is not None and source.group(1) != b"lua" and source.group(1) not in ours:
            continue
        seen.append([name, *tokens[1:]])
    writer.close()
    probe.close()
    return seen


PATIENCE = 10.0
"""Longest a test waits for something it expects to happen soon (a wake-up, a link)."""


async def eventually(check: Callable[[], bool], within: float = PATIENCE) -> None:
    """Wait until ``check()`` holds, failing the test after ``within`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not check():
        assert loop.time() < deadline, "not within the patience"
        await asyncio.sleep(0.02)
