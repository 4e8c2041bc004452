"""The S3 server itself SIGKILLed mid-call and started again from its journal (moto keeps
nothing in memory across a restart; ``tests/servers/moto.py``'s journal replays every
acknowledged write, so the restarted server holds what a durable store would).

A call cut by the crash raises a typed error (``UnknownOutcomeError`` when the write may
have landed, ``BackendUnavailableError`` when the server cannot be reached), never a
success; after the restart nothing is torn: each key holds its old value or its new one,
whole, and the same call sent again completes exactly once."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ConnectionClosedError

from agentstores.errors import BackendUnavailableError, UnknownOutcomeError
from agentstores.keys import ConversationKey
from agentstores.models import Message
from agentstores_s3 import S3Stores
from tests.servers.moto import MotoServer

from .conftest import BUCKET, client_for, with_prefix

FAST_FAIL = "&max_attempts=2&connect_timeout=1&read_timeout=5&reconnect_window=0"
"""A cut call gives up after one resend instead of botocore's five attempts."""
KEY = ConversationKey("restart", "s")
BIG = 9 * 1024 * 1024
"""Characters of a state above 8 MiB encoded, sent as one PUT."""


@pytest.fixture
def durable(tmp_path: Path) -> Iterator[MotoServer]:
    with MotoServer(journal=str(tmp_path / "journal")) as server:
        server.create_bucket(BUCKET)
        yield server


class KillOnHeader:
    """A boto3 client that crashes the server around the first ``put_object`` of a key
    header once armed: ``before`` (the PUT is never sent) or ``after`` (the PUT landed
    and was journaled; its reply is lost)."""

    def __init__(self, real: Any, server: MotoServer, when: str) -> None:
        self.real, self.server, self.when = real, server, when
        self.armed = False
        self.fired = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def put_object(self, **kwargs: Any) -> Any:
        if not (self.armed and kwargs["Key"].endswith("/h")):
            return self.real.put_object(**kwargs)
        self.armed = False
        self.fired += 1
        if self.when == "before":
            self.server.kill()
            return self.real.put_object(**kwargs)
        self.real.put_object(**kwargs)
        self.server.kill()
        raise ConnectionClosedError(endpoint_url=self.server.endpoint)


async def _append(stores: S3Stores, ids: list[str]) -> None:
    await stores.conversations.append_messages(
        KEY, "p", [Message(i, "user", {"n": i}) for i in ids]
    )


async def _ids(stores: S3Stores) -> list[str]:
    return [m.id for m in await stores.conversations.get_transcript(KEY, "p")]


@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize("call", ["append", "state"])
def test_a_call_cut_by_a_server_crash_is_typed_and_nothing_is_torn(
    durable: MotoServer, when: str, call: str
) -> None:
    url = with_prefix(durable.url(BUCKET)) + FAST_FAIL
    real = client_for(url)
    client = KillOnHeader(real, durable, when)
    old_blob, new_blob = {"b": "o" * BIG}, {"b": "n" * BIG}

    async def write(stores: S3Stores) -> None:
        if call == "append":
            await _append(stores, [f"new{i}" for i in range(40)])
        else:
            await stores.state.save(KEY, "p", new_blob)

    async def main() -> None:
        async with S3Stores(url, client=client) as stores:
            await _append(stores, [f"old{i}" for i in range(40)])
            await stores.state.save(KEY, "p", old_blob)
            client.armed = True
            expected = (
                UnknownOutcomeError
                if when == "after"
                else (
                    UnknownOutcomeError,
                    BackendUnavailableError,
                )
            )
            with pytest.raises(expected):
                await write(stores)
            assert client.fired == 1
            await asyncio.to_thread(durable.start)
            ids = await _ids(stores)
            blob = await stores.state.load(KEY, "p")
            old_ids = [f"old{i}" for i in range(40)]
            new_ids = old_ids + [f"new{i}" for i in range(40)]
            if call == "append":
                assert ids in (old_ids, new_ids), ids
                assert (ids == new_ids) == (when == "after"), "journaled write lost or phantom"
                assert blob == old_blob
            else:
                assert ids == old_ids
                assert blob == (new_blob if when == "after" else old_blob)
            await write(stores)  # sent again: completes, and only once
            assert await _ids(stores) == (new_ids if call == "append" else old_ids)
            assert await stores.state.load(KEY, "p") == (old_blob if call == "append" else new_blob)

    try:
        asyncio.run(main())
    finally:
        real.close()


@pytest.mark.parametrize("delay", [0.3, 1.2, 2.5])
def test_a_server_crash_during_a_long_append_leaves_it_whole_or_absent(
    durable: MotoServer, delay: float
) -> None:
    """A 200-message append (each message leaving the header's window is copied out to
    its own objects first: hundreds of requests) with the server SIGKILLed ``delay``
    seconds in: the transcript afterwards is the old one or the old one plus the batch."""
    url = with_prefix(durable.url(BUCKET)) + FAST_FAIL
    old = [f"old{i}" for i in range(40)]
    batch = [f"new{i}" for i in range(200)]

    async def main() -> None:
        async with S3Stores(url) as stores:
            await _append(stores, old)
            killer = threading.Timer(delay, durable.kill)
            killer.start()
            try:
                await _append(stores, batch)
                outcome = "done"
            except (UnknownOutcomeError, BackendUnavailableError):
                outcome = "cut"
            killer.join()
            await asyncio.to_thread(durable.start)
            ids = await _ids(stores)
            assert ids in (old, old + batch), (outcome, len(ids))
            if outcome == "done":
                assert ids == old + batch, "an acknowledged append was lost"
            await _append(stores, batch)
            assert await _ids(stores) == old + batch

    asyncio.run(main())


def _objects(url: str) -> dict[str, tuple[bytes, str]]:
    """Every object under the bucket: name -> (body, ETag)."""
    from agentstores_s3.stores import parse_url

    bucket, _, _ = parse_url(url, {})
    client = client_for(url)
    try:
        found: dict[str, tuple[bytes, str]] = {}
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            for item in page.get("Contents", ()):
                got = client.get_object(Bucket=bucket, Key=item["Key"])
                found[item["Key"]] = (got["Body"].read(), got["ETag"])
        return found
    finally:
        client.close()


def test_a_crash_restart_holds_every_object_as_it_was(durable: MotoServer) -> None:
    """The journal's replay skips writes a later write of the same object replaced: the
    restarted server holds the same objects, bodies and ETags as before the crash, after
    rewrites, conditional writes, deletes, batch deletes and an erasure."""
    url = with_prefix(durable.url(BUCKET))

    async def main() -> None:
        async with S3Stores(url) as stores:
            conv = stores.conversations
            for n in range(3):
                await _append(stores, [f"m{n}-{i}" for i in range(30)])
                await stores.state.save(KEY, "p", {"n": n})
                await conv.set_title(KEY, "p", f"title {n}")
            gone = ConversationKey("restart", "gone")
            await conv.append_messages(gone, "p", [Message(f"g{i}", "user", i) for i in range(40)])
            await conv.append_messages(gone, "p", [Message("g-last", "user", 0)])
            assert await conv.delete(gone, "p")
            await conv.truncate(KEY, "p", "m1-0")
            await _append(stores, ["after-truncate"])

    asyncio.run(main())
    before = _objects(url)
    durable.prepare_restarts(1)
    durable.restart(crash=True)
    assert _objects(url) == before
