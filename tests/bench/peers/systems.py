"""What every measured system offers the bench, and agentstores' own two.

A :class:`System` holds one conversation per handle it returns from :meth:`System.new`
and answers the four calls the bench times: append one message, the first user
message, the recent 20, and (untimed) a bulk build to a given length. ``storage_bytes``
is what its database holds now; the bench takes differences around the timed appends.
"""

from __future__ import annotations

import abc
import uuid
from typing import Any

import asyncpg
import redis.asyncio as aioredis

TEXT = "lorem ipsum " * 8


def text_of(n: int) -> str:
    """The n-th message's text (the bench harness's, ~110 characters)."""
    return f"message {n} {TEXT}"


def role_of(n: int) -> str:
    return "user" if n % 2 == 0 else "assistant"


class System(abc.ABC):
    """One system under test, opened on its own database."""

    name: str
    server: str  # "postgres" or "redis"
    version: str = ""
    over: str | None = None
    """A framework bridge's agentstores system (the same backend), whose own calls its
    overhead is measured against; None for agentstores itself and for the peers."""
    native: str | None = None
    """A framework bridge's framework's own store on the same server, measured beside it."""

    @abc.abstractmethod
    async def open(self) -> None: ...

    @abc.abstractmethod
    async def close(self) -> None: ...

    @abc.abstractmethod
    async def new(self) -> Any:
        """A fresh, empty conversation handle."""

    @abc.abstractmethod
    async def build(self, conv: Any, start: int, count: int) -> None:
        """Append messages ``start .. start + count - 1`` (untimed; bulk where offered)."""

    @abc.abstractmethod
    async def append(self, conv: Any, n: int) -> None:
        """Append message ``n`` alone (timed)."""

    @abc.abstractmethod
    async def first_user(self, conv: Any) -> str:
        """The text of the conversation's first user message (timed)."""

    @abc.abstractmethod
    async def recent(self, conv: Any, k: int) -> int:
        """The last ``k`` messages; returns how many came back (timed)."""

    @abc.abstractmethod
    async def storage_bytes(self) -> int: ...


class Listing(abc.ABC):
    """A system that lists a user's sessions (LangGraph's savers and the OpenAI SDK's
    sessions offer no such call). The bench gives a user of the listing's own as many
    sessions as the length, one message each, and times listing them all."""

    @abc.abstractmethod
    async def add_listed(self, n: int) -> None:
        """Session ``n`` (holding one message) for the listing user (untimed)."""

    @abc.abstractmethod
    async def list_sessions(self) -> int:
        """Every session of the listing user, through the system's own listing, all pages
        (timed); returns how many were listed."""


async def postgres_bytes(admin_url: str) -> int:
    """What the user tables of the database at ``admin_url`` hold: the exact length of
    their live rows, heap and TOAST (``pgstattuple``), plus the size of their indexes
    (whole pages: growth below 8 KiB per index shows only over many appends)."""
    conn = await asyncpg.connect(admin_url)
    try:
        await conn.execute("CREATE EXTENSION IF NOT EXISTS pgstattuple")
        value = await conn.fetchval(
            "SELECT coalesce(sum((pgstattuple(c.oid)).tuple_len"
            " + CASE WHEN c.reltoastrelid <> 0 THEN (pgstattuple(c.reltoastrelid)).tuple_len"
            " ELSE 0 END + pg_indexes_size(c.oid)), 0) FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind = 'r'"
            " AND n.nspname NOT IN ('pg_catalog', 'information_schema')"
        )
    finally:
        await conn.close()
    return int(value)


async def redis_bytes(client: aioredis.Redis) -> int:
    """``MEMORY USAGE`` (exact: ``SAMPLES 0``) summed over every key of the client's db."""
    total = 0
    async for key in client.scan_iter(count=1000):
        total += int(await client.execute_command("MEMORY", "USAGE", key, "SAMPLES", "0") or 0)
    return total


LISTER = "bench-lister"
"""The user whose sessions the listing phase makes and lists."""


class AgentStores(System, Listing):
    """agentstores-postgres or agentstores-redis through :class:`agentstores.Stores`."""

    def __init__(self, name: str, server: str, url: str, measure: Any) -> None:
        self.name, self.server, self.url = name, server, url
        self._measure = measure
        self.principal = "bench-user"

    async def open(self) -> None:
        from importlib.metadata import version

        from agentstores.plugins import create_stores

        dist = "agentstores-postgres" if self.server == "postgres" else "agentstores-redis"
        self.version = version(dist)
        self.stores = create_stores(self.url)
        await self.stores.open()
        self.tenant = f"peers-{uuid.uuid4().hex[:8]}"

    async def close(self) -> None:
        await self.stores.close()

    async def new(self) -> Any:
        from agentstores.keys import ConversationKey

        return ConversationKey(self.tenant, uuid.uuid4().hex)

    def _message(self, n: int) -> Any:
        from agentstores.models import Message

        return Message(id=f"m{n}", role=role_of(n), content={"text": text_of(n)})  # type: ignore[arg-type]

    async def build(self, conv: Any, start: int, count: int) -> None:
        done = 0
        while done < count:
            batch = [self._message(start + done + i) for i in range(min(1000, count - done))]
            await self.stores.conversations.append_messages(conv, self.principal, batch)
            done += len(batch)

    async def append(self, conv: Any, n: int) -> None:
        await self.stores.conversations.append_messages(conv, self.principal, [self._message(n)])

    async def first_user(self, conv: Any) -> str:
        rows = await self.stores.conversations.get_transcript(
            conv, self.principal, index=0, speaker="user"
        )
        return str(rows[0].content["text"])  # type: ignore[index]

    async def recent(self, conv: Any, k: int) -> int:
        return len(await self.stores.conversations.recent(conv, self.principal, k))

    async def add_listed(self, n: int) -> None:
        from agentstores.keys import ConversationKey

        key = ConversationKey(self.tenant, f"listed-{n}")
        await self.stores.conversations.append_messages(key, LISTER, [self._message(0)])

    async def list_sessions(self) -> int:
        listed, cursor = 0, None
        while True:
            page = await self.stores.conversations.list_conversations(
                self.tenant, LISTER, limit=1000, cursor=cursor
            )
            listed += len(page.items)
            cursor = page.next_cursor
            if cursor is None:
                return listed

    async def storage_bytes(self) -> int:
        return int(await self._measure())
