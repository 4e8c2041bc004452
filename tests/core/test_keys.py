"""The key codec: injective over adversarial ids, storage-safe names, id validation."""

from __future__ import annotations

import re

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from agentstores.errors import InvalidKeyError
from agentstores.keys import (
    MAX_ID_BYTES,
    ConversationKey,
    decode_component,
    encode_component,
    tenant_prefix,
    validate_id,
    validate_principal,
)

NASTY = [
    "/",
    "..",
    ".",
    ":",
    "{",
    "}",
    "%",
    "%25",
    "%2F",
    "\\",
    " ",
    "\n",
    "*",
    "?",
    "#",
    "é",
    "😀",
]
NASTY += [
    "\u202e",
    "\ufeff",
    "ǅ",
    "ß",
    "İ",
    "Å",
    "Å",
]  # RTL override, BOM, case/normalization traps


def _fits(s: str) -> bool:
    return 0 < len(s.encode("utf-8")) <= MAX_ID_BYTES and "\x00" not in s


# Ids built from the separator, escape and path characters, plus any unicode at all.
ids = st.one_of(
    st.lists(st.sampled_from(NASTY), min_size=1, max_size=40).map("".join),
    st.text(
        st.characters(exclude_categories=["Cs"], exclude_characters="\x00"),
        min_size=1,
        max_size=80,
    ),
    st.text(alphabet="%:/.{}aA0", min_size=1, max_size=MAX_ID_BYTES),
).filter(_fits)

SAFE_COMPONENT = re.compile(r"^[A-Za-z0-9_%-]*$")


@given(ids)
def test_component_round_trips_and_is_safe(value: str) -> None:
    encoded = encode_component(value)
    assert decode_component(encoded) == value
    assert SAFE_COMPONENT.match(encoded)


@given(ids, ids)
def test_component_is_injective(a: str, b: str) -> None:
    assume(a != b)
    assert encode_component(a) != encode_component(b)


@settings(max_examples=300)
@given(ids, ids, ids, ids)
def test_storage_names_are_injective(t1: str, s1: str, t2: str, s2: str) -> None:
    k1, k2 = ConversationKey(t1, s1), ConversationKey(t2, s2)
    assume(k1 != k2)
    assert k1.storage_name != k2.storage_name
    assert k1.digest != k2.digest


@given(ids, ids)
def test_storage_name_is_free_of_path_and_template_chars(tenant: str, session: str) -> None:
    key = ConversationKey(tenant, session)
    name = key.storage_name
    for forbidden in "/.{}":
        assert forbidden not in name
    assert name.count(":") == 1  # only the separator: no ':' inside a component
    assert ConversationKey.from_storage_name(name) == key
    assert re.fullmatch(r"[0-9a-f]{64}", key.digest)


@given(ids, ids, ids)
def test_tenant_prefix_selects_exactly_its_tenant(t1: str, t2: str, session: str) -> None:
    name = ConversationKey(t2, session).storage_name
    assert name.startswith(tenant_prefix(t1)) == (t1 == t2)


def test_adversarial_pairs_that_naive_joins_confuse() -> None:
    pairs = [
        ("a:b", "c"),
        ("a", "b:c"),
        ("a/b", "c"),
        ("a", "b/c"),
        ("a%3Ab", "c"),
        ("a", "%3Ab:c"),
    ]
    names = {ConversationKey(t, s).storage_name for t, s in pairs}
    assert len(names) == len(pairs)
    assert ConversationKey("..", "..").storage_name == "%2E%2E:%2E%2E"


@pytest.mark.parametrize(
    "bad",
    ["", "a\x00b", "\x00", "x" * (MAX_ID_BYTES + 1), "é" * (MAX_ID_BYTES // 2 + 1), "\ud800"],
    ids=["empty", "nul", "only-nul", "too-long", "too-long-multibyte", "lone-surrogate"],
)
def test_invalid_ids_are_refused(bad: str) -> None:
    with pytest.raises(InvalidKeyError):
        validate_id(bad, "tenant")
    with pytest.raises(InvalidKeyError):
        ConversationKey(bad, "s")
    with pytest.raises(InvalidKeyError):
        ConversationKey("t", bad)


@pytest.mark.parametrize("bad", [None, 1, b"bytes", ["t"]])
def test_non_str_ids_are_refused(bad: object) -> None:
    with pytest.raises(InvalidKeyError):
        validate_id(bad, "session_id")
    with pytest.raises(InvalidKeyError):
        ConversationKey("t", bad)  # type: ignore[arg-type]


def test_limits_are_exact_in_bytes() -> None:
    assert validate_id("x" * MAX_ID_BYTES, "t") == "x" * MAX_ID_BYTES
    assert validate_id("é" * (MAX_ID_BYTES // 2), "t")
    ConversationKey("x" * MAX_ID_BYTES, "y" * MAX_ID_BYTES)


def test_invalid_key_error_is_a_value_error_naming_the_field() -> None:
    with pytest.raises(ValueError) as info:
        validate_id("", "session_id")
    assert isinstance(info.value, InvalidKeyError)
    assert info.value.context["field"] == "session_id"


def test_principal_may_be_empty_but_not_invalid() -> None:
    assert validate_principal("") == ""
    with pytest.raises(InvalidKeyError):
        validate_principal("a\x00")
    with pytest.raises(InvalidKeyError):
        validate_principal(None)


def test_keys_are_values() -> None:
    assert ConversationKey("t", "s") == ConversationKey("t", "s")
    assert len({ConversationKey("t", "s"), ConversationKey("t", "s")}) == 1
    with pytest.raises(AttributeError):
        ConversationKey("t", "s").tenant = "u"  # type: ignore[misc]
