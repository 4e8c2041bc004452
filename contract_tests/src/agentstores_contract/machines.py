"""Hypothesis state machines: every store call runs on the real bundle and on the model.

One :class:`Harness` (an event loop and one opened bundle) serves a whole hypothesis
run; each example works in a fresh tenant, with adversarial session ids and several
principals. A mismatch fails with both outcomes and hypothesis prints the steps.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from itertools import pairwise
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from agentstores.errors import AgentStoresError, UsageError
from agentstores.keys import ConversationKey
from agentstores.models import (
    MAX_COUNTER,
    ClientInfo,
    Message,
    PendingAuthorization,
    RecordedEvent,
    SupervisionRow,
    UserIntegration,
)
from agentstores.stores import UNSET, Cut, Stores

from .backend import BackendUnderTest
from .model import MessageModel, OAuthModel, StoresModel, metadata_view
from .runtime import Outcome, capture, capture_sync
from .strategies import (
    EPOCH_BASES,
    fresh_tenant,
    json_objects,
    json_values,
    principal_sets,
    session_sets,
)

FAR_PAST = datetime(2001, 1, 1, tzinfo=UTC)
FAR_FUTURE = datetime(2099, 1, 1, tzinfo=UTC)


class Harness:
    """An event loop and one opened bundle for a whole hypothesis run."""

    def __init__(self, backend: BackendUnderTest) -> None:
        self.runner = asyncio.Runner()
        self.stores: Stores = backend.open()
        self.runner.run(self.stores.open())

    def call(self, awaitable: Awaitable[Any]) -> Outcome:
        return self.runner.run(capture(awaitable))

    def value(self, awaitable: Awaitable[Any]) -> Any:
        return self.runner.run(awaitable)  # type: ignore[arg-type]

    def close(self) -> None:
        try:
            self.runner.run(self.stores.close())
        finally:
            self.runner.close()

    def __enter__(self) -> Harness:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def mismatch(what: str, real: Outcome, expected: Outcome) -> AssertionError:
    return AssertionError(
        f"{what}: the store gave {real.describe()}, the model expects {expected.describe()}"
    )


def exact(value: Any) -> Any:
    """``value`` with every JSON scalar tagged by its type (and a float by its bits), so
    ``1 == 1.0 == True`` and ``0.0 == -0.0`` no longer compare equal."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, float):
        return ("float", value.hex())
    if isinstance(value, list | tuple):
        return (type(value).__name__, tuple(exact(v) for v in value))
    if isinstance(value, dict):
        return ("dict", frozenset((k, exact(v)) for k, v in value.items()))
    if isinstance(value, set | frozenset):
        return ("set", frozenset(exact(v) for v in value))
    return value


def expect(
    what: str, real: Outcome, expected: Outcome, view: Callable[[Any], Any] = lambda v: v
) -> None:
    """Fail unless ``real`` matches ``expected`` (values through ``view``, compared
    :func:`exact`-ly)."""
    if expected.error is not None:
        if real.error is None or not isinstance(real.error, type(expected.error)):
            raise mismatch(what, real, expected)
        return
    if real.error is not None:
        raise mismatch(what, real, expected)
    seen = view(real.value)
    if exact(seen) != exact(expected.value):
        raise mismatch(what, Outcome(value=seen), expected)


SLOT = st.integers(min_value=0, max_value=7)
EPOCH = st.integers(min_value=0, max_value=6)
OPT_EPOCH = st.one_of(st.none(), EPOCH)
MESSAGE_IDS = ("m0", "m1", "m2", "m3", "m4", "m/5", "m:6", "M0", "é")
ROLES = ("user", "assistant", "tool", "system", "other")


class ModelMachine(RuleBasedStateMachine):
    """Shared set-up: keys and principals for one example, and the call helpers."""

    def __init__(self, harness: Harness) -> None:
        super().__init__()
        self.h = harness
        self.stores = harness.stores
        self.model = StoresModel()
        self.tenant = fresh_tenant()
        self.keys: list[ConversationKey] = []
        self.principals: list[str] = []
        self.base = 0
        self.observed = 0

    @initialize(sessions=session_sets(), who=principal_sets(), base=EPOCH_BASES)
    def setup(self, sessions: list[str], who: list[str], base: int) -> None:
        """Keys and principals that differ only in ways normalization would merge, epochs
        from ``base``, and the first key owned by ``who[0]`` and shared with ``who[1]``:
        every example has an owner, a shared reader and an unshared principal."""
        self.keys = [ConversationKey(self.tenant, s) for s in sessions]
        self.principals = who
        self.base = base
        key, owner, reader = self.keys[0], who[0], who[1]
        before = self.clock()
        self.both(
            f"conversations.append_messages({key}, {owner!r}, [])",
            self.stores.conversations.append_messages(key, owner, []),
            lambda: self.model.append(key, owner, []),
            lambda stored: [(m.id, m.seq) for m in stored],
            key=key,
        )
        self.both(
            f"conversations.share({key}, {owner!r}, {reader!r})",
            self.stores.conversations.share(key, owner, reader),
            lambda: self.model.set_shared(key, owner, reader, True),
            key=key,
        )
        self.observe(key, before)

    def key(self, slot: int) -> ConversationKey:
        return self.keys[slot % len(self.keys)]

    def who(self, slot: int) -> str:
        return self.principals[slot % len(self.principals)]

    def both(
        self,
        what: str,
        real: Awaitable[Any],
        model: Callable[[], Any],
        view: Callable[[Any], Any] = lambda v: v,
        *,
        key: ConversationKey | tuple[ConversationKey, ...],
    ) -> Outcome:
        """Call the store and the model; their outcomes must match, and a refusal must
        name the conversation the call named (``error.key``: what a caller acts on)."""
        outcome = self.h.call(real)
        expect(what, outcome, capture_sync(model), view)
        error = outcome.error
        if isinstance(error, AgentStoresError) and not isinstance(error, UsageError):
            named = key if isinstance(key, tuple) else (key,)
            assert error.key in named, (
                f"{what}: the {type(error).__name__} names the key {error.key}, not {key}"
            )
        return outcome

    def clock(self) -> datetime:
        """The store's time now: a lower bound for the stamps of the next write."""
        return self.h.value(self.stores.now())  # type: ignore[no-any-return]

    def observe(self, key: ConversationKey, before: datetime) -> None:
        """After a conversation write: what the owner and one other principal (each in
        turn, ``""`` included) now see of ``key``'s metadata, and that ``updated_at`` moved
        to at least ``before`` when the write had to move it and not at all otherwise."""
        seen = None
        k = self.model.at(key)
        everyone = list(dict.fromkeys([*self.principals, ""]))
        self.observed += 1
        others = [p for p in everyone if p != k.owner]
        for principal in [k.owner, others[self.observed % len(others)]]:
            if principal is None:
                continue
            outcome = self.both(
                f"conversations.get_conversation({key}, {principal!r}) after the write",
                self.stores.conversations.get_conversation(key, principal),
                lambda principal=principal: self.model.info(key, principal),  # type: ignore[misc]
                info_view(key),
                key=key,
            )
            if principal == k.owner:
                seen = outcome.value
        conv = k.conversation
        if seen is None or conv is None:
            return
        if conv.created_at is None:
            assert seen.created_at >= before, (
                f"{key} was created at {seen.created_at}, before the write began ({before})"
            )
            conv.created_at = seen.created_at
        assert seen.created_at == conv.created_at, (
            f"created_at of {key} moved from {conv.created_at} to {seen.created_at}"
        )
        if conv.touched:
            assert seen.updated_at >= before and (
                conv.updated_at is None or seen.updated_at >= conv.updated_at
            ), (
                f"updated_at of {key} must move to the time of the write (>= {before}), "
                f"got {seen.updated_at} (was {conv.updated_at})"
            )
        else:
            assert seen.updated_at == conv.updated_at, (
                f"updated_at of {key} moved from {conv.updated_at} to {seen.updated_at} "
                "though nothing was written"
            )
        conv.updated_at, conv.touched = seen.updated_at, False

    def aim(self, slot: int, offset: int) -> int:
        """An epoch near the key's fence (or the example's base before any fenced write),
        so fenced and accepted writes both happen; never beyond the largest valid epoch."""
        return near(max(self.model.at(self.key(slot)).fence, self.base), offset)


def near(epoch: int, offset: int) -> int:
    """``epoch + offset`` kept within the valid epochs, 0 to 2**63 - 1."""
    return min(MAX_COUNTER, max(0, epoch + offset))


METADATA_UPDATES = st.dictionaries(
    st.sampled_from(("agent_identifier", "bot_params", "ctx/é")),
    st.none() | st.sampled_from((0, 1.0, -0.0, "x", [1, "1"], {"a": None}, 2**63)),
    max_size=3,
)
"""Updates to the conversation metadata: a few names, values of every JSON kind, None
removing a name."""


def info_view(key: ConversationKey) -> Callable[[Any], Any]:
    """What ``get_conversation`` returns, as the model's ``info`` tuple."""

    def view(info: Any) -> Any:
        if info is None:
            return None
        assert info.key == key, f"get_conversation({key}) returned key {info.key}"
        assert info.created_at <= info.updated_at, "updated_at is before created_at"
        return (
            info.owner,
            info.title,
            info.expires_at,
            info.last_turn_status,
            info.tail_message_id,
            info.message_count,
            frozenset(info.shared_with),
            metadata_view(info.metadata),
        )

    return view


def _row_view(view: Any) -> Any:
    row = view.row
    if row is not None:
        assert row.heartbeat_at is not None and row.heartbeat_at.tzinfo is not None, (
            "a stored supervision row must carry heartbeat_at on the store clock"
        )
        row = (row.status, row.message_id, row.epoch, row.owner)
    return row, view.fence


class SupervisionRules(ModelMachine):
    @rule(
        k=SLOT,
        p=SLOT,
        aimed=st.booleans(),
        expect_epoch=st.one_of(st.none(), EPOCH),
        offset=st.integers(-1, 2),
        status=st.sampled_from(("running", "done", "errored")),
        mid=st.sampled_from(MESSAGE_IDS[:4]),
    )
    def supervision_cas(
        self,
        k: int,
        p: int,
        aimed: bool,
        expect_epoch: int | None,
        offset: int,
        status: Any,
        mid: str,
    ) -> None:
        key, principal = self.key(k), self.who(p)
        if aimed:
            current = self.model.at(key).supervision
            expect_epoch = None if current is None else current[2]
            epoch = near(self.base if expect_epoch is None else expect_epoch, offset)
        else:
            epoch = self.aim(k, offset)
        row = SupervisionRow(status=status, message_id=mid, epoch=epoch)
        self.both(
            f"supervision.compare_and_swap({key}, {principal!r}, {expect_epoch}, epoch={epoch})",
            self.stores.supervision.compare_and_swap(key, principal, expect_epoch, row),
            lambda: self.model.supervision_cas(key, principal, expect_epoch, (status, mid, epoch)),
            key=key,
        )

    @rule(k=SLOT, p=SLOT)
    def supervision_read(self, k: int, p: int) -> None:
        key, principal = self.key(k), self.who(p)
        self.both(
            f"supervision.read({key}, {principal!r})",
            self.stores.supervision.read(key, principal),
            lambda: self.model.supervision_read(key, principal),
            _row_view,
            key=key,
        )

    @rule(k=SLOT, p=SLOT, exact=st.booleans(), mid=st.sampled_from(MESSAGE_IDS[:4]), epoch=EPOCH)
    def supervision_delete(self, k: int, p: int, exact: bool, mid: str, epoch: int) -> None:
        key, principal = self.key(k), self.who(p)
        current = self.model.at(key).supervision
        if exact and current is not None:
            mid, epoch = current[1], current[2]
        self.both(
            f"supervision.delete({key}, {principal!r}, {mid!r}, {epoch})",
            self.stores.supervision.delete(key, principal, mid, epoch),
            lambda: self.model.supervision_delete(key, principal, mid, epoch),
            key=key,
        )


def _event_view(event: RecordedEvent | None) -> Any:
    return None if event is None else (event.index, event.message, event.message_id, event.epoch)


class RecordingRules(ModelMachine):
    @rule(
        k=SLOT,
        p=SLOT,
        index=st.integers(0, 4),
        message=json_values,
        mid=st.sampled_from(MESSAGE_IDS[:3]),
        offset=st.integers(-1, 1),
    )
    def recording_put(
        self, k: int, p: int, index: int, message: Any, mid: str, offset: int
    ) -> None:
        key, principal = self.key(k), self.who(p)
        epoch = self.aim(k, offset)
        event = RecordedEvent(index=index, message=message, message_id=mid, epoch=epoch)
        self.both(
            f"recording.put({key}, {principal!r}, index={index}, {mid!r}, epoch={epoch})",
            self.stores.recording.put(key, principal, event),
            lambda: self.model.recording_put(key, principal, (index, message, mid, epoch)),
            key=key,
        )

    @rule(k=SLOT, p=SLOT)
    def recording_read(self, k: int, p: int) -> None:
        key, principal = self.key(k), self.who(p)
        self.both(
            f"recording.read({key}, {principal!r})",
            self.stores.recording.read(key, principal),
            lambda: self.model.recording_read(key, principal),
            _event_view,
            key=key,
        )

    @rule(
        k=SLOT,
        p=SLOT,
        mid=st.sampled_from(MESSAGE_IDS[:3]),
        fenced=st.booleans(),
        offset=st.integers(-1, 1),
    )
    def recording_delete(self, k: int, p: int, mid: str, fenced: bool, offset: int) -> None:
        key, principal = self.key(k), self.who(p)
        epoch = self.aim(k, offset) if fenced else None
        self.both(
            f"recording.delete({key}, {principal!r}, {mid!r}, epoch={epoch})",
            self.stores.recording.delete(key, principal, mid, epoch=epoch),
            lambda: self.model.recording_delete(key, principal, mid, epoch),
            key=key,
        )


class StateRules(ModelMachine):
    @rule(k=SLOT, p=SLOT, blob=json_objects, fenced=st.booleans(), offset=st.integers(-1, 1))
    def state_save(self, k: int, p: int, blob: dict[str, Any], fenced: bool, offset: int) -> None:
        key, principal = self.key(k), self.who(p)
        epoch = self.aim(k, offset) if fenced else None
        self.both(
            f"state.save({key}, {principal!r}, epoch={epoch})",
            self.stores.state.save(key, principal, blob, epoch=epoch),
            lambda: self.model.state_save(key, principal, blob, epoch),
            key=key,
        )

    @rule(k=SLOT, p=SLOT)
    def state_load(self, k: int, p: int) -> None:
        key, principal = self.key(k), self.who(p)
        self.both(
            f"state.load({key}, {principal!r})",
            self.stores.state.load(key, principal),
            lambda: self.model.state_load(key, principal),
            key=key,
        )

    @rule(k=SLOT, p=SLOT, fenced=st.booleans(), offset=st.integers(-1, 1))
    def state_delete(self, k: int, p: int, fenced: bool, offset: int) -> None:
        key, principal = self.key(k), self.who(p)
        epoch = self.aim(k, offset) if fenced else None
        self.both(
            f"state.delete({key}, {principal!r}, epoch={epoch})",
            self.stores.state.delete(key, principal, epoch=epoch),
            lambda: self.model.state_delete(key, principal, epoch),
            key=key,
        )


_messages = st.lists(
    st.builds(
        MessageModel,
        id=st.sampled_from(MESSAGE_IDS),
        role=st.sampled_from(ROLES),
        content=json_values,
        metadata=st.just({}) | json_objects,
        compaction=st.sampled_from((False, False, False, True)),
    ),
    max_size=3,
    unique_by=lambda m: m.id,
)


def _stored_view(messages: Any) -> Any:
    return [(m.seq, m.id) for m in messages]


class ConversationRules(ModelMachine):
    def _tail_choice(self, key: ConversationKey, choice: int) -> Any:
        conv = self.model.at(key).conversation
        tail = conv.tail if conv is not None else None
        return (UNSET, tail, tail, None, "m1")[choice]

    @rule(
        k=SLOT,
        p=SLOT,
        batch=_messages,
        create=st.booleans() | st.just(True),
        tail_choice=st.integers(0, 4),
        status=st.none() | st.sampled_from(("running", "complete", "errored", "cancelled")),
        title=st.none() | st.sampled_from(("t", "", "Title/é")),
        expires=st.none() | st.just(FAR_FUTURE) | st.just(FAR_PAST),
        fenced=st.booleans(),
        offset=st.integers(-1, 1),
        metadata=st.none() | METADATA_UPDATES,
    )
    def append(
        self,
        k: int,
        p: int,
        batch: list[MessageModel],
        create: bool,
        tail_choice: int,
        status: Any,
        title: str | None,
        expires: datetime | None,
        fenced: bool,
        offset: int,
        metadata: dict[str, Any] | None,
    ) -> None:
        key, principal = self.key(k), self.who(p)
        expected = self._tail_choice(key, tail_choice)
        conv = self.model.at(key).conversation
        present = {m.id for m in conv.messages} if conv is not None else set()
        all_present = bool(batch) and all(m.id in present for m in batch)
        epoch = self.aim(k, offset) if fenced else None
        if all_present and epoch is not None:
            # whether a no-op append raises the fence is left to the backend
            epoch = min(epoch, self.model.at(key).fence)
        messages = [Message(m.id, m.role, m.content, m.metadata, m.compaction) for m in batch]  # type: ignore[arg-type]
        before = self.clock()
        outcome = self.both(
            f"conversations.append_messages({key}, {principal!r}, {[m.id for m in batch]}, "
            f"create_if_absent={create}, expected_tail={expected!r}, epoch={epoch}, "
            f"metadata={metadata!r})",
            self.stores.conversations.append_messages(
                key,
                principal,
                messages,
                create_if_absent=create,
                last_turn_status=status,
                expected_tail=expected,
                epoch=epoch,
                title=title,
                expires_at=expires,
                metadata=metadata,
            ),
            lambda: self.model.append(
                key,
                principal,
                batch,
                create_if_absent=create,
                last_turn_status=status,
                expected_tail=expected,
                epoch=epoch,
                title=title,
                expires_at=expires,
                metadata=metadata,
            ),
            lambda stored: [(m.id, m.seq) for m in stored],
            key=key,
        )
        if outcome.ok and outcome.value:
            conv = self.model.at(key).conversation
            assert conv is not None
            for stored in outcome.value:
                conv.messages[stored.seq].created_at = stored.created_at
            stamps = [m.created_at for m in conv.messages]
            assert all(a is not None and b is not None and a <= b for a, b in pairwise(stamps)), (
                f"created_at must never go backwards along the transcript: {stamps}"
            )
        self.observe(key, before)

    @rule(
        k=SLOT,
        p=SLOT,
        status=st.sampled_from(("running", "complete", "errored", "cancelled")),
        fenced=st.booleans(),
        offset=st.integers(-1, 1),
    )
    def set_last_turn_status(self, k: int, p: int, status: Any, fenced: bool, offset: int) -> None:
        key, principal = self.key(k), self.who(p)
        epoch = self.aim(k, offset) if fenced else None
        before = self.clock()
        self.both(
            f"conversations.set_last_turn_status({key}, {principal!r}, {status!r}, epoch={epoch})",
            self.stores.conversations.set_last_turn_status(key, principal, status, epoch=epoch),
            lambda: self.model.set_last_turn_status(key, principal, status, epoch),
            key=key,
        )
        self.observe(key, before)

    @rule(
        k=SLOT,
        p=SLOT,
        title=st.none() | st.sampled_from(("x", "a:b")),
        fenced=st.booleans(),
        offset=st.integers(-1, 1),
    )
    def set_title(self, k: int, p: int, title: str | None, fenced: bool, offset: int) -> None:
        key, principal = self.key(k), self.who(p)
        epoch = self.aim(k, offset) if fenced else None
        before = self.clock()
        self.both(
            f"conversations.set_title({key}, {principal!r}, {title!r}, epoch={epoch})",
            self.stores.conversations.set_title(key, principal, title, epoch=epoch),
            lambda: self.model.set_title(key, principal, title, epoch),
            key=key,
        )
        self.observe(key, before)

    @rule(k=SLOT, p=SLOT, updates=METADATA_UPDATES, fenced=st.booleans(), offset=st.integers(-1, 1))
    def set_metadata(
        self, k: int, p: int, updates: dict[str, Any], fenced: bool, offset: int
    ) -> None:
        key, principal = self.key(k), self.who(p)
        epoch = self.aim(k, offset) if fenced else None
        before = self.clock()
        self.both(
            f"conversations.set_metadata({key}, {principal!r}, {updates!r}, epoch={epoch})",
            self.stores.conversations.set_metadata(key, principal, updates, epoch=epoch),
            lambda: self.model.set_metadata(key, principal, updates, epoch),
            key=key,
        )
        self.observe(key, before)

    @rule(k=SLOT, p=SLOT, other=SLOT, shared=st.booleans())
    def share(self, k: int, p: int, other: int, shared: bool) -> None:
        key, principal, with_ = self.key(k), self.who(p), self.who(other)
        method = self.stores.conversations.share if shared else self.stores.conversations.unshare
        before = self.clock()
        self.both(
            f"conversations.{'share' if shared else 'unshare'}({key}, {principal!r}, {with_!r})",
            method(key, principal, with_),
            lambda: self.model.set_shared(key, principal, with_, shared),
            key=key,
        )
        self.observe(key, before)

    @rule(
        k=SLOT,
        p=SLOT,
        mid=st.sampled_from(MESSAGE_IDS),
        fenced=st.booleans(),
        offset=st.integers(-1, 1),
        cut=st.sampled_from(["by_role", "before", "after"]),
        tail_choice=st.integers(0, 2),
        stale=st.sampled_from(MESSAGE_IDS),
    )
    def truncate(
        self,
        k: int,
        p: int,
        mid: str,
        fenced: bool,
        offset: int,
        cut: Cut,
        tail_choice: int,
        stale: str,
    ) -> None:
        key, principal = self.key(k), self.who(p)
        epoch = self.aim(k, offset) if fenced else None
        conv = self.model.at(key).conversation
        expected = (None, conv.tail if conv is not None else None, stale)[tail_choice]
        before = self.clock()
        self.both(
            f"conversations.truncate({key}, {principal!r}, {mid!r}, epoch={epoch}, cut={cut!r}, "
            f"expected_tail={expected!r})",
            self.stores.conversations.truncate(
                key, principal, mid, epoch=epoch, cut=cut, expected_tail=expected
            ),
            lambda: self.model.truncate(key, principal, mid, epoch, cut, expected),
            key=key,
        )
        self.observe(key, before)

    @rule(k=SLOT, p=SLOT, mid=st.sampled_from(MESSAGE_IDS), into=SLOT, fresh=st.booleans())
    def branch(self, k: int, p: int, mid: str, into: int, fresh: bool) -> None:
        key, principal = self.key(k), self.who(p)
        new_key = (
            ConversationKey(self.tenant, f"branch-{len(self.keys)}") if fresh else self.key(into)
        )
        if new_key == key:
            return
        source = self.model.readable(key, principal)
        source_ids = {m.id for m in source.messages} if source is not None else set()
        before = self.clock()
        outcome = self.both(
            f"conversations.branch({key}, {principal!r}, {mid!r}, "
            f"new_session_id={new_key.session_id!r})",
            self.stores.conversations.branch(
                key, principal, mid, new_session_id=new_key.session_id
            ),
            lambda: (self.model.branch(key, principal, mid, new_key), new_key)[1],
            key=(key, new_key),  # a refusal about the new key names it
        )
        self.observe(key, before)
        if not outcome.ok:
            return
        if fresh:
            self.keys.append(new_key)
        copied = self.h.value(self.stores.conversations.read_messages(new_key, principal))
        conv = self.model.at(new_key).conversation
        assert conv is not None
        assert exact(
            [(m.role, m.content, dict(m.metadata), m.compaction) for m in copied]
        ) == exact([(m.role, m.content, m.metadata, m.compaction) for m in conv.messages]), (
            "a branch must copy the prefix's roles, contents, metadata and compaction flags"
        )
        new_ids = [m.id for m in copied]
        assert len(set(new_ids)) == len(new_ids) and not set(new_ids) & source_ids, (
            f"a branch gives every message a fresh id, got {new_ids} from {sorted(source_ids)}"
        )
        for m, stored in zip(conv.messages, copied, strict=True):
            m.id, m.created_at = stored.id, stored.created_at
        self.observe(new_key, before)

    @rule(k=SLOT, p=SLOT)
    def delete(self, k: int, p: int) -> None:
        key, principal = self.key(k), self.who(p)
        before = self.clock()
        self.both(
            f"conversations.delete({key}, {principal!r})",
            self.stores.conversations.delete(key, principal),
            lambda: self.model.erase(key, principal),
            key=key,
        )
        self.observe(key, before)

    @rule(
        k=SLOT,
        p=SLOT,
        mode=st.sampled_from(("all", "index", "range")),
        index=st.integers(-4, 4),
        bounds=st.tuples(st.integers(0, 6), st.integers(0, 6)),
        speaker=st.sampled_from(("all", "user", "assistant")),
        limit=st.none() | st.integers(0, 3),
    )
    def get_transcript(
        self,
        k: int,
        p: int,
        mode: str,
        index: int,
        bounds: tuple[int, int],
        speaker: Any,
        limit: int | None,
    ) -> None:
        key, principal = self.key(k), self.who(p)
        time_range = None
        if mode == "range":
            conv = self.model.at(key).conversation
            stamps = sorted(m.created_at for m in conv.messages if m.created_at) if conv else []
            if not stamps:
                return
            lo, hi = sorted(stamps[b % len(stamps)] for b in bounds)
            time_range = (lo, hi)
        at = index if mode == "index" else None
        self.both(
            f"conversations.get_transcript({key}, {principal!r}, index={at}, "
            f"time_range={time_range}, speaker={speaker!r}, limit={limit})",
            self.stores.conversations.get_transcript(
                key, principal, index=at, time_range=time_range, speaker=speaker, limit=limit
            ),
            lambda: self.model.transcript(
                key, principal, index=at, time_range=time_range, speaker=speaker, limit=limit
            ),
            lambda rows: [(r.index, r.role, r.content, r.id) for r in rows],
            key=key,
        )

    @rule(k=SLOT, p=SLOT, limit=st.integers(1, 4))
    def recent(self, k: int, p: int, limit: int) -> None:
        key, principal = self.key(k), self.who(p)
        self.both(
            f"conversations.recent({key}, {principal!r}, {limit})",
            self.stores.conversations.recent(key, principal, limit),
            lambda: self.model.recent(key, principal, limit),
            _stored_view,
            key=key,
        )

    @rule(k=SLOT, p=SLOT, limit=st.integers(0, 4))
    def tail(self, k: int, p: int, limit: int) -> None:
        key, principal = self.key(k), self.who(p)
        info = info_view(key)
        self.both(
            f"conversations.tail({key}, {principal!r}, {limit})",
            self.stores.conversations.tail(key, principal, limit),
            lambda: self.model.tail(key, principal, limit),
            lambda found: (
                None if found is None else (info(found.info), _stored_view(found.messages))
            ),
            key=key,
        )

    @rule(k=SLOT, p=SLOT)
    def history(self, k: int, p: int) -> None:
        key, principal = self.key(k), self.who(p)
        self.both(
            f"conversations.history({key}, {principal!r})",
            self.stores.conversations.history(key, principal),
            lambda: self.model.history(key, principal),
            _stored_view,
            key=key,
        )

    @rule(k=SLOT, p=SLOT)
    def get_conversation(self, k: int, p: int) -> None:
        key, principal = self.key(k), self.who(p)
        self.both(
            f"conversations.get_conversation({key}, {principal!r})",
            self.stores.conversations.get_conversation(key, principal),
            lambda: self.model.info(key, principal),
            info_view(key),
            key=key,
        )

    @invariant()
    def owner_sees_whole_transcript(self) -> None:
        for key in self.keys:
            k = self.model.keys.get(key)
            if k is None or k.conversation is None or k.owner is None or k.erased:
                continue
            real = self.h.value(self.stores.conversations.read_messages(key, k.owner))
            seen = [(m.seq, m.id, m.role) for m in real]
            wanted = [(i, m.id, m.role) for i, m in enumerate(k.conversation.messages)]
            assert seen == wanted, f"transcript of {key}: store has {seen}, model {wanted}"


class PauseTokenRules(ModelMachine):
    @rule(
        k=SLOT,
        p=SLOT,
        token=st.sampled_from(("t0", "t1", "t/2")),
        payload=json_values,
        expired=st.booleans(),
        fenced=st.booleans(),
        offset=st.integers(-1, 1),
    )
    def token_put(
        self, k: int, p: int, token: str, payload: Any, expired: bool, fenced: bool, offset: int
    ) -> None:
        key, principal = self.key(k), self.who(p)
        epoch = self.aim(k, offset) if fenced else None
        expires_at = FAR_PAST if expired else FAR_FUTURE
        self.both(
            f"pause_tokens.put({token!r}, {key}, {principal!r}, "
            f"expires_at={expires_at}, epoch={epoch})",
            self.stores.pause_tokens.put(token, key, principal, payload, expires_at, epoch=epoch),
            lambda: self.model.token_put(token, key, principal, payload, expired, epoch),
            key=key,
        )

    @rule(k=SLOT, p=SLOT, token=st.sampled_from(("t0", "t1", "t/2")))
    def token_claim(self, k: int, p: int, token: str) -> None:
        key, principal = self.key(k), self.who(p)
        self.both(
            f"pause_tokens.claim({token!r}, {key}, {principal!r})",
            self.stores.pause_tokens.claim(token, key, principal),
            lambda: self.model.token_claim(token, key, principal),
            key=key,
        )

    @rule(k=SLOT, p=SLOT, token=st.sampled_from(("t0", "t1", "t/2")))
    def token_abandon(self, k: int, p: int, token: str) -> None:
        key, principal = self.key(k), self.who(p)
        self.both(
            f"pause_tokens.abandon({token!r}, {key}, {principal!r})",
            self.stores.pause_tokens.abandon(token, key, principal),
            lambda: self.model.token_abandon(token, key, principal),
            key=key,
        )


class SupervisionMachine(SupervisionRules):
    pass


class RecordingMachine(RecordingRules):
    pass


class StateMachine(StateRules):
    pass


class ConversationMachine(ConversationRules):
    pass


class PauseTokenMachine(PauseTokenRules):
    pass


class AllStoresMachine(
    SupervisionRules, RecordingRules, StateRules, ConversationRules, PauseTokenRules
):
    """Every store on shared keys: ownership, fences and erasure cross store lines."""


# --- OAuth ------------------------------------------------------------------------


class OAuthMachine(RuleBasedStateMachine):
    def __init__(self, harness: Harness) -> None:
        super().__init__()
        self.h = harness
        self.repo = harness.stores.oauth
        self.model = OAuthModel()
        base = fresh_tenant()
        self.tenants = [base, base + ":x", base + "%3Ax"]
        self.users = ["", "u", "u:x", "U"]
        self.servers = ["s", "s:x", "s/x"]
        self.states = [fresh_tenant("-state") for _ in range(3)]

    def _integration(
        self, t: int, u: int, s: int, pending: int | None, tokens: Any
    ) -> UserIntegration:
        p = None
        if pending is not None:
            p = PendingAuthorization(
                state=self.states[pending % len(self.states)],
                auth_url="https://auth.example/authorize?x=1",
                code_verifier="v" * 43,
                token_endpoint="https://auth.example/token",
                redirect_uri="http://localhost/cb",
                expires_at=FAR_FUTURE,
                resource=None if pending % 2 else "https://api.example",
            )
        return UserIntegration(
            tenant=self.tenants[t % 3],
            user=self.users[u % 4],
            server_name=self.servers[s % 3],
            pending=p,
            tokens=tokens,
        )

    @rule(t=SLOT, u=SLOT, s=SLOT, pending=st.none() | SLOT, tokens=st.none() | json_objects)
    def save_integration(self, t: int, u: int, s: int, pending: int | None, tokens: Any) -> None:
        record = self._integration(t, u, s, pending, tokens)
        expect(
            f"oauth.save_user_integration({record})",
            self.h.call(self.repo.save_user_integration(record)),
            capture_sync(lambda: self.model.save_integration(record)),
        )

    @rule(t=SLOT, u=SLOT, s=SLOT)
    def get_integration(self, t: int, u: int, s: int) -> None:
        tenant, user, server = self.tenants[t % 3], self.users[u % 4], self.servers[s % 3]
        expect(
            f"oauth.get_user_integration({tenant!r}, {user!r}, {server!r})",
            self.h.call(self.repo.get_user_integration(tenant, user, server)),
            Outcome(value=self.model.integrations.get((tenant, user, server))),
        )

    @rule(t=SLOT, u=SLOT, s=SLOT)
    def delete_integration(self, t: int, u: int, s: int) -> None:
        tenant, user, server = self.tenants[t % 3], self.users[u % 4], self.servers[s % 3]
        expect(
            f"oauth.delete_user_integration({tenant!r}, {user!r}, {server!r})",
            self.h.call(self.repo.delete_user_integration(tenant, user, server)),
            capture_sync(lambda: self.model.delete_integration(tenant, user, server)),
        )

    @rule(
        t=SLOT,
        u=SLOT,
        names=st.none() | st.lists(st.sampled_from(("s", "s:x", "s/x", "zz")), max_size=3),
    )
    def list_integrations(self, t: int, u: int, names: list[str] | None) -> None:
        tenant, user = self.tenants[t % 3], self.users[u % 4]
        expect(
            f"oauth.list_user_integrations({tenant!r}, {user!r}, {names})",
            self.h.call(self.repo.list_user_integrations(tenant, user, names)),
            Outcome(value=self.model.list_integrations(tenant, user, names)),
        )

    @rule(i=SLOT)
    def find_by_state(self, i: int) -> None:
        state = self.states[i % len(self.states)]
        real = self.h.call(self.repo.find_by_pending_state(state))
        candidates = self.model.by_state(state)
        if (
            real.error is not None
            or (real.value is None) != (not candidates)
            or (real.value is not None and real.value not in candidates)
        ):
            raise AssertionError(
                f"oauth.find_by_pending_state({state!r}): the store gave {real.describe()}, "
                f"expected one of {candidates or [None]}"
            )

    @rule(t=SLOT, s=SLOT, info=json_objects)
    def save_client(self, t: int, s: int, info: dict[str, Any]) -> None:
        record = ClientInfo(
            tenant=self.tenants[t % 3], server_name=self.servers[s % 3], client_info=info
        )
        expect(
            f"oauth.save_client_info({record})",
            self.h.call(self.repo.save_client_info(record)),
            capture_sync(lambda: self.model.save_client(record)),
        )

    @rule(t=SLOT, s=SLOT)
    def get_client(self, t: int, s: int) -> None:
        tenant, server = self.tenants[t % 3], self.servers[s % 3]
        expect(
            f"oauth.get_client_info({tenant!r}, {server!r})",
            self.h.call(self.repo.get_client_info(tenant, server)),
            Outcome(value=self.model.clients.get((tenant, server))),
        )

    @rule(
        t=SLOT, names=st.none() | st.lists(st.sampled_from(("s", "s:x", "s/x", "zz")), max_size=3)
    )
    def list_clients(self, t: int, names: list[str] | None) -> None:
        tenant = self.tenants[t % 3]
        expect(
            f"oauth.list_client_info({tenant!r}, {names})",
            self.h.call(self.repo.list_client_info(tenant, names)),
            Outcome(value=self.model.list_clients(tenant, names)),
        )


def run_machine(
    backend: BackendUnderTest, machine: Callable[[Harness], RuleBasedStateMachine], settings: Any
) -> None:
    """Run ``machine`` as a hypothesis test on one harness (one loop, one bundle)."""
    from hypothesis.stateful import run_state_machine_as_test

    with Harness(backend) as harness:
        run_state_machine_as_test(lambda: machine(harness), settings=settings)  # type: ignore[arg-type]
