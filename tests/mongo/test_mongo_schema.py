"""Index ownership: ``agentstores schema install mongodb://...`` creates the indexes, the
adapter never does, and it refuses to open, naming each missing index, without them.
Also: the bundle accepts the application's own ``AsyncMongoClient`` and leaves it open."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import timedelta

import pytest
from pymongo import AsyncMongoClient

from agentstores import open_stores
from agentstores.cli import main as cli_main
from agentstores.errors import BackendUnavailableError, UsageError
from agentstores.keys import ConversationKey
from agentstores.models import Message
from agentstores_mongo.schema import INDEXES
from agentstores_mongo.stores import MongoStores, parse_url
from tests.servers.mongo import Installation
from tests.tombstone_ttls import REFUSED, erase_then_write_late


@pytest.fixture
def bare(base_url: str) -> Iterator[Installation]:
    """A fresh prefix with nothing installed (dropped at the end)."""
    inst = Installation(base_url)
    yield inst
    inst.drop()


async def _works(url: str) -> None:
    async with open_stores(url) as stores:
        key = ConversationKey("t", "s")
        await stores.conversations.append_messages(key, "p", [Message("m", "user", "hi")])
        assert [m.id for m in await stores.conversations.read_messages(key, "p")] == ["m"]


async def test_open_refuses_without_indexes_naming_each(bare: Installation) -> None:
    with pytest.raises(BackendUnavailableError) as caught:
        await _works(bare.url)
    text = str(caught.value)
    assert "agentstores schema install" in text
    for collection, wanted in INDEXES.items():
        for name, _, _ in wanted:
            assert f"{bare.prefix}{collection}.{name}" in text


async def test_install_through_the_cli_then_open_then_install_again(bare: Installation) -> None:
    code = await asyncio.to_thread(cli_main, ["schema", "install", bare.url])
    assert code == 0
    await _works(bare.url)
    assert await asyncio.to_thread(cli_main, ["schema", "install", bare.url]) == 0


async def test_one_missing_index_is_named(bare: Installation) -> None:
    await asyncio.to_thread(bare.install)
    stores = MongoStores(bare.url, check_indexes=False)
    async with stores:
        listed = [ix async for ix in await stores.ctx.messages.list_indexes()]
        seq = next(ix for ix in listed if dict(ix["key"]) == {"c": 1, "s": 1})
        await stores.ctx.messages.drop_index(seq["name"])
    with pytest.raises(BackendUnavailableError) as caught:
        await _works(bare.url)
    assert f"{bare.prefix}messages.as_seq" in str(caught.value)
    assert f"{bare.prefix}keys.as_list" not in str(caught.value)


async def test_the_adapter_itself_creates_no_index(bare: Installation) -> None:
    stores = MongoStores(bare.url, check_indexes=False)
    async with stores:
        key = ConversationKey("t", "s")
        await stores.conversations.append_messages(key, "p", [Message("m", "user", "hi")])
        for collection in (stores.ctx.keys, stores.ctx.messages):
            names = [ix["name"] async for ix in await collection.list_indexes()]
            assert names == ["_id_"]


async def test_runtime_role_is_refused(bare: Installation) -> None:
    from agentstores_mongo.schema import install

    with pytest.raises(UsageError):
        await install(bare.url, runtime_role="app")


async def test_an_application_client_is_used_and_left_open(installed: Installation) -> None:
    client: AsyncMongoClient[dict[str, object]] = AsyncMongoClient(installed.base_url)
    try:
        stores = MongoStores(client, collection_prefix=installed.prefix)
        async with stores:
            key = ConversationKey("t", "own-client")
            await stores.conversations.append_messages(key, "p", [Message("m", "user", "hi")])
            info = await stores.conversations.get_conversation(key, "p")
            assert info is not None and info.message_count == 1
            assert info.updated_at.tzinfo is not None
        assert await client.admin.command("ping")  # still open
    finally:
        await client.close()


@pytest.mark.parametrize(
    ("query", "options"),
    REFUSED,
)
def test_a_bad_tombstone_ttl_is_refused_by_name_when_the_bundle_is_made(
    query: str, options: dict[str, object]
) -> None:
    """Before, no upper bound, and ``True`` was one second."""
    with pytest.raises(UsageError, match="tombstone_ttl") as refused:
        MongoStores(f"mongodb://127.0.0.1:1/app{query}", **options)
    assert refused.value.context["option"] == "tombstone_ttl"


async def test_a_bundle_on_an_application_client_refuses_a_bad_tombstone_ttl_too() -> None:
    client: AsyncMongoClient[dict[str, object]] = AsyncMongoClient(
        "mongodb://127.0.0.1:1", connect=False
    )
    try:
        with pytest.raises(UsageError, match="tombstone_ttl"):
            MongoStores(client, tombstone_ttl=timedelta(days=36_526))
    finally:
        await client.close()


@pytest.mark.parametrize(
    ("query", "options", "ttl"),
    [
        pytest.param("&tombstone_ttl=3155760000", {}, timedelta(days=36_525), id="url-100y"),
        pytest.param("", {"tombstone_ttl": timedelta(seconds=1)}, timedelta(seconds=1), id="1s"),
    ],
)
async def test_a_tombstone_ttl_up_to_100_years_is_kept(
    installed: Installation, query: str, options: dict[str, object], ttl: timedelta
) -> None:
    async with MongoStores(installed.url + query, **options) as stores:
        assert stores.ctx.tombstone_ttl == ttl
        await erase_then_write_late(stores, ttl)


def test_urls_and_options_are_checked() -> None:
    with pytest.raises(UsageError):
        MongoStores("redis://localhost")
    with pytest.raises(UsageError):
        MongoStores("mongodb://localhost", no_such_option=1)
    with pytest.raises(UsageError):
        MongoStores("mongodb://localhost/?tombstone_ttl=-1")
    driver, database, ours = parse_url(
        "mongodb+srv://user:pw@cluster.example.net/app?collection_prefix=x_&retryWrites=true", {}
    )
    assert driver == "mongodb+srv://user:pw@cluster.example.net/?retryWrites=true"
    assert database == "app" and ours == {"collection_prefix": "x_"}
    stores = MongoStores("mongodb://127.0.0.1:1/app?collection_prefix=x_&write_concern=1")
    assert stores.ctx.db.name == "app" and stores.ctx.prefix == "x_"
    assert stores.ctx.db.write_concern.document["w"] == 1
