"""Adversarial ids, principals and JSON values for the properties and state machines."""

from __future__ import annotations

import uuid

from hypothesis import strategies as st

from agentstores.keys import MAX_ID_BYTES

TRICKY_IDS: tuple[str, ...] = (
    "a",
    "A",
    "a/b",
    "a:b",
    "a%3Ab",
    "a%2Fb",
    "%",
    "%25",
    "..",
    ".",
    "../../etc",
    "{tag}",
    "}{",
    "{",
    "a b",
    " ",
    "\t\n",
    "a\\b",
    "*?[]",
    "'\";--",
    "$1",
    "é",
    "e\u0301",
    "日本語",
    "🙂",
    "\u202e",
    "x" * MAX_ID_BYTES,
    "é" * (MAX_ID_BYTES // 2),
    "🙂" * (MAX_ID_BYTES // 4),
)
"""Separators, escapes, hash-tag braces, traversal, case, unicode normalization, max length."""

NEAR_COLLISIONS: tuple[tuple[tuple[str, str], tuple[str, str]], ...] = (
    (("a:b", "c"), ("a", "b:c")),
    (("a/b", "c"), ("a", "b/c")),
    (("a%3Ab", "c"), ("a:b", "c")),
    (("a", "b%3Ac"), ("a", "b:c")),
    (("a", "B"), ("a", "b")),
    (("a", "é"), ("a", "e\u0301")),
    (("a", ".."), ("a", ".")),
    (("a", "{x}"), ("a", "x")),
    (("a", "x y"), ("a", "x%20y")),
    (("ab", "c"), ("a", "bc")),
    (("a", "b" * MAX_ID_BYTES), ("a", "b" * (MAX_ID_BYTES - 1))),
)
"""Pairs of (tenant suffix, session id) that naive concatenations or escapes confuse."""


def _fits(value: str) -> bool:
    return 0 < len(value.encode("utf-8")) <= MAX_ID_BYTES and "\x00" not in value


def ids() -> st.SearchStrategy[str]:
    """Any acceptable id, biased to the tricky ones."""
    return st.one_of(
        st.sampled_from(TRICKY_IDS),
        st.text(
            st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=12
        ).filter(_fits),
    )


def principals() -> st.SearchStrategy[str]:
    """Principals include ``""`` ("no user") and near-identical names."""
    return st.one_of(st.sampled_from(("", "alice", "Alice", "alice ", "bob", "a:b", "é")), ids())


def fresh_tenant(label: str = "") -> str:
    """A tenant no other test or run uses, so many runs can share one server."""
    return f"ct-{uuid.uuid4().hex}{label}"


_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**31), max_value=2**31),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12),
)

json_values = st.recursive(
    _scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(
            st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=6),
            children,
            max_size=4,
        ),
    ),
    max_leaves=8,
)
"""JSON values that survive a round trip through any JSON store (no NUL: tested apart)."""

json_objects = st.dictionaries(
    st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=6),
    json_values,
    max_size=4,
)
