"""The ``tombstone_ttl`` cases every server backend's option tests share: the values it
refuses by name when the bundle is made, and a late write after an erase, refused until
the erase time plus the TTL the bundle keeps."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from uuid import uuid4

import pytest

from agentstores.errors import ErasedError
from agentstores.keys import ConversationKey
from agentstores.models import Message

HUNDRED_YEARS = timedelta(days=36_525)
"""The longest TTL a backend takes (``kit.MAX_TOMBSTONE_TTL``), in seconds in a URL
``3155760000``; a day more is refused."""

REFUSED = [
    pytest.param("", {"tombstone_ttl": 0}, id="0"),
    pytest.param("", {"tombstone_ttl": timedelta(seconds=-1)}, id="minus-1s"),
    pytest.param("", {"tombstone_ttl": HUNDRED_YEARS + timedelta(days=1)}, id="100y+1d"),
    pytest.param("?tombstone_ttl=3155846400", {}, id="url-100y+1d"),
    pytest.param("", {"tombstone_ttl": True}, id="bool"),
    pytest.param("?tombstone_ttl=soon", {}, id="url-text"),
]
"""``(query, keyword options)`` a bundle refuses with a UsageError naming the option."""


async def erase_then_write_late(
    stores: Any, ttl: timedelta, slack: timedelta = timedelta(0)
) -> None:
    """A new key's first append, an erase, a late write: refused until erase time + ttl
    on the store's own clock (``slack``: the rounding a backend keeps expiries in)."""
    key = ConversationKey("t", f"ttl-{uuid4().hex}")
    await stores.conversations.append_messages(key, "p", [Message("m", "user", "hi")])
    before = await stores.now()
    assert await stores.conversations.delete(key, "p")
    after = await stores.now()
    try:
        await stores.conversations.append_messages(key, "p", [Message("n", "user", "late")])
    except ErasedError as erased:
        assert erased.until is not None
        assert before + ttl - slack <= erased.until <= after + ttl + slack
    else:  # taken only once the tombstone lapsed (the 1 s case on a slow machine)
        assert await stores.now() >= before + ttl, "a late write inside tombstone_ttl was taken"
