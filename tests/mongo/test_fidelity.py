"""What the adapter relies on the server for, and what nx-27017 gets wrong.

``TestRelied`` runs on every server (nx-27017 and, when set, ``MONGODB_URI``): each test
is one behaviour an adapter module depends on, so a server (or server upgrade) that
changes one fails here by name rather than somewhere deep in the contract suite.
``TestNxWrong`` pins each nx-27017 0.8.1 deviation the adapter works around; when an
upgrade fixes one, its test fails and says which workaround may go.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pymongo import AsyncMongoClient, IndexModel, UpdateOne, WriteConcern
from pymongo.errors import BulkWriteError, DuplicateKeyError, WriteError

from tests.servers.mongo import NxServer

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def db(base_url: str) -> AsyncIterator[Any]:
    client: AsyncMongoClient[Any] = AsyncMongoClient(base_url, tz_aware=True)
    name = f"fidelity_{os.urandom(5).hex()}"
    try:
        yield client.get_database(name, write_concern=WriteConcern(w="majority"))
    finally:
        await client.drop_database(name)
        await client.close()


@pytest.fixture
async def nx_db(nx_server: NxServer) -> AsyncIterator[Any]:
    client: AsyncMongoClient[Any] = AsyncMongoClient(nx_server.url, tz_aware=True)
    name = f"fidelity_{os.urandom(5).hex()}"
    try:
        yield client[name]
    finally:
        await client.drop_database(name)
        await client.close()


async def _clock(db: Any) -> datetime:
    reply = await db.command("hello")
    return reply["localTime"].replace(tzinfo=UTC)


class TestRelied:
    """Each behaviour an adapter module depends on."""

    async def test_insert_one_duplicate_key_means_exists(self, db: Any) -> None:
        # header.ensure_header: create-if-absent
        await db.k.insert_one({"_id": "a", "rev": 0})
        with pytest.raises(DuplicateKeyError):
            await db.k.insert_one({"_id": "a", "rev": 0})

    async def test_filtered_update_one_is_judged_by_matched_count_and_never_inserts(
        self, db: Any
    ) -> None:
        # header.commit: the CAS
        await db.k.insert_one({"_id": "a", "rev": 3})
        missed = await db.k.update_one({"_id": "a", "rev": 2}, {"$set": {"x": 1}})
        assert missed.matched_count == 0
        absent = await db.k.update_one({"_id": "b", "rev": 0}, {"$set": {"x": 1}})
        assert absent.matched_count == 0
        assert await db.k.count_documents({}) == 1
        hit = await db.k.update_one({"_id": "a", "rev": 3}, {"$set": {"rev": 4}})
        assert hit.matched_count == 1
        assert (await db.k.find_one({"_id": "a"}))["rev"] == 4

    async def test_one_winner_among_64_racing_cas(self, db: Any) -> None:
        await db.k.insert_one({"_id": "a", "rev": 0})

        async def attempt(i: int) -> int:
            r = await db.k.update_one({"_id": "a", "rev": 0}, {"$set": {"rev": 1, "w": i}})
            return int(r.matched_count)

        assert sum(await asyncio.gather(*(attempt(i) for i in range(64)))) == 1

    async def test_commit_filter_misses_when_the_swap_token_moved_alone(self, db: Any) -> None:
        # header.commit: an in-place swap changes sw (and the row) but not rev; a commit
        # judged before it filters on {rev, sw} and must miss
        row = "running|1||turn|with|bars"
        await db.k.insert_one({"_id": "a", "rev": 5, "sw": "1:p", "sup": row})
        swapped = await db.k.update_one(
            {"_id": "a", "sw": "1:p"},
            {"$set": {"sup": "running|2|n1|turn", "sw": "2:p"}, "$currentDate": {"hb": True}},
        )
        assert swapped.matched_count == 1
        stale = await db.k.update_one({"_id": "a", "rev": 5, "sw": "1:p"}, {"$set": {"x": 1}})
        assert stale.matched_count == 0
        # supervision._delete: the exact row string it judged, '|' and all
        assert (
            await db.k.update_one({"_id": "a", "sup": row}, {"$set": {"x": 1}})
        ).matched_count == 0
        doc = await db.k.find_one({"_id": "a"})
        assert doc["rev"] == 5 and "x" not in doc and doc["sup"] == "running|2|n1|turn"
        fresh = {"_id": "a", "rev": 5, "sw": "2:p", "sup": "running|2|n1|turn"}
        assert (await db.k.update_one(fresh, {"$set": {"x": 1}})).matched_count == 1

    async def test_set_inc_and_current_date_in_one_update(self, db: Any) -> None:
        # supervision: the heartbeat is $currentDate, read back and compared in Python
        await db.k.insert_one({"_id": "a", "rev": 0})
        before = await _clock(db)
        await db.k.update_one(
            {"_id": "a", "rev": 0},
            {
                "$set": {"sup": {"s": "running", "e": 1}},
                "$inc": {"rev": 1},
                "$currentDate": {"hb": True},
            },
        )
        after = await _clock(db)
        doc = await db.k.find_one({"_id": "a"})
        assert doc["rev"] == 1 and doc["sup"] == {"s": "running", "e": 1}
        assert isinstance(doc["hb"], datetime)
        assert before - timedelta(seconds=1) <= doc["hb"] <= after + timedelta(seconds=1)

    async def test_unordered_bulk_update_counts_every_match(self, db: Any) -> None:
        # supervision: a batch of heartbeats is one bulk, all landed iff all matched
        await db.k.insert_many([{"_id": n, "sw": "1:p", "rev": 0} for n in "abc"])
        beat = {"$set": {"sw": "1:p"}, "$inc": {"rev": 1}, "$currentDate": {"hb": True}}
        ops = [UpdateOne({"_id": n, "sw": "1:p"}, beat) for n in "abc"]
        assert (await db.k.bulk_write(ops, ordered=False)).matched_count == 3
        await db.k.update_one({"_id": "b"}, {"$set": {"sw": None}})
        assert (await db.k.bulk_write(ops, ordered=False)).matched_count == 2
        assert [d["rev"] async for d in db.k.find({}).sort("_id", 1)] == [2, 1, 2]
        # a missing field matches None, as a field set to None does
        await db.k.update_one({"_id": "c"}, {"$unset": {"sw": ""}})
        assert {d["_id"] async for d in db.k.find({"sw": None})} == {"b", "c"}

    async def test_hello_and_server_status_give_the_server_clock(self, db: Any) -> None:
        hello = await _clock(db)
        status = (await db.command("serverStatus"))["localTime"].replace(tzinfo=UTC)
        assert abs(status - hello) < timedelta(seconds=5)
        assert abs(hello - datetime.now(UTC)) < timedelta(minutes=5)

    async def test_nested_documents_none_and_whole_arrays_round_trip(self, db: Any) -> None:
        # header fields c, sup, rc, sh and redo are set whole
        await db.k.insert_one({"_id": "a"})
        value = {"n": 2, "tl": "m1", "ti": None, "la": 1_700_000_000_000_000}
        redo = [["token", "g", "t", "w"], ["purge", "g"]]
        await db.k.update_one(
            {"_id": "a"}, {"$set": {"c": value, "sh": ["u2", "u3"], "redo": redo}}
        )
        doc = await db.k.find_one({"_id": "a"})
        assert doc["c"] == value and doc["sh"] == ["u2", "u3"] and doc["redo"] == redo
        await db.k.update_one({"_id": "a"}, {"$set": {"c": None, "sh": []}})
        doc = await db.k.find_one({"_id": "a"})
        assert doc["c"] is None and doc["sh"] == []

    async def test_projection_leaves_a_field_on_the_server(self, db: Any) -> None:
        # recording: the body rb is excluded from ordinary header reads
        await db.k.insert_one({"_id": "a", "rb": "x" * 1000, "rev": 1})
        assert await db.k.find_one({"_id": "a"}, {"rb": 0}) == {"_id": "a", "rev": 1}

    async def test_unique_compound_index_and_ordered_insert_many(self, db: Any) -> None:
        # conversations: unique (c, s); an ordered insert_many stops at the duplicate
        await db.m.create_indexes([IndexModel([("c", 1), ("s", 1)], unique=True)])
        await db.m.insert_one({"c": "g", "s": 1, "w": "other"})
        with pytest.raises(BulkWriteError) as caught:
            await db.m.insert_many(
                [{"c": "g", "s": 0}, {"c": "g", "s": 1}, {"c": "g", "s": 2}], ordered=True
            )
        assert caught.value.details["writeErrors"][0]["code"] == 11000
        assert sorted([d["s"] async for d in db.m.find({"c": "g"})]) == [0, 1]
        await db.m.insert_one({"c": "h", "s": 1})  # another generation: no clash

    async def test_integer_ranges_sorts_and_keyset_or(self, db: Any) -> None:
        # listing and sweeping: u, cx and at are integers (microseconds)
        for i, sid in enumerate(["a", "b", "c", "d"]):
            await db.k.insert_one(
                {"_id": sid, "t": "T", "lo": "p", "lv": True, "u": 10 * (i // 2), "s": sid}
            )
        await db.k.insert_one({"_id": "z", "t": "T", "lo": None, "lv": False, "u": 99, "s": "z"})
        order = db.k.find({"t": "T", "lo": "p", "lv": True}).sort([("u", -1), ("s", -1)])
        assert [d["_id"] async for d in order] == ["d", "c", "b", "a"]
        after = {"$or": [{"u": {"$lt": 10}}, {"u": 10, "s": {"$lt": "d"}}]}
        page = db.k.find({"t": "T", "lo": "p", "lv": True, **after}).sort([("u", -1), ("s", -1)])
        assert [d["_id"] async for d in page.limit(2)] == ["c", "b"]
        assert [d["_id"] async for d in db.k.find({"lv": True, "u": {"$gte": 5, "$lte": 10}})] in (
            ["c", "d"],
            ["d", "c"],
        )
        assert await db.k.count_documents({"lv": True, "_id": {"$ne": "a"}, "u": {"$gt": 0}}) == 2

    async def test_in_sort_desc_limit_and_guarded_deletes(self, db: Any) -> None:
        for s in range(5):
            await db.m.insert_one({"c": "g", "s": s, "r": "user" if s % 2 else "tool", "b": s})
        recent = db.m.find({"c": "g", "s": {"$lt": 4}, "r": {"$in": ["user", "assistant"]}})
        assert [d["s"] async for d in recent.sort("s", -1).limit(1)] == [3]
        guarded = await db.m.delete_one({"c": "g", "s": 4, "b": 3})
        assert guarded.deleted_count == 0
        cut = await db.m.delete_many({"c": "g", "s": {"$gte": 2}, "b": {"$lt": 4}})
        assert cut.deleted_count == 2
        assert sorted([d["s"] async for d in db.m.find({"c": "g"})]) == [0, 1, 4]

    async def test_binary_of_8_mib_round_trips(self, db: Any) -> None:
        # state: versions hold the blob as BSON binary
        blob = os.urandom(8 * 1024 * 1024)
        await db.state.insert_one({"g": "g", "w": "w", "d": blob})
        assert bytes((await db.state.find_one({"g": "g", "w": "w"}))["d"]) == blob

    async def test_indexes_are_listed_with_their_fields_and_uniqueness(self, db: Any) -> None:
        # schema.missing_indexes recognises indexes by fields and uniqueness
        await db.m.create_indexes([IndexModel([("c", 1), ("s", 1)], unique=True, name="as_seq")])
        listed = [ix async for ix in await db.m.list_indexes()]
        found = {(tuple(ix["key"]), bool(ix.get("unique"))) for ix in listed}
        assert (("c", "s"), True) in found

    async def test_majority_write_concern_is_accepted(self, db: Any) -> None:
        result = await db.k.insert_one({"_id": "a"})
        assert result.acknowledged


class TestNxWrong:
    """nx-27017 0.8.1's deviations from MongoDB, each with the workaround the adapter uses."""

    async def test_set_of_a_top_level_datetime_stores_a_string(self, nx_db: Any) -> None:
        # Workaround: datetimes are set inside sub-documents or kept as integers.
        now = datetime.now(UTC)
        await nx_db.k.insert_one({"_id": "a"})
        await nx_db.k.update_one({"_id": "a"}, {"$set": {"top": now, "nest": {"t": now}}})
        doc = await nx_db.k.find_one({"_id": "a"})
        assert isinstance(doc["top"], str)
        assert isinstance(doc["nest"]["t"], datetime)

    async def test_current_date_stamps_cannot_be_compared_in_queries(self, nx_db: Any) -> None:
        # Workaround: queried times (updated_at, expiry) are integers of the server clock;
        # $currentDate stamps only what is read back (heartbeat, erased_at).
        await nx_db.k.insert_one({"_id": "a"})
        await nx_db.k.update_one({"_id": "a"}, {"$currentDate": {"u": True}})
        stamp = (await nx_db.k.find_one({"_id": "a"}))["u"]
        assert isinstance(stamp, datetime)
        assert await nx_db.k.count_documents({"u": {"$gte": stamp - timedelta(days=1)}}) == 0

    async def test_millisecond_datetime_ranges_match_wrongly(self, nx_db: Any) -> None:
        # Workaround: messages' created_at is stored in microseconds (an integer).
        base = datetime(2026, 1, 1, 12, 0, 0, 5000, tzinfo=UTC)
        for i in range(4):
            await nx_db.t.insert_one({"_id": i, "at": base + timedelta(milliseconds=i)})
        window = {
            "$gte": base + timedelta(milliseconds=1),
            "$lte": base + timedelta(milliseconds=2),
        }
        found = [d["_id"] async for d in nx_db.t.find({"at": window})]
        assert found != [1, 2]

    async def test_replace_one_upsert_ignores_the_filters_id(self, nx_db: Any) -> None:
        # Workaround: OAuth records replace_one without upsert, then insert_one.
        await nx_db.o.replace_one({"_id": "x"}, {"a": 1}, upsert=True)
        await nx_db.o.replace_one({"_id": "x"}, {"a": 2}, upsert=True)
        assert await nx_db.o.count_documents({}) == 2
        assert await nx_db.o.find_one({"_id": "x"}) is None

    async def test_update_pipelines_are_refused(self, nx_db: Any) -> None:
        # Workaround: no pipeline updates ($$NOW); the clock comes from $currentDate/hello.
        await nx_db.k.insert_one({"_id": "a"})
        with pytest.raises(WriteError):
            await nx_db.k.update_one({"_id": "a"}, [{"$set": {"t": "$$NOW"}}])

    async def test_index_names_and_directions_are_not_kept(self, nx_db: Any) -> None:
        # Workaround: the schema check compares fields and uniqueness only.
        await nx_db.m.create_indexes([IndexModel([("a", 1), ("b", -1)], name="as_ab")])
        listed = [ix async for ix in await nx_db.m.list_indexes()]
        named = [ix for ix in listed if ix["name"] == "as_ab"]
        assert not named
        assert any(dict(ix["key"]) == {"a": 1, "b": 1} for ix in listed)

    async def test_an_implicit_equality_with_an_array_is_refused(self, nx_db: Any) -> None:
        # Not the adapter's: MongoDBSaver's list(filter=...) sends such filters, which is
        # why 7 of the 58 LangGraph conformance tests fail on nx-27017 (test_mongo_langgraph).
        from pymongo.errors import OperationFailure

        await nx_db.c.insert_one({"_id": 1, "m": {"step": ["json", "1"]}})
        with pytest.raises(OperationFailure, match="type 'list' is not supported"):
            await nx_db.c.find_one({"m.step": ["json", "1"]})
        assert await nx_db.c.find_one({"m.step": {"$eq": ["json", "1"]}}) is not None

    async def test_add_to_set_on_a_missing_field_does_nothing(self, nx_db: Any) -> None:
        # Workaround: the share list is always set whole.
        await nx_db.k.insert_one({"_id": "a"})
        await nx_db.k.update_one({"_id": "a"}, {"$addToSet": {"sh": "u2"}})
        assert "sh" not in await nx_db.k.find_one({"_id": "a"})


async def _plan(collection: Any, where: dict[str, Any]) -> str:
    explained = await collection.find(where).explain()
    return " / ".join(step["detail"] for step in explained["queryPlanner"]["winningPlan"])


class TestNxPlans:
    """Which queries nx-27017 serves from an index (its explain shows SQLite's plan). The
    message reads are laid out on what it does serve, so their cost does not grow with
    the collection: positions by ``_id`` (equality and ``$in``), the speaker view's rank
    and the message id by single-field equality."""

    async def test_id_equality_and_in_and_single_field_equality_use_an_index(
        self, nx_db: Any
    ) -> None:
        await nx_db.m.create_indexes([IndexModel([("q", 1)]), IndexModel([("c", 1), ("s", 1)])])
        await nx_db.m.insert_many(
            [{"_id": f"g/{i:016x}", "q": f"g/u/{i}", "c": "g", "s": i} for i in range(50)]
        )
        assert "USING INDEX" in await _plan(nx_db.m, {"_id": "g/0000000000000001"})
        ids = {"$in": ["g/0000000000000001", "g/0000000000000002"]}
        assert "USING INDEX" in await _plan(nx_db.m, {"_id": ids})
        assert "USING INDEX" in await _plan(nx_db.m, {"q": "g/u/3"})

    async def test_compound_equality_and_in_on_other_fields_scan_the_table(
        self, nx_db: Any
    ) -> None:
        # Why messages are not read by {c, s} or {c, r, rank}, nor ids checked with $in.
        await nx_db.m.create_indexes([IndexModel([("c", 1), ("s", 1)]), IndexModel([("ci", 1)])])
        await nx_db.m.insert_many([{"c": "g", "s": i, "ci": f"g/{i}"} for i in range(50)])
        assert (await _plan(nx_db.m, {"c": "g", "s": 3})).startswith("SCAN m")
        assert (await _plan(nx_db.m, {"c": "g"})).startswith("SCAN m")  # erasure's purge
        assert (await _plan(nx_db.m, {"ci": {"$in": ["g/1", "g/2"]}})).startswith("SCAN m")
