"""A conversation's metadata as the ``conv_info`` script reads it from the header and
meta hashes: what ``get_conversation`` returns, and what every index entry is checked
against before it is used."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agentstores.keys import ConversationKey
from agentstores.models import ConversationInfo
from agentstores.stores.conversation_metadata import decode_metadata
from agentstores.stores.kit import from_micros

from ._base import text
from .client import Call, RedisClient
from .keys import KeySpace
from .lua import CONV_INFO


@dataclass(frozen=True)
class StoredInfo:
    """A conversation's metadata as the store holds it (times exact, in microseconds).

    ``status`` is ``ok``, ``absent``, ``erased`` or ``expired`` (dropped by the server
    at its deadline; only ``owner`` is known then); ``now`` is the server's clock.
    """

    status: str
    now: int
    key: ConversationKey | None = None
    owner: str = ""
    created_us: int = 0
    updated_us: int = 0
    updated_raw: bytes = b""
    """``updated_us`` exactly as stored, for the erase script's compare."""
    title: str | None = None
    expires_us: int | None = None
    last_status: str | None = None
    tail: str | None = None
    count: int = 0
    shared: frozenset[str] = frozenset()
    metadata: dict[str, bytes] = field(default_factory=dict)
    """The conversation metadata: name -> its value's canonical JSON."""

    def public(self) -> ConversationInfo:
        assert self.key is not None
        return ConversationInfo(
            key=self.key,
            owner=self.owner,
            title=self.title,
            created_at=from_micros(self.created_us),
            updated_at=from_micros(self.updated_us),
            expires_at=None if self.expires_us is None else from_micros(self.expires_us),
            last_turn_status=self.last_status,  # type: ignore[arg-type]
            tail_message_id=self.tail,
            message_count=self.count,
            shared_with=self.shared,
            metadata=decode_metadata(self.metadata),
        )


def parse_info(reply: list[Any], key: ConversationKey | None = None) -> StoredInfo:
    """The ``conv_info`` reply as :class:`StoredInfo`; without ``key``, the key is the
    raw one the header keeps."""
    now = int(reply[0])
    status = text(reply[1])
    if status == "expired":
        return StoredInfo(status, now, key, owner=text(reply[2]) if reply[2] else "")
    if status != "ok":
        return StoredInfo(status, now, key)
    owner, created, updated, title, expires, last, tail, count, shared, tenant, session, md = reply[
        2:14
    ]
    if key is None and tenant is not None and session is not None:
        key = ConversationKey(text(tenant), text(session))
    return StoredInfo(
        status="ok",
        now=now,
        key=key,
        owner=text(owner),
        created_us=int(created),
        updated_us=int(updated),
        updated_raw=updated,
        title=None if title is None else text(title),
        expires_us=None if expires is None else int(expires),
        last_status=None if last is None else text(last),
        tail=None if tail is None else text(tail),
        count=int(count or 0),
        shared=frozenset(text(s) for s in shared),
        metadata=pairs(md),
    )


def pairs(flat: Sequence[bytes]) -> dict[str, bytes]:
    """A script's flat ``{name, value, ...}`` metadata list as a map."""
    return {text(flat[i]): flat[i + 1] for i in range(0, len(flat), 2)}


async def read_infos(
    client: RedisClient, keys: KeySpace, conversations: Sequence[ConversationKey]
) -> list[StoredInfo]:
    """The admin view (no principal) of many conversations, in one pipelined round trip."""
    calls: list[Call] = []
    for key in conversations:
        names = keys.conv(key)
        calls.append((CONV_INFO, [names.header, names.meta], ["", "1"]))
    out = []
    for key, reply in zip(conversations, await client.many(calls), strict=True):
        if isinstance(reply, Exception):
            raise reply
        out.append(parse_info(reply, key))
    return out


__all__ = ["StoredInfo", "parse_info", "read_infos"]
