"""``quoted_if_match``: the ETag an ``If-Match`` carries, quoted as the server sent it
(the default, RFC 9110 and AWS) or bare (``false``, for stores that compare the header
to the bare ETag and refuse the quoted form: Ceph RGW 16, DigitalOcean Spaces). Either
way the condition holds: a stale ETag in either form is refused."""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any

import pytest

from agentstores.errors import UsageError
from agentstores.keys import ConversationKey
from agentstores_s3 import S3Stores
from agentstores_s3.client import bare_etag

KEY = ConversationKey("if-match", "s")


def sent_if_match(stores: S3Stores) -> list[str]:
    """Every ``If-Match`` header the bundle's client sends from now on."""
    seen: list[str] = []

    def record(request: Any, **_: Any) -> None:
        value = request.headers.get("If-Match")
        if value is not None:
            seen.append(value.decode() if isinstance(value, bytes) else value)

    stores.io.client.meta.events.register("before-send.s3.PutObject", record)
    return seen


@pytest.mark.parametrize(("option", "quoted"), [("", True), ("&quoted_if_match=false", False)])
def test_the_if_match_form_follows_the_option(url: str, option: str, quoted: bool) -> None:
    async def main() -> None:
        async with S3Stores(url + option) as stores:
            seen = sent_if_match(stores)
            await stores.state.save(KEY, "p", {"n": 1})
            await stores.state.save(KEY, "p", {"n": 2})
            assert seen, "the second save rewrote the header without If-Match"
            for value in seen:
                assert value.startswith('"') == quoted, value
            assert await stores.state.load(KEY, "p") == {"n": 2}

    asyncio.run(main())


@pytest.mark.parametrize("quoted", [True, False])
def test_a_stale_etag_is_refused_in_either_form(url: str, quoted: bool) -> None:
    async def main() -> None:
        option = "" if quoted else "&quoted_if_match=false"
        async with S3Stores(url + option) as stores:
            io = stores.io
            first = await stores.runner(partial(io.put, "probe", b"1", if_none_match=True))
            assert first is not None
            second = await stores.runner(partial(io.put, "probe", b"2", if_match=first))
            assert second is not None and second != first
            assert await stores.runner(partial(io.put, "probe", b"3", if_match=first)) is None
            got = await stores.runner(io.get, "probe")
            assert got == (b"2", second)

    asyncio.run(main())


def test_bare_etag() -> None:
    assert bare_etag('"abc"') == "abc"
    assert bare_etag("abc") == "abc"
    assert bare_etag('"') == '"'


def test_a_bad_value_is_a_usage_error(url: str) -> None:
    with pytest.raises(UsageError, match="quoted_if_match"):
        S3Stores(url + "&quoted_if_match=maybe")
