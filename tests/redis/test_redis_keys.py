"""The Redis key names are the storage format: every replica of every version must name a
conversation's keys, its wake channel, the owners' indexes, the sweeper's shards and the
OAuth records the same way, or a rolling deploy splits the data (and the wake-ups) in two.
Pinned here from one example each."""

from __future__ import annotations

import pytest

from agentstores import ConversationKey, UsageError
from agentstores_redis.keys import SHARDS, KeySpace, decode_owner_name

KEY = ConversationKey("tenant/1", "chat:42")
DIGEST = "3130794662b26ad8dfdb85302b4bfd3295303420641f12ca570daa87cfc17fbc"


def test_a_conversations_keys_and_wake_channel_are_the_format() -> None:
    pushing = KeySpace("app:v1", push=True)
    keys = pushing.conv(KEY)
    assert keys.digest == DIGEST == KEY.digest
    assert keys.header == f"app:v1:{{{DIGEST}}}:h"
    assert keys.channel == f"app:v1:{{{DIGEST}}}:w"
    assert keys.wake == (keys.channel,)
    assert pushing.conv(KEY) is keys  # cached: the digest is not computed again
    polling = KeySpace("app:v1").conv(KEY)
    assert polling.channel == keys.channel and polling.wake == ()
    assert all(name.startswith(f"app:v1:{{{DIGEST}}}:") for name in keys.all)
    assert len(set(keys.all)) == len(keys.all)


def test_the_sweepers_shards_and_the_owners_indexes_are_the_format() -> None:
    space = KeySpace("app:v1")
    assert SHARDS == 16
    assert space.shard_of(KEY) == 6
    shards = [space.shard_of(ConversationKey("tenant/1", s)) for s in ("a", "b", "c", "d")]
    assert shards == [15, 5, 3, 9]  # the first 8 hex digits of the key's digest, mod 16
    assert space.owner_shard("tenant/1", "ann:x") == 10
    assert space.owner_index("tenant/1", "ann:x") == (
        "app:v1:ix:{bbaf7d9a5f5f490eacd952b2a6aee0cf1a1fcbe2313b3480815a7af506102979}"
    )
    assert space.owner_registry(3) == "app:v1:sw:{s3}:own"
    assert space.idle(3) == "app:v1:sw:{s3}:idle"
    assert space.expiring(3) == "app:v1:sw:{s3}:exp"
    assert decode_owner_name(space.owner_name("tenant/1", "ann:x")) == ("tenant/1", "ann:x")


def test_the_oauth_records_keys_are_the_format() -> None:
    space = KeySpace("app:v1")
    assert space.oauth_user("tenant/1", "ann:x") == (
        "app:v1:oa:{117ce378d4ac39ec4ee0c2c4b785b9a4c9a766be306e21087536103a9e49a67e}:i"
    )
    assert space.oauth_state("st/1") == (
        "app:v1:oa:{2b3b42b8b3a010cf7ca31f94a34d5988c19eb36d6e8b9449398906d7af4a9d89}:p"
    )
    assert space.oauth_clients("tenant/1") == (
        "app:v1:oa:{b7d693d6e30791210096d137a38215cb0e77e51965cd733c68188df42f36d0b2}:c"
    )


def test_scans_match_the_prefix_alone() -> None:
    space = KeySpace("app:v1")
    assert space.pattern == "app:v1:*"
    assert space.meta_pattern() == "app:v1:{*}:m"
    assert KeySpace().prefix == "as"
    for bad in ("", "a*b", "a{b}", "x" * 65, 5):
        with pytest.raises(UsageError, match="key_prefix"):
            KeySpace(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("prefix", ["app\n", "a\nb", "", "a" * 65, "a b"])
def test_a_key_prefix_outside_its_alphabet_is_refused(prefix: str) -> None:
    """A key prefix is 1 to 64 of ``A-Z a-z 0-9 _ . : -``, the whole of it (a final
    newline included: a pattern's ``$`` would let it through)."""
    with pytest.raises(UsageError):
        KeySpace(prefix)
