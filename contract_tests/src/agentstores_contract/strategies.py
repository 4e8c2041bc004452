"""Adversarial ids, principals and JSON values for the properties and state machines."""

from __future__ import annotations

import uuid

from hypothesis import strategies as st

from agentstores.keys import MAX_ID_BYTES

CONFUSABLE_GROUPS: tuple[tuple[str, ...], ...] = (
    (
        "alice",
        "Alice",
        "ALICE",
        "\uff41\uff4c\uff49\uff43\uff45",
        "alice ",
        "alice\u200b",
        "al\u200dice",
        "alice\u00a0",
    ),
    ("\u00e9", "e\u0301", "\u00c9", "\uff45\u0301"),
    ("\u00df", "ss", "SS", "\u1e9e", "\ufb06"),
    ("k", "K", "\u212a", "\uff4b"),
    ("s", "\u017f", "S"),
    ("\u00c5", "\u212b", "A\u030a", "\u00e5"),
    ("fi", "\ufb01", "\ufb01 "),
    ("a", "\U0001d41a", "\uff41", "a\ufeff", "\u2060a"),
    ("x", "x "),
)
"""Strings that normalization (NFC, NFKC), case folding, width folding, trimming or
dropping invisible characters would merge; every member is a distinct id and principal."""

CONFUSABLE_IDS: tuple[str, ...] = tuple(dict.fromkeys(s for g in CONFUSABLE_GROUPS for s in g))

CONFUSABLE_KEYS: tuple[str, ...] = (
    "alice",
    "alice ",
    "alice\u200b",
    "\uff41\uff4c\uff49\uff43\uff45",
    "\u00df",
    "ss",
    "\u212a",
    "k",
    "\u017f",
    "s",
    "\u212b",
    "\u00c5",
    "\ufb01",
    "fi",
    "a\ufeff",
    "x",
    "x ",
)
"""One member or two of each confusable group, for the tests that write every tricky id."""

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
    "x" * (MAX_ID_BYTES - 3) + "€",
    "x" * (MAX_ID_BYTES - 4) + "🙂",
    *CONFUSABLE_KEYS,
)
"""Separators, escapes, hash-tag braces, traversal, case, unicode normalization, max length
(whole and at a multibyte boundary), and every confusable."""


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
    return st.one_of(
        st.sampled_from(("", "alice", "Alice", "alice ", "bob", "a:b", "é")),
        st.sampled_from(CONFUSABLE_IDS),
        ids(),
    )


_SPARE = ("bob", "", "carol")


def confusable_pair() -> st.SearchStrategy[list[str]]:
    """Two members of one confusable group, in either order."""
    return st.sampled_from(CONFUSABLE_GROUPS).flatmap(
        lambda group: st.permutations(group).map(lambda order: list(order[:2]))
    )


def principal_sets(size: int = 3) -> st.SearchStrategy[list[str]]:
    """``size`` distinct principals, two of them confusable with each other, shuffled."""
    return (
        st.tuples(confusable_pair(), st.lists(principals(), min_size=size, max_size=size))
        .map(lambda parts: list(dict.fromkeys([*parts[0], *parts[1], *_SPARE]))[:size])
        .flatmap(st.permutations)
    )


def session_sets(size: int = 3) -> st.SearchStrategy[list[str]]:
    """``size`` distinct session ids, two of them confusable with each other."""
    return st.tuples(confusable_pair(), st.lists(ids(), min_size=size, max_size=size)).map(
        lambda parts: list(dict.fromkeys([*parts[0], *parts[1], *_SPARE]))[:size]
    )


def fresh_tenant(label: str = "") -> str:
    """A tenant no other test or run uses, so many runs can share one server."""
    return f"ct-{uuid.uuid4().hex}{label}"


EPOCH_BOUNDARIES: tuple[int, ...] = (
    2**31 - 1,
    2**31,
    2**32,
    2**53 - 1,
    2**53,
    2**53 + 1,
    2**63 - 2,
    2**63 - 1,
)
"""Where a 32-bit, double or 64-bit representation of an epoch or index breaks. Epochs
are Python ints; every backend must hold any value up to ``2**63 - 1`` exactly."""

EPOCH_BASES = st.sampled_from((0, 0, 0, 2**31 - 3, 2**53 - 2, 2**63 - 8))
"""Where a state machine's epochs start: small, or just below a representation limit."""

EXACT_JSON: tuple[object, ...] = (
    0,
    -1,
    2**31,
    2**53 + 1,
    -(2**53) - 1,
    2**63 - 1,
    2**63,
    -(2**63) - 1,
    2**64 + 1,
    10**30 + 1,
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.1,
    1 / 3,
    1e308,
    -1e308,
    1.7976931348623157e308,
    5e-324,
    -5e-324,
    2.2250738585072014e-308,
    2.0**53,
    2.0**63,
    1e16,
    123456789.123456789,
    True,
    False,
    "",
    "1",
    "1.0",
    "-0.0",
    "é",
    "e\u0301",
    "\u2028\u2029",
    "\ufeff",
    "\U0001d41a🙂",
    "\\u0000",
    '"\\',
)
"""JSON scalars a representation through doubles, 64-bit ints, canonical numbers or
normalised strings would change, and their look-alikes (int 1 vs float 1.0)."""

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**31), max_value=2**31),
    st.integers(),
    st.sampled_from(EXACT_JSON),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12),
)

_json_keys = st.one_of(
    st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=6),
    st.sampled_from(("", "é", "e\u0301", "K", "\u212a", "a", "a ", "1", "__proto__")),
)
"""Object keys, with the empty key and keys that differ only by normalization."""

json_values = st.recursive(
    _scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(_json_keys, children, max_size=4),
    ),
    max_leaves=8,
)
"""JSON values that survive a round trip through any JSON store (no NUL: tested apart)."""

json_objects = st.dictionaries(_json_keys, json_values, max_size=4)
