"""Faults between the adapter and S3, injected under the adapter: a reply lost after the
write landed (with and without the resend that then comes back 412), storms of
``409 ConditionalRequestConflict``, throttling that never ends, and replies cut in
their body."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from botocore.exceptions import (
    ClientError,
    ConnectionClosedError,
    EndpointConnectionError,
    ResponseStreamingError,
)

from agentstores.errors import BackendUnavailableError, UnknownOutcomeError
from agentstores.keys import ConversationKey
from agentstores.models import Message, SupervisionRow
from agentstores_contract.lifetimes import wait_for
from agentstores_s3 import S3Stores
from agentstores_s3.client import CONFLICT_RETRIES

from .conftest import BUCKET, client_for


def _error(code: str, status: int) -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": code}, "ResponseMetadata": {"HTTPStatusCode": status}},
        "PutObject",
    )


class Faulty:
    """A boto3 client whose ``put_object`` to key headers goes through ``fault``."""

    def __init__(self, real: Any, fault: Callable[[Callable[[], Any]], Any]) -> None:
        self.real, self.fault, self.hits = real, fault, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def put_object(self, **kwargs: Any) -> Any:
        if not kwargs["Key"].endswith("/h"):
            return self.real.put_object(**kwargs)
        self.hits += 1
        return self.fault(lambda: self.real.put_object(**kwargs))


def _run(url: str, fault: Callable[[Callable[[], Any]], Any], body: Any) -> Faulty:
    real = client_for(url)
    client = Faulty(real, fault)

    async def main() -> None:
        async with S3Stores(url, client=client) as stores:
            await body(stores)

    try:
        asyncio.run(main())
    finally:
        real.close()
    return client


KEY = ConversationKey("faults", "s")


def test_a_reply_lost_after_the_write_is_recognised_by_its_nonce(url: str) -> None:
    lost = [0]

    def lose_first(send: Callable[[], Any]) -> Any:
        result = send()
        if not lost[0]:
            lost[0] = 1
            raise ConnectionClosedError(endpoint_url="http://moto")
        return result

    async def body(stores: S3Stores) -> None:
        row = SupervisionRow("running", "m", 1)
        assert await stores.supervision.compare_and_swap(KEY, "p", None, row)
        view = await stores.supervision.read(KEY, "p")
        assert view.row is not None and view.row.epoch == 1

    _run(url, lose_first, body)
    assert lost == [1]


def test_a_resend_answered_412_after_the_first_landed_is_a_success(url: str) -> None:
    def resend(send: Callable[[], Any]) -> Any:
        first = send()
        try:
            return send()  # the same conditional PUT again: its precondition now fails
        except ClientError as exc:
            assert exc.response["Error"]["Code"] == "PreconditionFailed"
            raise
        finally:
            del first

    async def body(stores: S3Stores) -> None:
        stored = await stores.conversations.append_messages(KEY, "p", [Message("a", "user", 1)])
        assert [m.id for m in stored] == ["a"]
        stored = await stores.conversations.append_messages(KEY, "p", [Message("b", "user", 2)])
        assert [m.id for m in stored] == ["b"]
        rows = await stores.conversations.get_transcript(KEY, "p")
        assert [r.id for r in rows] == ["a", "b"], "a write reported lost was applied twice"

    _run(url, resend, body)


def test_a_resend_answered_412_after_another_writer_replaced_the_header_is_unknown(
    url: str,
) -> None:
    """The first attempt lands, its reply is lost, another writer replaces the header
    (raising the fence), then botocore's resend comes back 412. The nonce is gone from
    the header, which proves nothing: the append did land. Taking the 412 for a refusal
    and retrying from a fresh read answered FencedError for a write that was applied
    (found by the network-fault run); the outcome is unknown."""
    armed = [False]

    def landed_then_replaced(send: Callable[[], Any]) -> Any:
        if not armed[0]:
            return send()
        armed[0] = False
        send()  # lands; its reply is lost
        head_key = faulty.last_key
        head = json.loads(real.get_object(Bucket=BUCKET, Key=head_key)["Body"].read())
        head["fence"], head["w"] = 5, "another-writer"
        real.put_object(Bucket=BUCKET, Key=head_key, Body=json.dumps(head).encode())
        try:
            return send()
        except ClientError as exc:  # botocore counts its own resends here
            exc.response["ResponseMetadata"]["RetryAttempts"] = 1
            raise

    async def body(stores: S3Stores) -> None:
        await stores.conversations.append_messages(KEY, "p", [Message("a", "user", 1)], epoch=1)
        armed[0] = True
        with pytest.raises(UnknownOutcomeError):
            await stores.conversations.append_messages(KEY, "p", [Message("b", "user", 2)], epoch=1)
        assert not armed[0], "the fault did not fire"
        rows = await stores.conversations.get_transcript(KEY, "p")
        assert [r.id for r in rows] == ["a", "b"], "the append landed once"

    real = client_for(url)
    faulty = _KeyedFaulty(real, landed_then_replaced)

    async def main() -> None:
        async with S3Stores(url, client=faulty) as stores:
            await body(stores)

    try:
        asyncio.run(main())
    finally:
        real.close()


class _KeyedFaulty(Faulty):
    """:class:`Faulty` that remembers the object key of the header write in flight."""

    last_key = ""

    def put_object(self, **kwargs: Any) -> Any:
        if kwargs["Key"].endswith("/h"):
            self.last_key = kwargs["Key"]
        return super().put_object(**kwargs)


def test_a_409_storm_is_retried_until_it_passes(url: str) -> None:
    def storm(send: Callable[[], Any]) -> Any:
        if storm_left[0] > 0:
            storm_left[0] -= 1
            raise _error("ConditionalRequestConflict", 409)
        return send()

    storm_left = [CONFLICT_RETRIES]

    async def body(stores: S3Stores) -> None:
        assert await stores.supervision.compare_and_swap(
            KEY, "p", None, SupervisionRow("running", "m", 1)
        )

    _run(url, storm, body)
    assert storm_left == [0]


@pytest.mark.parametrize(
    ("code", "status", "words"),
    [("ConditionalRequestConflict", 409, "409"), ("SlowDown", 503, "throttled")],
)
def test_an_endless_fault_ends_in_a_clear_error(
    url: str, code: str, status: int, words: str
) -> None:
    def endless(send: Callable[[], Any]) -> Any:
        raise _error(code, status)

    async def body(stores: S3Stores) -> None:
        with pytest.raises(BackendUnavailableError, match=words):
            await stores.supervision.compare_and_swap(
                KEY, "p", None, SupervisionRow("running", "m", 1)
            )
        assert (await stores.supervision.read(KEY, "p")).row is None

    _run(url, endless, body)


class CutBodies:
    """A boto3 client whose first ``cuts`` replies to header GETs break off after the
    headers (as when the server dies while sending): reading the body raises what
    botocore raises then."""

    def __init__(self, real: Any, cuts: int) -> None:
        self.real, self.cuts = real, cuts

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def get_object(self, **kwargs: Any) -> Any:
        response = self.real.get_object(**kwargs)
        if self.cuts > 0 and kwargs["Key"].endswith("/h"):
            self.cuts -= 1
            response["Body"].close()
            response["Body"] = _Broken()
        return response


class _Broken:
    def read(self, amt: int | None = None) -> bytes:
        raise ResponseStreamingError(error="Connection broken: IncompleteRead(0 bytes read)")


@pytest.mark.parametrize("window", [15.0, 0.0])
def test_a_reply_cut_in_its_body_is_read_again(url: str, window: float) -> None:
    """A read whose reply broke off mid-body is sent again (within ``reconnect_window``;
    with 0 the call fails at once, typed), never taken for an absent or empty object."""
    real = client_for(url)
    client = CutBodies(real, 0)
    row = SupervisionRow("running", "m", 1)

    async def main() -> None:
        async with S3Stores(url, client=client, reconnect_window=window) as stores:
            assert await stores.supervision.compare_and_swap(KEY, "p", None, row)
            client.cuts = 2
            if window:
                view = await stores.supervision.read(KEY, "p")
                assert view.row is not None and view.row.epoch == 1
                assert client.cuts == 0
            else:
                with pytest.raises(BackendUnavailableError):
                    await stores.supervision.read(KEY, "p")

    try:
        asyncio.run(main())
    finally:
        real.close()


def test_a_save_whose_old_blob_cannot_be_removed_still_succeeds(url: str) -> None:
    """The header names the new blob once the save commits: a failure removing the blob
    it replaced (a network fault just then) must neither fail the save nor make it remove
    its own blob, which would leave the header naming nothing."""

    async def main() -> None:
        async with S3Stores(url) as stores:
            key = ConversationKey("faults", "state-cleanup")
            await stores.state.save(key, "p", {"v": 1})
            io = stores.state.root.io  # type: ignore[attr-defined]
            delete = io.delete
            failed: list[str] = []

            def failing_delete(name: str, **kwargs: Any) -> bool:
                if "/s/" in name and not failed:
                    failed.append(name)
                    raise EndpointConnectionError(endpoint_url="http://gone")
                return bool(delete(name, **kwargs))

            io.delete = failing_delete
            await stores.state.save(key, "p", {"v": 2})
            assert failed, "the old blob's removal was not attempted"
            io.delete = delete
            assert await stores.state.load(key, "p") == {"v": 2}

    asyncio.run(main())


def test_a_lapsed_tombstone_is_removed_only_as_it_was_read(url: str) -> None:
    """Two replicas claim a key whose tombstone has lapsed. Each removes the tombstone it
    read before creating the key anew; here the second one's removal reaches S3 only
    after the first one has created the key. That removal names the tombstone's ETag
    (``If-Match``) and is refused, so the second claimer finds the lease taken. A blind
    removal would delete the first claimer's new header, and both would win the claim
    of one epoch."""
    key = ConversationKey("faults", "lapsed-race")
    ttl = timedelta(milliseconds=300)
    first: list[bool] = []

    async def claim(name: str) -> bool:
        async with S3Stores(url, tombstone_ttl=ttl) as stores:
            return await stores.supervision.compare_and_swap(
                key, "p", None, SupervisionRow("running", name, 1)
            )

    class FirstClaimerFirst:
        def __init__(self, real: Any) -> None:
            self.real = real

        def __getattr__(self, name: str) -> Any:
            return getattr(self.real, name)

        def delete_object(self, **kwargs: Any) -> Any:
            if kwargs["Key"].endswith("/h") and not first:
                first.append(asyncio.run(claim("first")))  # a worker thread: a loop of its own
            return self.real.delete_object(**kwargs)

    async def main() -> None:
        async with S3Stores(url, tombstone_ttl=ttl) as stores:
            await stores.conversations.append_messages(key, "p", [Message("m", "user", 1)])
            assert await stores.conversations.delete(key, "p")
            await wait_for(stores, await stores.now() + ttl + ttl)
        real = client_for(url)
        try:
            async with S3Stores(url, tombstone_ttl=ttl, client=FirstClaimerFirst(real)) as second:
                assert not await second.supervision.compare_and_swap(
                    key, "p", None, SupervisionRow("running", "second", 1)
                ), "two claimers of a lapsed key both won"
                assert first == [True], "the race was not run: no tombstone removal was sent"
                row = (await second.supervision.read(key, "p")).row
                assert row is not None and row.message_id == "first"
        finally:
            real.close()

    asyncio.run(main())
