"""langgraph-checkpoint-postgres's own saver in a private schema on the shared server
(created here, dropped at exit), for the fork test and the benchmark baseline."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from urllib.parse import quote

import psycopg
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver


@contextlib.asynccontextmanager
async def postgres_saver(admin_url: str) -> AsyncIterator[AsyncPostgresSaver]:
    schema = f"aslg_lgpg_{uuid.uuid4().hex[:10]}"
    async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as conn:
        await conn.execute(f'CREATE SCHEMA "{schema}"')
    sep = "&" if "?" in admin_url else "?"
    url = f"{admin_url}{sep}options={quote(f'-csearch_path={schema}')}"
    try:
        async with AsyncPostgresSaver.from_conn_string(url) as saver:
            await saver.setup()
            yield saver
    finally:
        async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as conn:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
