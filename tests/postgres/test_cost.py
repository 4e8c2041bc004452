"""Cost at 100,000 messages, checked structurally (never by wall clock).

Two conversations share one table: one of 100,000 messages, one of 10. For each call the
adapter makes, the server runs the adapter's own SQL under EXPLAIN: reads must be index
scans on the index made for them (under generic plans too, which believe every
conversation is average-sized), and every call, appends included (EXPLAIN ANALYZE of the
function call counts the buffers of the statements inside), must touch about as many
buffers on the long transcript as on the short one.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from agentstores.keys import ConversationKey
from agentstores.models import Message
from agentstores.stores import MAX_CONVERSATION_METADATA_BYTES
from agentstores_postgres import conversations as conv_sql
from agentstores_postgres import supervision as sup_sql
from agentstores_postgres.stores import PostgresStores

from .conftest import PgServer

LONG = 100_000
SHORT = 10
BATCH = 1000
ROLES = ("user", "assistant", "tool", "assistant")
P = "owner"
SMALL_CONVERSATIONS = 300
SLACK = 24
"""Extra buffers allowed on the long transcript: one more B-tree level per index probed."""


@dataclass
class Corpus:
    pg: PgServer
    tenant: str
    long: ConversationKey
    short: ConversationKey

    def sql(self, text: str) -> str:
        return text.replace("__S__", f'"{self.pg.installation.schema}"')


def _messages(prefix: str, start: int, count: int) -> list[Message]:
    return [
        Message(
            f"{prefix}{i}",
            ROLES[i % len(ROLES)],  # type: ignore[arg-type]
            {"text": f"message {i}", "pad": "x" * 80},
            compaction=(i == start + count // 2),
        )
        for i in range(start, start + count)
    ]


@pytest.fixture(scope="module")
def corpus(pg: PgServer) -> Iterator[Corpus]:
    """Statistics are made to lie: many small conversations are analyzed, autovacuum is
    paused on the tables, and only then is the long transcript written, so the planner
    believes every conversation is small (the case where generic plans go wrong)."""
    import asyncio

    tenant = f"cost-{pg.installation.schema}"
    c = Corpus(pg, tenant, ConversationKey(tenant, "long"), ConversationKey(tenant, "short"))
    tables = ("keys", "conversations", "messages", "owner_counts")

    async def admin_sql(*statements: str) -> None:
        conn = await asyncpg.connect(pg.admin_url)
        try:
            for statement in statements:
                await conn.execute(c.sql(statement))
        finally:
            await conn.close()

    async def build() -> None:
        async with PostgresStores(pg.url, pool_max_size=4) as stores:
            conv = stores.conversations
            gate = asyncio.Semaphore(4)

            async def small(i: int) -> None:
                async with gate:
                    key = ConversationKey(tenant, f"other-{i}")
                    await conv.append_messages(key, P, _messages("o", 0, SHORT))

            await asyncio.gather(*(small(i) for i in range(SMALL_CONVERSATIONS)))
            await admin_sql(*(f"ANALYZE __S__.{t}" for t in tables))
            await admin_sql(
                *(f"ALTER TABLE __S__.{t} SET (autovacuum_enabled = false)" for t in tables)
            )
            for start in range(0, LONG, BATCH):
                await conv.append_messages(c.long, P, _messages("m", start, BATCH))
            await conv.append_messages(c.short, P, _messages("m", 0, SHORT))
            info = await conv.get_conversation(c.long, P)
            assert info is not None and info.message_count == LONG

    asyncio.run(build())
    try:
        yield c
    finally:
        asyncio.run(
            admin_sql(*(f"ALTER TABLE __S__.{t} RESET (autovacuum_enabled)" for t in tables))
        )


@pytest.fixture
async def admin(corpus: Corpus) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(corpus.pg.admin_url)
    try:
        yield conn
    finally:
        await conn.close()


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def _literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, datetime):
        return f"'{value.isoformat()}'::timestamptz"
    if isinstance(value, timedelta):
        return f"'{value.total_seconds()} seconds'::interval"
    assert isinstance(value, str)
    return "'" + value.replace("'", "''") + "'"


async def _plan(conn: asyncpg.Connection, sql: str, args: tuple[Any, ...], generic: bool) -> Any:
    """EXPLAIN the statement as a prepared statement, with a generic or a custom plan."""
    await conn.execute(f"SET plan_cache_mode = {'force_generic_plan' if generic else 'auto'}")
    await conn.execute(f"PREPARE probe AS {sql}")
    try:
        literals = ", ".join(_literal(a) for a in args)
        raw = await conn.fetchval(f"EXPLAIN (FORMAT JSON) EXECUTE probe ({literals})")
    finally:
        await conn.execute("DEALLOCATE probe")
        await conn.execute("RESET plan_cache_mode")
    return json.loads(raw)[0]["Plan"]


async def _buffers(conn: asyncpg.Connection, sql: str, args: tuple[Any, ...]) -> int:
    """Shared buffers the statement touches, nested statements included (the caller
    warms the session first: a function's first call also reads the catalog)."""
    raw = await conn.fetchval(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}", *args)
    plan = json.loads(raw)[0]["Plan"]
    return int(plan["Shared Hit Blocks"]) + int(plan["Shared Read Blocks"])


def _message_indexes(plan: dict[str, Any]) -> set[str]:
    """Indexes used on the messages table; fails on any scan of it that is not by index."""
    used: set[str] = set()
    for node in _nodes(plan):
        if node.get("Relation Name") != "messages":
            continue
        assert "Index" in node["Node Type"], f"messages read by {node['Node Type']}"
        used.add(node["Index Name"])
    return used


# Results of equal size on both transcripts (the short one holds 3 user messages).
READS = [
    ("index all", lambda: conv_sql._transcript_sql("all", "index"), (5,), {"messages_seq"}),
    ("index -1 all", lambda: conv_sql._transcript_sql("all", "index"), (-1,), {"messages_seq"}),
    ("index user", lambda: conv_sql._transcript_sql("user", "index"), (0,), {"messages_user"}),
    ("index -2 user", lambda: conv_sql._transcript_sql("user", "index"), (-2,), {"messages_user"}),
    (
        "index assistant",
        lambda: conv_sql._transcript_sql("assistant", "index"),
        (3,),
        {"messages_assistant"},
    ),
    ("first page", lambda: conv_sql._transcript_sql("all", "all"), (2,), {"messages_seq"}),
    ("user page", lambda: conv_sql._transcript_sql("user", "all"), (2,), {"messages_user"}),
    ("recent", lambda: conv_sql._RECENT, (2,), {"messages_turn"}),
    ("read_messages", lambda: conv_sql._READ_MESSAGES, (7, 2), {"messages_seq"}),
    ("tail", lambda: conv_sql._TAIL, (2,), {"messages_seq"}),
]


async def _check_read(
    corpus: Corpus,
    admin: asyncpg.Connection,
    name: str,
    sql: Any,
    extra: tuple[Any, ...],
    indexes: set[str],
) -> None:
    text = corpus.sql(sql())
    for generic in (False, True):
        for key in (corpus.long, corpus.short):
            plan = await _plan(admin, text, (key.tenant, key.session_id, P, *extra), generic)
            try:
                used = _message_indexes(plan)
            except AssertionError as exc:
                where = f"{name} on {key.session_id}, generic plan: {generic}"
                raise AssertionError(f"{where}: {exc}\n{json.dumps(plan, indent=1)}") from exc
            assert used == indexes, (name, generic)
    long_args = (corpus.long.tenant, corpus.long.session_id, P, *extra)
    short_args = (corpus.short.tenant, corpus.short.session_id, P, *extra)
    await admin.fetch(text, *long_args)  # warm the session's catalog caches
    long = await _buffers(admin, text, long_args)
    short = await _buffers(admin, text, short_args)
    assert long <= short * 1.5 + SLACK, f"{name}: {long} buffers at {LONG} vs {short} at {SHORT}"


@pytest.mark.parametrize(("name", "sql", "extra", "indexes"), READS, ids=[r[0] for r in READS])
async def test_reads_use_their_index_and_cost_the_same_at_100k(
    corpus: Corpus,
    admin: asyncpg.Connection,
    name: str,
    sql: Any,
    extra: tuple[Any, ...],
    indexes: set[str],
) -> None:
    await _check_read(corpus, admin, name, sql, extra, indexes)


async def test_time_range_reads_only_the_range(corpus: Corpus, admin: asyncpg.Connection) -> None:
    text = corpus.sql(conv_sql._transcript_sql("user", "range"))
    stamp = await admin.fetchval(
        corpus.sql(
            "SELECT created_at FROM __S__.messages WHERE tenant = $1 AND session_id = $2 "
            "AND seq = $3"
        ),
        corpus.long.tenant,
        corpus.long.session_id,
        LONG - 1500,
    )
    args = (corpus.long.tenant, corpus.long.session_id, P, stamp, stamp, 5)
    for generic in (False, True):
        assert _message_indexes(await _plan(admin, text, args, generic)) == {"messages_time"}
    # One batch shares one stamp: the range holds 1000 rows; reading 5 of them stays small.
    assert await _buffers(admin, text, args) <= 40


async def _check_history(corpus: Corpus, admin: asyncpg.Connection) -> int:
    """History's plan (by index, generic or not) and rows; the number of rows."""
    sql = corpus.sql(conv_sql._HISTORY)
    for generic in (False, True):
        plan = await _plan(admin, sql, (corpus.long.tenant, corpus.long.session_id, P), generic)
        try:
            used = _message_indexes(plan)
        except AssertionError as exc:
            raise AssertionError(f"history, generic plan {generic}: {exc}\n{plan}") from exc
        assert used == {"messages_seq", "messages_compaction"}
    rows = await admin.fetch(sql, corpus.long.tenant, corpus.long.session_id, P)
    count = await admin.fetchval(
        corpus.sql(
            "SELECT message_count FROM __S__.conversations WHERE tenant = $1 AND session_id = $2"
        ),
        corpus.long.tenant,
        corpus.long.session_id,
    )
    assert [r["seq"] for r in rows] == list(range(rows[0]["seq"], count))
    assert rows[0]["compaction"] and not any(r["compaction"] for r in rows[1:])
    return len(rows)


async def test_history_starts_at_the_compaction(corpus: Corpus, admin: asyncpg.Connection) -> None:
    assert await _check_history(corpus, admin) == BATCH // 2


async def test_append_costs_the_same_at_100k(corpus: Corpus, admin: asyncpg.Connection) -> None:
    sql = corpus.sql(conv_sql._APPEND)
    tail_sql = corpus.sql(
        "SELECT tail_message_id FROM __S__.conversations WHERE tenant = $1 AND session_id = $2"
    )
    for round_ in range(4):
        costs = []
        for key in (corpus.long, corpus.short):
            tail = await admin.fetchval(tail_sql, key.tenant, key.session_id)
            args = (
                key.tenant,
                key.session_id,
                P,
                [f"x{round_}", f"y{round_}"],
                ["user", "assistant"],
                [b'"q"', b'"a"'],
                [b"{}", b"{}"],
                [False, False],
                True,
                "complete",
                True,
                tail,
                None,
                None,
                None,
                uuid.uuid4(),
                timedelta(days=30),
                '{"agent_identifier": "\\"a\\""}',
                MAX_CONVERSATION_METADATA_BYTES,
            )
            costs.append(await _buffers(admin, sql, args))
        long, short = costs
        if round_ == 0:
            continue  # warm-up: this session's first call compiles and plans the function
        assert long <= short * 1.5 + SLACK, f"append: {long} buffers at {LONG} vs {short}"


async def test_supervision_listing_and_sweeper_plans(
    corpus: Corpus, admin: asyncpg.Connection
) -> None:
    def used(plan: dict[str, Any], table: str, bitmap: bool = False) -> list[str]:
        """Indexes reading ``table``; a bitmap scan is accepted only where asked (a
        sweep batch may be gathered unordered), never for pages that must come sorted."""
        names = []
        for n in _nodes(plan):
            if n.get("Relation Name") != table:
                continue
            if bitmap and n["Node Type"] == "Bitmap Heap Scan":
                names += [c["Index Name"] for c in _nodes(n) if "Index Name" in c]
                continue
            assert "Index" in n["Node Type"], n["Node Type"]
            names.append(n["Index Name"])
        return names

    # The corpus holds few conversations, so a sequential scan of them is the planner's
    # honest choice; what must hold is that no other index (or a sort) serves these.
    await admin.execute("SET enable_seqscan = off")
    for generic in (False, True):
        args = (corpus.long.tenant, "long", P)
        plan = await _plan(admin, corpus.sql(sup_sql._READ), args, generic)
        assert used(plan, "keys") == ["keys_pkey"]
        assert used(plan, "supervision") == ["supervision_pkey"]

        plan = await _plan(admin, corpus.sql(conv_sql._LIST_FIRST), (corpus.tenant, P, 11), generic)
        assert used(plan, "conversations") == ["conversations_listing"]
        assert not any(n["Node Type"] == "Sort" for n in _nodes(plan))
        stamp = datetime.now(UTC)
        args2 = (corpus.tenant, P, 11, stamp, "other-5")
        plan = await _plan(admin, corpus.sql(conv_sql._LIST_AFTER), args2, generic)
        assert used(plan, "conversations") == ["conversations_listing"]
        assert not any(n["Node Type"] == "Sort" for n in _nodes(plan))

        plan = await _plan(admin, corpus.sql(conv_sql._SWEEP_EXPIRED), (10,), generic)
        assert used(plan, "conversations", bitmap=True) == ["conversations_expiry"]
        idle = (timedelta(days=1),)
        plan = await _plan(admin, corpus.sql(conv_sql._SWEEP_IDLE), (*idle, 10), generic)
        assert used(plan, "conversations", bitmap=True) == ["conversations_idle"]
        plan = await _plan(admin, corpus.sql(conv_sql._SWEEP_OVERCAP), (5, 10), generic)
        assert used(plan, "owner_counts", bitmap=True) == ["owner_counts_size"]
        assert used(plan, "conversations") == ["conversations_listing"]


async def test_reads_stay_put_once_statistics_are_true(
    corpus: Corpus, admin: asyncpg.Connection
) -> None:
    """Last in the module: ANALYZE (what autovacuum would do, at a moment no test picks),
    then every read again.
    Every row is sampled, so the statistics are the true ones on every run (the default
    sample of 30,000 rows varies from run to run, and a generic plan on a sampled
    estimate of the conversations' count flipped to a parallel scan now and then)."""
    await admin.execute("SET default_statistics_target = 10000")
    try:
        for table in ("keys", "conversations", "messages", "owner_counts"):
            await admin.execute(corpus.sql(f"ANALYZE __S__.{table}"))
    finally:
        await admin.execute("RESET default_statistics_target")
    for name, sql, extra, indexes in READS:
        await _check_read(corpus, admin, name, sql, extra, indexes)
    await _check_history(corpus, admin)
