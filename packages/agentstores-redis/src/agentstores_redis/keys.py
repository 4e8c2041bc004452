"""Redis key names. Every key of one conversation shares one hash tag, so one script can
touch all of them on a cluster; indexes that span conversations live in slots of their own.

Layout (``P`` is the key prefix, ``D`` the conversation's ``ConversationKey.digest``)::

    P:{D}:h      header hash: owner, fence, tombstone, expiry, shares, last-write nonce
    P:{D}:sv     supervision row              P:{D}:rec   recording
    P:{D}:st     agent state blob             P:{D}:pt    pause tokens (token id -> record)
    P:{D}:m      conversation metadata        P:{D}:ids   message id -> seq
    P:{D}:u      user message records         P:{D}:a     assistant message records
    P:{D}:o      every other role's records   P:{D}:t     time index (created_at, seq)
    P:{D}:cp     compaction messages by seq   P:{D}:msg   the previous layout's records
    P:{D}:w      the wake channel (a shard channel, not a key: push, see listener.py)

    P:ix:{sha(tenant, owner)}       an owner's conversations in a tenant, by updated_at
    P:sw:{sN}:idle / :exp / :own    sweeper indexes, sharded N = 0..15

The records of a transcript are partitioned by role into three sorted sets scored by
seq (each record stored once), so the recent turns and a speaker's k-th message are
plain ``ZRANGE`` slices. ``msg`` (seq -> record, with ``u``/``a`` holding only seqs) is
the layout before that: a conversation still holding it is converted on first touch.

Names are built only from hex digests and a validated prefix: raw ids never appear in
a key name (they appear only as members and field names, which are binary-safe).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from agentstores.errors import UsageError
from agentstores.keys import ConversationKey, encode_component

SHARDS = 16
"""Sweeper index shards; spreads index writes over a cluster. Fixed for a deployment."""

_PREFIX = re.compile(r"[A-Za-z0-9_.:-]{1,64}")

CONV_PARTS: tuple[tuple[str, str], ...] = (
    ("header", "h"),
    ("supervision", "sv"),
    ("recording", "rec"),
    ("state", "st"),
    ("pause_tokens", "pt"),
    ("meta", "m"),
    ("message_ids", "ids"),
    ("legacy_records", "msg"),
    ("by_time", "t"),
    ("user_records", "u"),
    ("assistant_records", "a"),
    ("compaction_seqs", "cp"),
    ("other_records", "o"),
)
"""``(attribute, key name suffix)`` of every key of one conversation, in the order
scripts receive them when they need all of them."""


def check_prefix(prefix: str) -> str:
    """A key prefix: 1-64 chars of ``[A-Za-z0-9_.:-]`` (no braces, so no hash tag)."""
    if not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix):
        raise UsageError(f"key_prefix must match [A-Za-z0-9_.:-]{{1,64}}, got {prefix!r}")
    return prefix


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("ascii")).hexdigest()


@dataclass(frozen=True, slots=True)
class ConvKeys:
    """The key names of one conversation."""

    digest: str
    header: str
    supervision: str
    recording: str
    state: str
    pause_tokens: str
    meta: str
    message_ids: str
    legacy_records: str
    by_time: str
    user_records: str
    assistant_records: str
    compaction_seqs: str
    other_records: str
    channel: str
    """The conversation's wake channel (in its slot): writes publish on it with push on."""
    wake: tuple[str, ...]
    """What a write a follower cares about passes after its keys: the channel when the
    bundle pushes, else nothing (the script then publishes nothing)."""

    @property
    def all(self) -> list[str]:
        """Every key, in :data:`CONV_PARTS` order."""
        return [getattr(self, attribute) for attribute, _suffix in CONV_PARTS]


class KeySpace:
    """Key names under one prefix."""

    def __init__(self, prefix: str = "as", *, push: bool = False) -> None:
        self.prefix = check_prefix(prefix)
        self.push = push
        self._conv: dict[ConversationKey, ConvKeys] = {}

    def conv(self, key: ConversationKey) -> ConvKeys:
        """The key names of ``key`` (cached: the digest costs more than a round trip's
        worth of Python on hot paths such as heartbeats)."""
        found = self._conv.get(key)
        if found is None:
            if len(self._conv) >= 65536:
                self._conv.clear()
            found = self._conv[key] = self._build(key)
        return found

    def _build(self, key: ConversationKey) -> ConvKeys:
        d = key.digest
        base = f"{self.prefix}:{{{d}}}:"
        channel = base + "w"
        wake = (channel,) if self.push else ()
        parts: dict[str, Any] = {attribute: base + suffix for attribute, suffix in CONV_PARTS}
        return ConvKeys(digest=d, channel=channel, wake=wake, **parts)

    def member(self, key: ConversationKey) -> str:
        """How sweeper indexes name a conversation: its storage name (decodable)."""
        return key.storage_name

    def shard_of(self, key: ConversationKey) -> int:
        return int(key.digest[:8], 16) % SHARDS

    def owner_index(self, tenant: str, owner: str) -> str:
        """An owner's conversations in one tenant: members are raw session ids."""
        return f"{self.prefix}:ix:{{{_sha(self.owner_name(tenant, owner))}}}"

    @staticmethod
    def owner_name(tenant: str, owner: str) -> str:
        return f"{encode_component(tenant)}:{encode_component(owner)}"

    def owner_registry(self, shard: int) -> str:
        return f"{self.prefix}:sw:{{s{shard}}}:own"

    def owner_shard(self, tenant: str, owner: str) -> int:
        return int(_sha(self.owner_name(tenant, owner))[:8], 16) % SHARDS

    def idle(self, shard: int) -> str:
        return f"{self.prefix}:sw:{{s{shard}}}:idle"

    def expiring(self, shard: int) -> str:
        return f"{self.prefix}:sw:{{s{shard}}}:exp"

    def oauth_user(self, tenant: str, user: str) -> str:
        return f"{self.prefix}:oa:{{{_sha('u:' + self.owner_name(tenant, user))}}}:i"

    def oauth_state(self, state: str) -> str:
        return f"{self.prefix}:oa:{{{_sha('s:' + encode_component(state))}}}:p"

    def oauth_clients(self, tenant: str) -> str:
        return f"{self.prefix}:oa:{{{_sha('c:' + encode_component(tenant))}}}:c"

    @property
    def pattern(self) -> str:
        """``SCAN MATCH`` pattern for every key under this prefix."""
        escaped = re.sub(r"([*?\[\]\\])", r"\\\1", self.prefix)
        return f"{escaped}:*"

    def meta_pattern(self) -> str:
        return self.pattern[:-1] + "{*}:m"


def decode_owner_name(name: str) -> tuple[str, str]:
    from agentstores.keys import decode_component

    tenant, _, owner = name.partition(":")
    return decode_component(tenant), decode_component(owner)


__all__ = ["CONV_PARTS", "SHARDS", "ConvKeys", "KeySpace", "check_prefix", "decode_owner_name"]
