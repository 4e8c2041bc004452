"""The shared identity holder: one fixed identity or a resolver, every answer checked."""

from __future__ import annotations

from typing import Any

import pytest

from agentstores.errors import UsageError
from agentstores.identity import Identities, Identity, checked


def test_a_fixed_identity_is_returned_whatever_the_arguments() -> None:
    identities: Identities[[str]] = Identities("acme", "alice", None)
    assert identities.fixed == ("acme", "alice")
    assert identities("any") == ("acme", "alice")
    assert identities("other") == ("acme", "alice")


def test_an_empty_principal_is_a_valid_fixed_identity() -> None:
    assert Identities[[]]("acme", "", None)() == ("acme", "")


def test_the_resolver_receives_the_call_arguments() -> None:
    seen: list[tuple[str, str]] = []

    def resolve(app_name: str, user_id: str) -> Identity:
        seen.append((app_name, user_id))
        return "acme", user_id

    identities = Identities(None, None, resolve)
    assert identities.fixed is None
    assert identities("app", "bob") == ("acme", "bob")
    assert identities(app_name="app", user_id="carol") == ("acme", "carol")
    assert seen == [("app", "bob"), ("app", "carol")]


def test_a_resolver_taking_nothing_is_called_on_every_call() -> None:
    answers = iter([("acme", "alice"), ("acme", "bob")])
    identities = Identities(None, "", lambda: next(answers))
    assert identities() == ("acme", "alice")
    assert identities() == ("acme", "bob")


def _resolve() -> Identity:
    return "acme", "alice"


@pytest.mark.parametrize(
    ("tenant", "principal", "resolver", "message"),
    [
        (None, None, None, "not neither"),
        (None, "alice", None, "not neither"),
        ("acme", "alice", _resolve, "not both"),
        ("acme", None, _resolve, "not both"),
        (None, "alice", _resolve, "a resolver returns both"),
        ("acme", None, None, "needs principal="),
    ],
)
def test_an_identity_is_given_one_way(
    tenant: str | None, principal: str | None, resolver: Any, message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        Identities(tenant, principal, resolver)


@pytest.mark.parametrize(
    ("tenant", "principal", "names"),
    [("", "alice", "tenant"), ("acme", "a\x00b", "principal"), ("a\x00b", "alice", "tenant")],
)
def test_a_bad_fixed_pair_is_refused_when_given(tenant: str, principal: str, names: str) -> None:
    with pytest.raises(UsageError, match=names):
        Identities(tenant, principal, None)


BAD_ANSWERS = [None, "alice", ("acme",), ("acme", 1), ("acme", "a", "b"), ["acme", "alice"]]


@pytest.mark.parametrize("answer", [*BAD_ANSWERS, ("", "alice"), ("acme", "a\x00b")])
def test_a_bad_resolver_answer_is_refused(answer: Any) -> None:
    identities = Identities(None, None, lambda: answer)
    with pytest.raises(UsageError):
        identities()


@pytest.mark.parametrize("answer", BAD_ANSWERS)
def test_anything_but_a_pair_of_str_is_named_in_the_refusal(answer: Any) -> None:
    with pytest.raises(UsageError, match=r"\(tenant, principal\) pair of str"):
        checked(answer)


def test_a_valid_pair_is_returned_as_a_tuple() -> None:
    assert checked(("acme", "alice")) == ("acme", "alice")
    assert type(checked(("acme", "alice"))) is tuple
