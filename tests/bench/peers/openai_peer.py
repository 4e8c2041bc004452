"""The OpenAI Agents SDK's session stores: ``SQLAlchemySession`` (PostgreSQL, asyncpg) and
``RedisSession`` (a list per session, read with ``LRANGE``)."""

from __future__ import annotations

import uuid
from importlib.metadata import version
from typing import Any

from .systems import System, postgres_bytes, redis_bytes, role_of, text_of


def _item(n: int) -> dict[str, Any]:
    return {"role": role_of(n), "content": text_of(n)}


class _OpenAISession(System):
    async def build(self, conv: Any, start: int, count: int) -> None:
        for first in range(start, start + count, 1000):  # add_items takes a batch
            await conv.add_items([_item(n) for n in range(first, min(start + count, first + 1000))])

    async def append(self, conv: Any, n: int) -> None:
        await conv.add_items([_item(n)])

    async def first_user(self, conv: Any) -> str:
        # No query by role or position: the whole history is read, then searched.
        items = await conv.get_items()
        return str(next(i for i in items if i.get("role") == "user")["content"])

    async def recent(self, conv: Any, k: int) -> int:
        return len(await conv.get_items(limit=k))


class SQLAlchemyPeer(_OpenAISession):
    name, server = "OpenAI SQLAlchemySession", "postgres"

    def __init__(self, url: str, admin_url: str) -> None:
        self.url, self.admin_url = url, admin_url

    async def open(self) -> None:
        from sqlalchemy.ext.asyncio import create_async_engine

        self.version = f"openai-agents {version('openai-agents')}"
        self.engine = create_async_engine(
            self.url.replace("postgresql://", "postgresql+asyncpg://")
        )

    async def close(self) -> None:
        await self.engine.dispose()

    async def new(self) -> Any:
        from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession

        return SQLAlchemySession(uuid.uuid4().hex, engine=self.engine, create_tables=True)

    async def storage_bytes(self) -> int:
        return await postgres_bytes(self.admin_url)


class RedisSessionPeer(_OpenAISession):
    name, server = "OpenAI RedisSession", "redis"

    def __init__(self, url: str) -> None:
        self.url = url

    async def open(self) -> None:
        import redis.asyncio as aioredis

        self.version = f"openai-agents {version('openai-agents')}"
        self.client = aioredis.from_url(self.url)

    async def close(self) -> None:
        await self.client.aclose()

    async def new(self) -> Any:
        from agents.extensions.memory.redis_session import RedisSession

        return RedisSession(uuid.uuid4().hex, redis_client=self.client)

    async def storage_bytes(self) -> int:
        return await redis_bytes(self.client)
