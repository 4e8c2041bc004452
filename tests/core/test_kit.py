"""The adapter kit and the refusal vocabulary: the rules every Python engine shares."""

from __future__ import annotations

import base64
import os
from datetime import UTC, datetime, timedelta, timezone

import pytest

from agentstores import (
    AlreadyClaimedError,
    BusyError,
    Capability,
    ConflictError,
    ConversationKey,
    ErasedError,
    ExpiredError,
    FencedError,
    NotFoundError,
    NotOwnedError,
    Refusal,
    StaleWriteError,
    UsageError,
    refusal_error,
)
from agentstores.capabilities import capability_set
from agentstores.keys import MAX_ID_BYTES
from agentstores.models import RecordedEvent
from agentstores.stores import Stores
from agentstores.stores.kit import (
    DEFAULT_TOMBSTONE_TTL,
    MAX_CURSOR_CHARS,
    MAX_TOMBSTONE_TTL,
    after_cursor,
    can_read,
    check_recording_put,
    check_write,
    decode_cursor,
    encode_cursor,
    from_micros,
    judge_write,
    raised_fence,
    to_micros,
    tombstone_ttl,
    writer_nonce,
)
from agentstores_contract import BackendUnderTest

FIRST_MICROS = to_micros(datetime.min.replace(tzinfo=UTC))
LAST_MICROS = to_micros(datetime.max.replace(tzinfo=UTC))

KEY = ConversationKey("t", "s")


def test_micros_round_trip_exactly() -> None:
    moment = datetime(2026, 12, 1, 13, 28, 41, 123456, tzinfo=UTC)
    assert from_micros(to_micros(moment)) == moment
    assert from_micros(str(to_micros(moment)).encode()) == moment
    assert to_micros(datetime(1970, 1, 1, tzinfo=UTC)) == 0
    skewed = moment.astimezone(datetime.now().astimezone().tzinfo)
    assert to_micros(skewed) == to_micros(moment)


def test_cursor_round_trip_and_keyset_order() -> None:
    longest = "\x01" * MAX_ID_BYTES  # each escaped as \u0001: the longest cursor there is
    edges = [(FIRST_MICROS, "a"), (LAST_MICROS, "z"), (5, longest)]
    for updated, session in [(0, "a"), (1_700_000_000_000_000, "s\u00e9ss/ion"), *edges]:
        assert decode_cursor(encode_cursor(updated, session)) == (updated, session)
    cursor = (10, "m")
    assert after_cursor(9, "z", cursor) and after_cursor(10, "l", cursor)
    assert not after_cursor(10, "m", cursor) and not after_cursor(11, "a", cursor)
    assert after_cursor(10, "m", None)


@pytest.mark.parametrize("garbage", ["", "not base64!", encode_cursor(1, "x")[:-3], "WzEsMl0="])
def test_a_foreign_cursor_is_a_usage_error(garbage: str) -> None:
    with pytest.raises(UsageError, match="cursor"):
        decode_cursor(garbage)


def _forged(payload: str) -> str:
    return base64.urlsafe_b64encode(payload.encode()).decode()


@pytest.mark.parametrize(
    "forged",
    [
        _forged(f'[{FIRST_MICROS - 1},"s"]'),
        _forged(f'[{LAST_MICROS + 1},"s"]'),
        _forged(f'[{2**70},"s"]'),
        _forged('[0,"\\ud800"]'),
        _forged('[0,""]'),
        _forged('[0,"a\\u0000b"]'),
        _forged(f'[0,"{"s" * (MAX_ID_BYTES + 1)}"]'),
        _forged("[" * 100_000 + "]" * 100_000),
        "A" * (MAX_CURSOR_CHARS + 1),
        "\ud800",
    ],
    ids=["early", "late", "2**70", "surrogate", "empty", "NUL", "long", "deep", "huge", "text"],
)
def test_a_forged_cursor_is_a_usage_error(forged: str) -> None:
    """Its time past what a datetime holds, its session id no key can have, nested deep
    or too long to be ours: refused before any store sees it."""
    with pytest.raises(UsageError, match="cursor"):
        decode_cursor(forged)


def test_writer_nonces_are_unique_in_a_process_and_across_a_fork() -> None:
    mine = {writer_nonce() for _ in range(10_000)}
    assert len(mine) == 10_000
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its nonces must not repeat the parent's
        os.close(read)
        os.write(write, b"\n".join(writer_nonce().hex.encode() for _ in range(100)))
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        child = {line.decode() for line in pipe.read().split(b"\n")}
    os.waitpid(pid, 0)
    assert len(child) == 100
    parent_next = {writer_nonce().hex for _ in range(100)}
    assert not child & ({n.hex for n in mine} | parent_next)


def test_the_header_rule_checks_erased_then_owner_then_fence() -> None:
    def judge(owner: str | None, fence: int, erased: bool, epoch: int | None) -> Refusal | None:
        return judge_write(owner=owner, fence=fence, erased=erased, principal="me", epoch=epoch)

    assert judge(None, 0, False, None) is None  # no header: the write claims the key
    assert judge("me", 5, False, 5) is None and judge("me", 5, False, None) is None
    assert judge("me", 5, False, 4) is Refusal.FENCED
    assert judge("other", 5, False, 4) is Refusal.NOT_OWNED
    assert judge("other", 5, True, 4) is Refusal.ERASED
    assert judge(None, 0, True, None) is Refusal.ERASED


def test_check_write_raises_typed_errors_with_context() -> None:
    with pytest.raises(FencedError) as fenced:
        check_write(KEY, owner="me", fence=7, erased=False, principal="me", epoch=3)
    assert (fenced.value.epoch, fenced.value.fence, fenced.value.key) == (3, 7, KEY)
    with pytest.raises(NotOwnedError):
        check_write(KEY, owner="you", fence=0, erased=False, principal="me", epoch=None)
    with pytest.raises(ErasedError):
        check_write(KEY, owner="me", fence=0, erased=True, principal="me", epoch=None)
    check_write(KEY, owner="me", fence=7, erased=False, principal="me", epoch=7)


def test_recording_rule_refuses_an_older_epoch_and_never_rolls_back() -> None:
    stored = ("m", 5, 3)
    assert check_recording_put(KEY, RecordedEvent(0, "x", "m", 5), None)
    with pytest.raises(FencedError) as fenced:
        check_recording_put(KEY, RecordedEvent(9, "x", "m", 4), stored)
    assert (fenced.value.epoch, fenced.value.fence, fenced.value.key) == (4, 5, KEY)
    assert "below the recording's 5" in str(fenced.value)
    assert not check_recording_put(KEY, RecordedEvent(2, "x", "m", 5), stored)
    assert check_recording_put(KEY, RecordedEvent(3, "x", "m", 5), stored)
    assert check_recording_put(KEY, RecordedEvent(0, "x", "m", 6), stored)
    assert check_recording_put(KEY, RecordedEvent(0, "x", "other", 5), stored)


def test_fence_only_rises_and_visibility_needs_owner_or_share() -> None:
    assert raised_fence(5, None) == 5 and raised_fence(5, 3) == 5 and raised_fence(5, 9) == 9
    assert can_read(owner="me", shared_with=(), erased=False, principal="me")
    assert can_read(owner="you", shared_with={"me"}, erased=False, principal="me")
    assert not can_read(owner="you", shared_with=(), erased=False, principal="me")
    assert not can_read(owner="me", shared_with=(), erased=True, principal="me")
    assert not can_read(owner=None, shared_with=(), erased=False, principal="me")


@pytest.mark.parametrize(
    ("refusal", "error"),
    [
        (Refusal.NOT_OWNED, NotOwnedError),
        (Refusal.FENCED, FencedError),
        (Refusal.ERASED, ErasedError),
        (Refusal.STALE_TAIL, StaleWriteError),
        (Refusal.EXISTS, ConflictError),
        (Refusal.NOT_FOUND, NotFoundError),
        (Refusal.BUSY, BusyError),
        (Refusal.EXPIRED, ExpiredError),
        (Refusal.ALREADY_CLAIMED, AlreadyClaimedError),
    ],
)
def test_every_refusal_has_its_typed_error_and_a_message(refusal: Refusal, error: type) -> None:
    made = refusal_error(refusal, key=KEY, epoch=None)
    assert type(made) is error
    assert made.key == KEY and "epoch" not in made.context  # None context is dropped
    assert str(made) and str(made) != error.__name__


def test_an_erased_key_says_until_when_and_what_to_do() -> None:
    lapses = datetime(2026, 12, 31, 10, 0, tzinfo=UTC)
    erased = refusal_error(Refusal.ERASED, key=KEY, until=lapses)
    assert isinstance(erased, ErasedError) and erased.until == lapses
    assert str(erased) == (
        "the conversation was erased: its key refuses every write until 2026-12-31T10:00:00Z "
        "(when its tombstone lapses); start a new session id"
    )
    with pytest.raises(ErasedError, match="until 2026-12-31T10:00:00Z") as raised:
        check_write(
            KEY, owner="me", fence=0, erased=True, principal="me", epoch=3, erased_until=lapses
        )
    assert raised.value.until == lapses and raised.value.context["epoch"] == 3


def test_until_is_utc_and_the_message_rounds_it_up() -> None:
    paris = timezone(timedelta(hours=1))
    erased = refusal_error(Refusal.ERASED, until=datetime(2026, 12, 31, 11, 0, 0, 1, tzinfo=paris))
    assert isinstance(erased, ErasedError)
    assert erased.until == datetime(2026, 12, 31, 10, 0, 0, 1, tzinfo=UTC)
    assert erased.until is not None and erased.until.tzinfo is UTC
    assert "until 2026-12-31T10:00:01Z" in str(erased)  # never earlier than the lapse


def test_an_erased_key_without_a_known_lapse_still_says_what_to_do() -> None:
    erased = refusal_error(Refusal.ERASED, key=KEY)
    assert isinstance(erased, ErasedError) and erased.until is None
    assert "tombstone_ttl" in str(erased) and "new session id" in str(erased)
    with pytest.raises(ErasedError, match="new session id") as raised:
        check_write(KEY, owner="me", fence=0, erased=True, principal="me", epoch=None)
    assert raised.value.until is None


def test_only_an_erased_refusal_carries_until() -> None:
    lapses = datetime(2026, 12, 31, 10, 0, tzinfo=UTC)
    with pytest.raises(NotOwnedError) as raised:
        check_write(
            KEY,
            owner="you",
            fence=0,
            erased=False,
            principal="me",
            epoch=None,
            erased_until=lapses,
        )
    assert "until" not in raised.value.context


def test_refusal_context_becomes_attributes() -> None:
    stale = refusal_error(Refusal.STALE_TAIL, key=KEY, tail="a", expected="b")
    assert isinstance(stale, StaleWriteError)
    assert (stale.tail, stale.expected) == ("a", "b") and "'a'" in str(stale)
    busy = refusal_error(Refusal.BUSY, occupant="m1")
    assert isinstance(busy, BusyError) and busy.occupant == "m1"
    assert str(refusal_error(Refusal.NOT_FOUND, "no message 'x'")) == "no message 'x'"


def test_capabilities_are_typed_and_typos_are_refused() -> None:
    assert capability_set(["durable", Capability.CLUSTER]) == {
        Capability.DURABLE,
        Capability.CLUSTER,
    }
    with pytest.raises(UsageError, match="durabel"):
        capability_set(["durabel"])
    with pytest.raises(UsageError, match="collection"):
        capability_set("durable")
    with pytest.raises(UsageError, match="clsuter"):

        class Typo(Stores):  # a bundle declaring a misspelled capability never exists
            capabilities = frozenset({"clsuter"})  # type: ignore[arg-type]


def test_the_suite_refuses_an_unknown_capability_instead_of_skipping() -> None:
    from agentstores.memory.stores import MemoryStores

    backend = BackendUnderTest(open=lambda: MemoryStores("memory://kit-caps"), name="m")
    assert backend.has(Capability.SETTABLE_CLOCK) and backend.has("settable_clock")
    with pytest.raises(UsageError, match="multi_proces"):
        backend.has("multi_proces")


@pytest.mark.parametrize(
    ("given", "ttl"),
    [
        (None, DEFAULT_TOMBSTONE_TTL),
        (timedelta(hours=1), timedelta(hours=1)),
        (60, timedelta(minutes=1)),
        (1.5, timedelta(seconds=1.5)),
        ("60", timedelta(minutes=1)),  # a URL query's text
        (" 2.5 ", timedelta(seconds=2.5)),
        (MAX_TOMBSTONE_TTL, MAX_TOMBSTONE_TTL),
        (MAX_TOMBSTONE_TTL.total_seconds(), MAX_TOMBSTONE_TTL),
        (str(int(MAX_TOMBSTONE_TTL.total_seconds())), MAX_TOMBSTONE_TTL),
    ],
)
def test_tombstone_ttl_takes_a_timedelta_or_seconds(given: object, ttl: timedelta) -> None:
    assert tombstone_ttl(given) == ttl  # type: ignore[arg-type]
    assert timedelta(days=36_525) == MAX_TOMBSTONE_TTL


@pytest.mark.parametrize(
    "bad",
    [
        0,
        -1,
        0.0,
        timedelta(0),
        timedelta(seconds=-1),
        MAX_TOMBSTONE_TTL + timedelta(microseconds=1),
        MAX_TOMBSTONE_TTL.total_seconds() + 1,
        timedelta(days=3_000_000),  # PostgreSQL's clock_timestamp() - ttl overflowed
        1e-9,  # rounds to a zero timedelta
        True,
        False,
        "soon",
        "",
        "nan",
        "inf",
        float("nan"),
        float("-inf"),
        10**400,  # beyond a float
        [60],
    ],
    ids=lambda bad: repr(bad)[:24],
)
def test_tombstone_ttl_refuses_by_name_and_bound(bad: object) -> None:
    with pytest.raises(UsageError, match=r"tombstone_ttl .*at most 100 years") as refused:
        tombstone_ttl(bad)  # type: ignore[arg-type]
    assert refused.value.context["option"] == "tombstone_ttl"
