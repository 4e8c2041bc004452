"""``encode_json``, the one encoder every store's JSON goes through: what it refuses
(too deep, a lone surrogate, not JSON, too big) and that its depth check reads the
encoded text right whatever the strings hold."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentstores.errors import UsageError
from agentstores.stores._base import MAX_JSON_DEPTH, _deeper_than, check_text, encode_json

BIG = 1 << 30
TRICKY = ["]", "[", "}", "{", '"', "\\", '\\"]', '"]"', "\\\\[", "é[", "\u2028}"]
"""String pieces that look like structure in the encoded text."""


def nested(depth: int, leaf: Any = "leaf", siblings: int = 0) -> Any:
    """``depth`` levels of objects and arrays in turn; ``siblings`` extra shallow
    containers beside each level (above the innermost two, which they would deepen)
    make the value open many brackets."""
    value = leaf
    for level in range(depth):
        extra: list[list[Any]] = [[] for _ in range(siblings if level >= 2 else 0)]
        value = [value, *extra] if level % 2 else {"k": value, **({"x": extra} if extra else {})}
    return value


def depth_of(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(depth_of, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(depth_of, value), default=0)
    return 0


@pytest.mark.parametrize("leaf", ["leaf", "]]]]}}}}" * 40, '\\"]' * 40, "[[[[{{{{" * 40])
@pytest.mark.parametrize("siblings", [0, 3])
def test_exactly_the_limit_is_accepted_and_one_more_refused(leaf: str, siblings: int) -> None:
    at_limit = nested(MAX_JSON_DEPTH, leaf, siblings)
    assert depth_of(at_limit) == MAX_JSON_DEPTH
    assert json.loads(encode_json(at_limit, "v", BIG)) == at_limit
    with pytest.raises(UsageError, match=f"deeper than {MAX_JSON_DEPTH}"):
        encode_json(nested(MAX_JSON_DEPTH + 1, leaf, siblings), "v", BIG)


def test_brackets_in_strings_are_not_nesting() -> None:
    """Many brackets inside strings, keys included, and a shallow value: accepted."""
    value = {"[" * 300: ["{" * 300, "]" * 300, '\\"[' * 300], "k": [[1, 2]] * 200}
    assert json.loads(encode_json(value, "v", BIG)) == value


def test_recursion_deep_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="deeper than"):
        encode_json(nested(200_000), "message content", BIG)


@pytest.mark.parametrize(
    "value",
    ["\ud800", ["a\udfffb"], {"k": {"\ud83d": 1}}, {"\U0001f600\ud83d": "x"}],
    ids=["value", "in a list", "a nested key", "a key"],
)
def test_a_lone_surrogate_anywhere_is_a_usage_error(value: Any) -> None:
    with pytest.raises(UsageError, match="lone surrogate"):
        encode_json(value, "v", BIG)


def test_other_refusals_stay() -> None:
    for bad in (math.nan, {"x": object()}, {1, 2}):
        with pytest.raises(UsageError, match="not JSON"):
            encode_json(bad, "v", BIG)
    with pytest.raises(UsageError, match="limit is 3"):
        encode_json("abcd", "v", 3)


def test_check_text() -> None:
    assert check_text("naïve ☃ \U0001f600", "t") == "naïve ☃ \U0001f600"
    for bad in ("\ud800", "x\udfff"):
        with pytest.raises(UsageError, match="lone surrogate"):
            check_text(bad, "title")
    with pytest.raises(UsageError, match="must be a str"):
        check_text(b"x", "title")


_tricky_text = st.lists(st.sampled_from([*TRICKY, "a", "é"]), max_size=4).map("".join)
_leaves = st.one_of(st.none(), st.booleans(), st.integers(), _tricky_text)
_values = st.recursive(
    _leaves,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_tricky_text, inner, max_size=4),
    max_leaves=60,
)


@settings(max_examples=300, deadline=None)
@given(_values, st.integers(min_value=0, max_value=8))
def test_depth_check_agrees_with_the_value(value: Any, limit: int) -> None:
    """The depth read from the encoded text is the value's own, whatever its strings
    hold (brackets, quotes, backslashes, escapes)."""
    raw = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
    assert _deeper_than(raw, limit) == (depth_of(value) > limit), raw
