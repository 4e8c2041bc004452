"""Run inside a clean venv holding only built wheels (no pytest, nothing from the repo).

python smoke.py open URL MODULE          open URL, append, read back, erase; print where
                                         MODULE was imported from (JSON)
python smoke.py drop-schema URL SCHEMA   PostgreSQL: drop the schema a run installed
python smoke.py drop-prefix URL PREFIX   Redis: delete the keys a run wrote
"""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
import uuid


async def open_and_use(url: str) -> list[str]:
    """Write a message through the installed backend and read it back; then erase."""
    from agentstores import ConversationKey, Message, open_stores

    key = ConversationKey("wheels", f"s-{uuid.uuid4().hex}")
    async with open_stores(url) as stores:
        conversations = stores.conversations
        await conversations.append_messages(key, "user-1", [Message("m1", "user", "hi")])
        got = [m.content for m in await conversations.recent(key, "user-1", 5)]
        if not await conversations.delete(key, "user-1"):
            raise SystemExit(f"{url}: delete found nothing to erase")
    return got


async def drop_schema(url: str, schema: str) -> None:
    """Remove what ``agentstores schema install`` created for this run."""
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


async def drop_prefix(url: str, prefix: str) -> None:
    """Delete every key under this run's key prefix."""
    import redis.asyncio

    client = redis.asyncio.from_url(url)
    try:
        keys = [key async for key in client.scan_iter(match=f"{prefix}:*")]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


def main(argv: list[str]) -> int:
    """Dispatch one of the commands in the module docstring."""
    command, url, arg = argv
    if command == "open":
        contents = asyncio.run(open_and_use(url))
        module = importlib.import_module(arg)
        print(json.dumps({"contents": contents, "module_file": module.__file__}))
    elif command == "drop-schema":
        asyncio.run(drop_schema(url, arg))
    elif command == "drop-prefix":
        asyncio.run(drop_prefix(url, arg))
    else:
        raise SystemExit(f"unknown command {command!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
