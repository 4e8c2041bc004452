"""Push: other processes' writes wake this bundle's followers, over sharded pub/sub.

With push on (by default on one server, not on a cluster: :func:`.stores.pushes`), every
write a follower cares about (a supervision row swapped or deleted, the recording put or
deleted, messages appended, a transcript cut, an erasure) publishes an empty message on
its conversation's wake channel ``P:{D}:w`` with ``SPUBLISH``, inside the script that
writes (``scripts/include/wake.lua``): only a write that ran publishes, and the message
names no more than the channel (a digest of the key, in the key's slot). Heartbeat
batches publish nothing. The ``SPUBLISH`` is kept out of the replication stream
(listeners subscribe on primaries).

Sharded pub/sub on a cluster and on one server alike: on a cluster a shard channel's
messages stay within the shard of its slot (plain ``PUBLISH`` is sent to every node of
the cluster), and one server runs the same scripts and the same listener. On one server
a channel nobody subscribes to costs a lookup per write; a cluster also forwards each
message to the shard's replicas over its bus, which is why push is off there by default.

Each bundle keeps one :class:`PushListener`: one connection per primary outside the pool
(:class:`.pubsub_link.Link`), subscribed to exactly the wake channels of the keys this
process follows (:class:`~agentstores.stores.subscriptions.KeySubscriptions`: a key counts
as pushed once the server confirmed its ``SSUBSCRIBE``, and its followers read once then).
Every link is checked with ``PING`` every :data:`HEALTH_INTERVAL` seconds (behind
Sentinel, also that it still goes to the primary the Sentinels name: a coordinated
failover demotes the old primary without closing its connections). When a link
fails (the connection drops or is killed, a ``PING`` goes unanswered, a ``MOVED`` reply,
the server dropping a slot's subscriptions after the slot moved) every link is closed,
``wakeups.remote`` turns False and every follower is woken, so it polls again at once;
the listener reconnects with backoff (on a cluster after reading the slot map again),
then sets ``remote`` and subscribes every followed key anew.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Set

from agentstores.keys import ConversationKey
from agentstores.stores.subscriptions import KeySubscriptions
from agentstores.stores.wakeups import Wakeups

from .client import RedisClient
from .keys import KeySpace
from .pubsub_link import Link, LinkLost

log = logging.getLogger(__name__)

HEALTH_INTERVAL = 5.0
"""Seconds between two health checks of the listener's connections."""
HEALTH_TIMEOUT = 5.0
"""Seconds a health check, a connect or a (un)subscription may take before the
connection counts as lost."""
BACKOFF_FIRST = 0.05
BACKOFF_MAX = 5.0
"""Seconds between reconnect attempts: doubling from the first to the most."""


class PushListener(KeySubscriptions):
    """One bundle's pub/sub connections and the task that keeps them up."""

    def __init__(self, client: RedisClient, keys: KeySpace, wakeups: Wakeups) -> None:
        super().__init__(wakeups)
        self.client = client
        self.keys = keys
        self.client_name = f"{client.options.client_name}-push"
        """The name the listener's connections carry (``CLIENT LIST`` shows it)."""
        self._links: dict[str, Link] = {}
        self._channels: dict[bytes, ConversationKey] = {}
        self._up = asyncio.Event()
        self._lost = asyncio.Event()
        self._keeper: asyncio.Task[None] | None = None
        self.connects = 0
        """How many times every connection was opened (tests read it)."""

    # --- lifecycle -----------------------------------------------------------------

    async def open(self) -> None:
        """Connect, trying once now, and keep connected in a task that reconnects
        whenever a connection is lost; then follow the hub's watched keys (:meth:`start`)."""
        try:
            await self._connect()
        except Exception as exc:
            log.warning("push: cannot listen yet (%s); followers poll until it can", exc)
            self._lost.set()
        self._keeper = asyncio.create_task(
            self._stay_connected(), name="agentstores-redis-listener"
        )
        self.start()

    async def close(self) -> None:
        """Stop listening (idempotent); ``remote`` turns False."""
        keeper, self._keeper = self._keeper, None
        if keeper is not None:
            keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await keeper
        await super().close()
        self._up.clear()
        self.wakeups.remote = False
        await self._drop_links()

    @property
    def connected(self) -> bool:
        """Whether every connection is up."""
        return self._up.is_set()

    # --- the connections -----------------------------------------------------------

    async def _connect(self) -> None:
        if self.connects:
            await self.client.refresh_topology()
        links: dict[str, Link] = {}
        try:
            for server in self.client.servers():
                conn = self.client.new_connection(server, self.client_name)
                link = Link(conn, self._heard, self._link_lost)
                links[server] = link
                await link.open(HEALTH_TIMEOUT)
        except BaseException:
            for link in links.values():
                await link.close()
            raise
        self._links = links
        self._channels.clear()
        self._lost.clear()
        self.connects += 1
        self.wakeups.remote = True
        self._up.set()
        self.resubscribe()  # every watched key's watchers are woken once it is confirmed

    async def _drop_links(self) -> None:
        links, self._links = self._links, {}
        for link in links.values():
            await link.close()

    def _link_lost(self, link: Link) -> None:
        if link in self._links.values():
            log.info("push: a listener connection was lost (%s)", link.failed)
            self._down()

    def _down(self) -> None:
        """A connection is lost: no key is pushed; followers poll again, now."""
        self._up.clear()
        self.reset()
        if self.wakeups.remote:
            self.wakeups.remote = False
            for key in self.wakeups.watched():
                self.wakeups.notify(key)
        self._lost.set()

    async def _stay_connected(self) -> None:
        """Health-check the connections while up; reconnect with backoff when not."""
        delay = BACKOFF_FIRST
        while True:
            if not self._lost.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._lost.wait(), timeout=HEALTH_INTERVAL)
                if not self._lost.is_set() and not await self._healthy():
                    self._down()
                if not self._lost.is_set():
                    delay = BACKOFF_FIRST
                    continue
            await self._drop_links()
            try:
                await self._connect()
            except Exception as exc:
                log.info("push: reconnecting the listener failed (%s); retrying", exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, BACKOFF_MAX)

    async def _healthy(self) -> bool:
        """Every link answers ``PING`` and still goes to a primary (behind Sentinel, the
        one the Sentinels name: :meth:`.client.RedisClient.still_primary`)."""
        links = tuple(self._links.values())
        answers = await asyncio.gather(*(link.ping(HEALTH_TIMEOUT) for link in links))
        if not (links and all(answers)):
            return False
        placed = await asyncio.gather(*(self.client.still_primary(link.conn) for link in links))
        return all(placed)

    # --- KeySubscriptions ------------------------------------------------------------

    async def _subscribe(self, keys: Set[ConversationKey]) -> None:
        """``SSUBSCRIBE`` each key's wake channel on the server of its slot; returns once
        every one is confirmed (one command per channel: a cluster refuses a command over
        channels of several slots)."""
        async with asyncio.timeout(HEALTH_TIMEOUT):
            await self._up.wait()
        by_link: dict[Link, list[tuple[bytes, bytes | None]]] = {}
        for key in keys:
            channel = self.keys.conv(key).channel
            link = self._links.get(self.client.server_of(channel))
            if link is None:  # the slot map changed under the links: reconnect
                self._down()
                raise LinkLost(f"no push connection serves the slot of {channel}")
            raw = channel.encode()
            self._channels[raw] = key
            by_link.setdefault(link, []).append((b"SSUBSCRIBE", raw))
        await self._on_links(by_link)

    async def _unsubscribe(self, keys: Set[ConversationKey]) -> None:
        """``SUNSUBSCRIBE`` the wake channels of keys nobody follows any more."""
        by_link: dict[Link, list[tuple[bytes, bytes | None]]] = {}
        for key in keys:
            channel = self.keys.conv(key).channel
            raw = channel.encode()
            self._channels.pop(raw, None)
            link = self._links.get(self.client.server_of(channel))
            if link is not None and self.connected:
                by_link.setdefault(link, []).append((b"SUNSUBSCRIBE", raw))
        await self._on_links(by_link)

    async def _on_links(self, work: dict[Link, list[tuple[bytes, bytes | None]]]) -> None:
        results = await asyncio.gather(
            *(link.call(commands, HEALTH_TIMEOUT) for link, commands in work.items()),
            return_exceptions=True,
        )
        for result in results:
            if isinstance(result, BaseException):
                self._down()
                raise result

    def _heard(self, channel: bytes) -> None:
        """A followed key was written somewhere: wake its watchers."""
        key = self._channels.get(channel)
        if key is not None:
            self.wakeups.notify(key)


__all__ = ["BACKOFF_FIRST", "BACKOFF_MAX", "HEALTH_INTERVAL", "HEALTH_TIMEOUT", "PushListener"]
