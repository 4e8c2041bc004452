"""The fault-injecting proxy (tests/servers/netfault.py) against a trivial echo server:
each mode does to the bytes what it says, and switching back heals new connections only.

Outcomes are judged by bytes seen at either end, never by the clock: a "nothing arrived"
check waits a short while for bytes that must never come.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from tests.servers.netfault import NetFaultProxy

QUIET = 0.3
"""Seconds to wait for bytes that must not arrive."""


class Echo:
    """An echo server that keeps every byte it received."""

    def __init__(self) -> None:
        self.received = bytearray()
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def _serve(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        try:
            while data := await r.read(1024):
                self.received += data
                w.write(data)
                await w.drain()
        except ConnectionError:
            pass
        finally:
            w.close()


@pytest.fixture
async def echo() -> AsyncIterator[Echo]:
    e = Echo()
    await e.start()
    yield e
    assert e.server is not None
    e.server.close()


@pytest.fixture
async def proxy(echo: Echo) -> AsyncIterator[NetFaultProxy]:
    assert echo.server is not None
    p = await NetFaultProxy("127.0.0.1", echo.server.sockets[0].getsockname()[1]).start()
    yield p
    await p.close()


async def connect(p: NetFaultProxy) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", p.port)


async def roundtrip(p: NetFaultProxy, data: bytes = b"ping") -> bytes:
    r, w = await connect(p)
    w.write(data)
    await w.drain()
    got = await asyncio.wait_for(r.readexactly(len(data)), 5)
    w.close()
    return got


async def silent(r: asyncio.StreamReader) -> bool:
    """True when nothing (no byte, no EOF, no reset) arrives within :data:`QUIET`."""
    try:
        await asyncio.wait_for(r.read(1), QUIET)
    except TimeoutError:
        return True
    return False


async def ended(r: asyncio.StreamReader) -> bytes:
    """What the connection delivers before it ends (EOF or reset)."""
    got = bytearray()
    try:
        while chunk := await asyncio.wait_for(r.read(1024), 5):
            got += chunk
    except ConnectionError:
        pass
    return bytes(got)


async def test_pass_and_delay_forward_every_byte(proxy: NetFaultProxy) -> None:
    assert await roundtrip(proxy) == b"ping"
    proxy.delay(1000)
    r, w = await connect(proxy)
    w.write(b"slow")
    assert await silent(r), "a delayed chunk arrived before its delay"
    assert await asyncio.wait_for(r.readexactly(4), 10) == b"slow"
    w.close()
    with pytest.raises(ValueError):
        proxy.delay(-1)


async def test_drop_replies_loses_the_answer_after_the_server_got_the_request(
    proxy: NetFaultProxy, echo: Echo
) -> None:
    r, w = await connect(proxy)
    proxy.drop_replies()
    w.write(b"applied")
    assert await ended(r) == b"", "the reply should be lost"
    assert bytes(echo.received) == b"applied", "the server must have got the request"
    assert proxy.stats["drop_replies"] == 1
    proxy.heal()
    assert await roundtrip(proxy) == b"ping"


async def test_cut_resets_after_the_given_bytes(proxy: NetFaultProxy, echo: Echo) -> None:
    r, w = await connect(proxy)
    proxy.cut(3)
    w.write(b"abcdef")
    assert await ended(r) == b"", "the request is cut, so no reply may arrive"
    await asyncio.sleep(0.05)
    assert bytes(echo.received) == b"abc"
    with pytest.raises(ValueError):
        proxy.cut(-1)


async def test_blackhole_swallows_and_keeps_the_connection_open(
    proxy: NetFaultProxy, echo: Echo
) -> None:
    r, w = await connect(proxy)
    proxy.blackhole()
    w.write(b"lost")
    assert await silent(r), "a blackholed connection must neither answer nor end"
    assert bytes(echo.received) == b""
    proxy.heal()
    w.write(b"again")
    assert await silent(r), "a connection that swallowed bytes stays silent"
    assert await roundtrip(proxy) == b"ping", "new connections pass once healed"
    w.close()


async def test_partition_resets_open_connections_and_refuses_new_ones(
    proxy: NetFaultProxy,
) -> None:
    r, w = await connect(proxy)
    w.write(b"x")
    assert await asyncio.wait_for(r.readexactly(1), 5) == b"x"
    proxy.partition()
    assert await ended(r) == b""
    r2, w2 = await connect(proxy)
    w2.write(b"y")
    assert await ended(r2) == b"", "a new connection must be refused during a partition"
    assert proxy.stats["reset"] == 1 and proxy.stats["refused"] == 1
    proxy.heal()
    assert await roundtrip(proxy) == b"ping"
