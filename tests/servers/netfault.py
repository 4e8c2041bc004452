"""A loopback TCP proxy whose network can be broken on purpose, from the test, while
clients use it: the faults a real network deals a client between it and its server.

    proxy = await NetFaultProxy("127.0.0.1", server_port).start()
    url = f"redis://127.0.0.1:{proxy.port}"
    proxy.delay(50)            # every chunk waits 50 ms, both ways
    proxy.drop_replies()       # the next reply on each connection is lost, the connection closed
    proxy.cut(100)             # each connection's next chunk cut after 100 bytes, then RST
    proxy.blackhole()          # every byte vanishes; connections stay open, nothing answers
    proxy.partition()          # existing connections reset, new ones refused
    proxy.heal()               # back to passing bytes through (``pass_through`` alike)

Modes switch at once on every connection. ``drop_replies`` and ``cut`` strike each
connection once (the next chunk that meets the rule); a connection that lost or
swallowed a byte never carries another one (its byte stream is broken), as when a real
peer vanished: blackholed connections stay silent after :meth:`heal`, so only a client's
own timeout frees a call waiting on one. :attr:`stats` counts what each fault did.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .relay import CHUNK, Relay

MODES = ("pass", "delay", "drop_replies", "cut", "blackhole", "partition")


@dataclass(eq=False)
class _Link:
    """One relayed connection: its two writers and whether it is broken for good."""

    client: asyncio.StreamWriter
    server: asyncio.StreamWriter | None = None
    dead: bool = False
    """A byte was lost or swallowed on it: it never forwards another."""
    struck: set[int] = field(default_factory=set)
    """The fault generations that already struck this connection (once each)."""


class NetFaultProxy(Relay):
    """Forward 127.0.0.1:<port> to ``(host, port)``, with switchable faults."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(host, port)
        self.mode = "pass"
        self.delay_ms = 0.0
        self.cut_after = 0
        self._generation = 0
        self._links: set[_Link] = set()
        self.stats: Counter[str] = Counter()
        """Per fault, how many connections it struck (``refused``: connections refused
        during a partition; ``reset``: connections a partition reset)."""

    # --- switching -------------------------------------------------------------------

    def _switch(self, mode: str) -> None:
        self.mode = mode
        self._generation += 1

    def pass_through(self) -> None:
        """Forward every byte at once (connections already broken stay broken)."""
        self._switch("pass")

    heal = pass_through

    def delay(self, ms: float) -> None:
        """Hold every chunk ``ms`` milliseconds before forwarding it, both directions."""
        if ms < 0:
            raise ValueError(f"delay must be >= 0 ms, got {ms}")
        self.delay_ms = ms
        self._switch("delay")

    def drop_replies(self) -> None:
        """The next chunk the server sends on each connection is dropped and that
        connection closed on both sides: the server ran the call, its answer is lost."""
        self._switch("drop_replies")

    def cut(self, after: int = 0) -> None:
        """The next chunk on each connection (either direction) is forwarded only up to
        its first ``after`` bytes, then both sides are reset (RST): a connection dying
        mid-request or mid-reply."""
        if after < 0:
            raise ValueError(f"cut needs after >= 0 bytes, got {after}")
        self.cut_after = after
        self._switch("cut")

    def blackhole(self) -> None:
        """Swallow every byte both ways and keep every socket open: nothing is refused,
        reset or answered. A connection that swallowed a byte stays silent for good."""
        self._switch("blackhole")

    def partition(self) -> None:
        """Reset every open connection and refuse (reset at once) new ones until
        :meth:`heal`."""
        self._switch("partition")
        for link in list(self._links):
            self.stats["reset"] += 1
            self._kill(link)

    # --- relaying --------------------------------------------------------------------

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        link = _Link(client_w)
        if self.mode == "partition":
            self.stats["refused"] += 1
            self._kill(link)
            return
        try:
            server_r, server_w = await asyncio.open_connection(*self.target)
        except OSError:
            self._kill(link)
            return
        link.server = server_w
        handler = asyncio.current_task()
        assert handler is not None
        self._handlers.add(handler)
        self._writers.update({client_w, server_w})
        self._links.add(link)
        pumps = [
            asyncio.create_task(self._pump(link, client_r, server_w, reply=False)),
            asyncio.create_task(self._pump(link, server_r, client_w, reply=True)),
        ]
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pump in pumps:
                pump.cancel()
            # A pump that died of a reset connection is the fault itself, not an error.
            await asyncio.gather(*pumps, return_exceptions=True)
            self._links.discard(link)
            for writer in (client_w, server_w):
                self._writers.discard(writer)
                with contextlib.suppress(Exception):
                    writer.close()
            self._handlers.discard(handler)

    async def _pump(
        self,
        link: _Link,
        source: asyncio.StreamReader,
        sink: asyncio.StreamWriter,
        *,
        reply: bool,
    ) -> None:
        """Move chunks from ``source`` to ``sink`` under the current mode; returns (ending
        the connection) when either side closes or a fault closes it."""
        while data := await source.read(CHUNK):
            if link.dead or self.mode == "blackhole":
                if not link.dead:
                    link.dead = True
                    self.stats["blackhole"] += 1
                continue  # swallowed; the socket stays open
            generation = self._generation
            if self.mode == "partition":
                self._kill(link)
                return
            if self.mode == "delay" and self.delay_ms:
                await asyncio.sleep(self.delay_ms / 1000)
                if link.dead or self.mode in ("blackhole", "partition"):
                    continue  # the fault switched while the chunk waited
            elif self.mode == "drop_replies" and reply and generation not in link.struck:
                link.struck.add(generation)
                self.stats["drop_replies"] += 1
                link.dead = True
                self._close(link)
                return
            elif self.mode == "cut" and generation not in link.struck:
                link.struck.add(generation)
                self.stats["cut"] += 1
                link.dead = True
                if self.cut_after:
                    sink.write(data[: self.cut_after])
                    with contextlib.suppress(ConnectionError):
                        await sink.drain()
                self._kill(link)
                return
            sink.write(data)
            await sink.drain()

    async def close(self) -> None:
        """Stop listening and reset every connection; the handlers end by themselves (a
        handler cancelled from outside makes asyncio log a spurious error)."""
        if self.server is None:
            return
        self.server.close()
        for link in list(self._links):
            self._kill(link)
        handlers = list(self._handlers)
        if handlers:
            await asyncio.wait(handlers, timeout=5)
        await super().close()

    def _close(self, link: _Link) -> None:
        """Close both sides of ``link`` in order (FIN)."""
        for writer in (link.client, link.server):
            if writer is not None:
                with contextlib.suppress(Exception):
                    writer.close()

    def _kill(self, link: _Link) -> None:
        """Reset both sides of ``link`` (RST: SO_LINGER 0, then abort)."""
        link.dead = True
        for writer in (link.client, link.server):
            if writer is None:
                continue
            sock: Any = writer.get_extra_info("socket")
            with contextlib.suppress(OSError, AttributeError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()


__all__ = ["MODES", "NetFaultProxy"]
