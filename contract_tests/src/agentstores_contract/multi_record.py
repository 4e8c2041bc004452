"""Races of multi-record operations against concurrent writers of the same key.

Erasure, truncate, branch, sweeping and sharing each touch several records at once. Each
race is recorded as a history and checked for linearizability against a sequential model
of every operation involved, then the stores are read back once the race is over. Every
client repeats one kind of call, so each multi-record operation overlaps every kind of
concurrent writer and reader; the offset of the multi-record call varies by round.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial
from typing import Any

from agentstores.errors import NotFoundError, StaleWriteError
from agentstores.keys import ConversationKey
from agentstores.models import Message, RecordedEvent, SupervisionRow
from agentstores.protocol import Sweeper
from agentstores.stores import Expired, IdleFor, OverCap, Stores, SweepRule

from .backend import BackendUnderTest
from .base import ContractBase
from .linearizability import Operation, Step, check, format_history
from .promises import promise
from .runtime import capture, clients, race
from .scenarios import ABSENT_READS, check_stale_in_race, snapshot

OWNER = "p"
IDLE = timedelta(milliseconds=400)
"""Idle threshold of the idle-sweep races: above one race on a quiet machine, short
enough to wait out. A race can outlast it on a loaded one, and then a touched
conversation is idle again before the race ends: ``idle_sweep_step`` allows for that."""
IDLE_MARGIN = timedelta(milliseconds=100)
"""How much shorter than the local clock's the store clock's reading of an interval may
be (its offset estimate moving, request latency)."""
_LAPSE_NS = (IDLE - IDLE_MARGIN) // timedelta(microseconds=1) * 1000

Client = Callable[[int, Stores], Awaitable[None]]
Messages = tuple[tuple[str, str], ...]
"""A transcript in a model: (message id, role) pairs, in order."""


class Recorder:
    """Collects the operations of one race; each thunk returns its normalized result.
    ``timed``: each call as the model sees it ends with its invoke and complete times
    (ns) and its result, for a model whose state changes with time (``idle_sweep_step``)."""

    def __init__(self, *, timed: bool = False) -> None:
        self.ops: list[Operation] = []
        self.timed = timed

    async def __call__(
        self, client: int, call: Any, thunk: Callable[[], Awaitable[Hashable]]
    ) -> Any:
        out = await capture(thunk())
        if out.error is not None:
            raise out.error
        if self.timed:
            call = (*call, out.invoked, out.completed, out.value)
        self.ops.append(Operation(client, call, out.value, out.invoked, out.completed))
        return out.value

    def assert_linearizable(self, initial: Any, step: Step[Any], what: str) -> None:
        verdict = check(self.ops, initial, step)
        assert verdict.linearizable, (
            f"{what}: the history ({len(self.ops)} operations) is not linearizable:\n"
            f"{format_history(self.ops)}"
        )


async def run_clients(bundles: Sequence[Stores], roles: Sequence[Client]) -> None:
    """Start every client at once, each on its own bundle; re-raise the first failure."""
    outcomes = await race(
        [partial(role, i, bundles[i % len(bundles)]) for i, role in enumerate(roles)]
    )
    for outcome in outcomes:
        if outcome.error is not None:
            raise outcome.error


async def accepted(awaitable: Awaitable[Any]) -> str:
    """``"ok"`` for a write that took effect; ``"no"`` for False or a refusal as absent."""
    try:
        value = await awaitable
    except NotFoundError:
        return "no"
    return "no" if value is False else "ok"


async def ids_of(stores: Stores, key: ConversationKey, principal: str = OWNER) -> tuple[str, ...]:
    return tuple(m.id for m in await stores.conversations.read_messages(key, principal))


async def info_of(stores: Stores, key: ConversationKey, principal: str = OWNER) -> Hashable:
    info = await stores.conversations.get_conversation(key, principal)
    return None if info is None else (info.message_count, info.tail_message_id)


def batch(client: int, j: int) -> tuple[Message, Message]:
    """A user+assistant pair whose contents are their ids."""
    mid = f"c{client}-{j}"
    return Message(mid, "user", mid), Message(f"{mid}b", "assistant", f"{mid}b")


def pairs(messages: Sequence[Message]) -> Messages:
    return tuple((m.id, m.role) for m in messages)


def transcript_step(msgs: Messages, call: Any) -> tuple[Any, Messages]:
    """Appends (plain and conditional), truncates and reads of one transcript."""
    kind = call[0]
    if kind == "messages":
        return tuple(i for i, _ in msgs), msgs
    if kind == "info":
        return (len(msgs), msgs[-1][0] if msgs else None), msgs
    if kind == "speaker":
        _, speaker, index = call
        view = [i for i, role in msgs if role == speaker]
        return (view[index] if -len(view) <= index < len(view) else None), msgs
    if kind == "append":
        return "ok", msgs + call[1]
    if kind == "cond":
        _, expected, new = call
        if (msgs[-1][0] if msgs else None) != expected:
            return "stale", msgs
        return "ok", msgs + new
    if kind == "truncate":
        at = [i for i, (mid, _) in enumerate(msgs) if mid == call[1]]
        if not at:
            return "missing", msgs
        cut = at[0] if msgs[at[0]][1] == "user" else at[0] + 1
        return len(msgs) - cut, msgs[:cut]
    assert kind == "branch", call
    at = [i for i, (mid, _) in enumerate(msgs) if mid == call[1]]
    if not at:
        return "missing", msgs
    return tuple((role, mid) for mid, role in msgs[: at[0] + 1]), msgs


SEED: Messages = (("u0", "user"), ("a0", "assistant"), ("u1", "user"), ("a1", "assistant"))


async def seed(stores: Stores, key: ConversationKey) -> None:
    await stores.conversations.append_messages(
        key,
        OWNER,
        [Message(mid, role, mid) for mid, role in SEED],  # type: ignore[arg-type]
    )


# --- erasure racing writes to every store --------------------------------------------

READS = ("messages", "state", "recording", "supervision", "info")


def erasure_step(state: Any, call: Any) -> tuple[Any, Any]:
    """The key as one object: transcript, state tag, recording index, supervision epoch."""
    erased, msgs, tag, rec, sup = state
    kind = call[0]
    if kind == "delete":
        return not erased, (True, (), None, None, None)
    if kind in READS:
        info = None if erased else (len(msgs), msgs[-1] if msgs else None)
        reads = {"messages": msgs, "state": tag, "recording": rec, "supervision": sup}
        return reads.get(kind, info), state
    if erased:
        return "no", state
    if kind == "append":
        return "ok", (erased, msgs + call[1:], tag, rec, sup)
    if kind == "save":
        return "ok", (erased, msgs, call[1], rec, sup)
    if kind == "record":
        if rec is not None and call[1] < rec:
            return "no", state
        return "ok", (erased, msgs, tag, call[1], sup)
    if kind == "cas":
        if sup != 1:
            return "no", state
        return "ok", (erased, msgs, tag, rec, 2)
    assert kind == "token", call
    return "ok", state


ERASURE_START = (False, ("u0", "a0"), "s0", 0, 1)
TURN = "t"


async def erasure_setup(stores: Stores, key: ConversationKey) -> None:
    assert await stores.supervision.compare_and_swap(
        key, OWNER, None, SupervisionRow("running", TURN, 1)
    )
    await stores.conversations.append_messages(
        key, OWNER, [Message("u0", "user", "q"), Message("a0", "assistant", "a")]
    )
    await stores.state.save(key, OWNER, {"tag": "s0"})
    assert await stores.recording.put(key, OWNER, RecordedEvent(0, "r", TURN, 2))
    later = await stores.now() + timedelta(hours=1)
    await stores.pause_tokens.put("tok", key, OWNER, {"t": 0}, later)


def erasure_writer(
    kind: str, key: ConversationKey, rec: Recorder, ops: int, tokens: list[str]
) -> Client:
    async def client(i: int, s: Stores) -> None:
        for j in range(ops):
            if kind == "append":
                pair = batch(i, j)
                thunk: Callable[[], Awaitable[Hashable]] = partial(
                    accepted, s.conversations.append_messages(key, OWNER, list(pair))
                )
                await rec(i, ("append", pair[0].id, pair[1].id), thunk)
            elif kind == "save":
                tag = f"c{i}-{j}"
                await rec(
                    i, ("save", tag), partial(accepted, s.state.save(key, OWNER, {"tag": tag}))
                )
            elif kind == "record":
                event = RecordedEvent(j + 1, f"r{j}", TURN, 2)
                await rec(
                    i, ("record", j + 1), partial(accepted, s.recording.put(key, OWNER, event))
                )
            elif kind == "cas":
                row = SupervisionRow("running", f"c{i}-{j}", 2)
                cas = s.supervision.compare_and_swap(key, OWNER, 1, row)
                await rec(i, ("cas",), partial(accepted, cas))
            else:
                token = f"tok-{j}"
                later = await s.now() + timedelta(hours=1)
                put = s.pause_tokens.put(token, key, OWNER, {"t": j}, later)
                if await rec(i, ("token", token), partial(accepted, put)) == "ok":
                    tokens.append(token)

    return client


async def erasure_read(s: Stores, key: ConversationKey, kind: str) -> Hashable:
    if kind == "messages":
        return await ids_of(s, key)
    if kind == "state":
        return (await s.state.load(key, OWNER)).get("tag")
    if kind == "recording":
        event = await s.recording.read(key, OWNER)
        return None if event is None else event.index
    if kind == "supervision":
        row = (await s.supervision.read(key, OWNER)).row
        return None if row is None else row.epoch
    return await info_of(s, key)


def reader(kind: str, key: ConversationKey, rec: Recorder, ops: int) -> Client:
    async def client(i: int, s: Stores) -> None:
        for _ in range(ops):
            await rec(i, (kind,), partial(erasure_read, s, key, kind))

    return client


def eraser(key: ConversationKey, rec: Recorder, before: int) -> Client:
    """Reads the transcript ``before`` times, erases, then reads it twice more."""

    async def client(i: int, s: Stores) -> None:
        for _ in range(before):
            await rec(i, ("messages",), partial(ids_of, s, key))
        await rec(i, ("delete",), partial(s.conversations.delete, key, OWNER))
        for _ in range(2):
            await rec(i, ("messages",), partial(ids_of, s, key))

    return client


async def assert_erased(stores: Stores, key: ConversationKey, tokens: Sequence[str]) -> None:
    """Nothing of ``key`` is left, nor can it be brought back."""
    seen = await snapshot(stores, key, OWNER)
    assert seen == ABSENT_READS, f"after the race the erased key still holds {seen}"
    listed = await stores.conversations.list_conversations(key.tenant, OWNER)
    assert [i.key for i in listed.items if i.key == key] == [], (
        "the erased conversation is listed again: a racing write recreated it"
    )
    for token in tokens:
        try:
            await stores.pause_tokens.claim(token, key, OWNER)
        except NotFoundError:
            continue
        raise AssertionError(f"pause token {token!r} survived the erasure")
    assert not await stores.conversations.delete(key, OWNER), "the key was erased twice"


# --- sweeps racing touches ------------------------------------------------------------


def sweep_step(state: Any, call: Any) -> tuple[Any, Any]:
    """One conversation a rule matches until it is touched."""
    erased, matches, count = state
    kind = call[0]
    if kind == "erase_if":
        if erased or not matches:
            return False, state
        return True, (True, False, None)
    if kind == "info":
        return count, state
    if erased:
        return "no", state
    return "ok", (False, False, count + (call[1] == "append"))


def idle_sweep_step(state: Any, call: Any) -> tuple[Any, Any]:
    """``sweep_step`` for ``IdleFor(IDLE)``, where a touch lapses: IDLE after it the
    conversation is idle again. Calls carry their times and result (``Recorder(timed=
    True)``); the state, the invoke time of the last touch. An ``erase_if`` that ended
    within ``IDLE - IDLE_MARGIN`` of that touch's invoke cannot have found the
    conversation idle; one that ended later may have (when it read the store clock is
    not known), so there its own result decides, and the history must still agree."""
    *bare, invoked, completed, outcome = call
    erased, matches, count, touched = state
    lapsed = touched is not None and completed - touched >= _LAPSE_NS
    if bare[0] == "erase_if" and not erased and lapsed:
        matches = outcome is True
    result, (erased, matches, count) = sweep_step((erased, matches, count), tuple(bare))
    if bare[0] == "touch" and result == "ok":
        touched = invoked
    return result, (erased, matches, count, None if erased else touched)


class MultiRecordContract(ContractBase):
    def _rounds(self) -> int:
        """Enough rounds for every offset of the multi-record call and both orders."""
        return max(3, self.profile.rounds // 2)

    @promise("races.erasure.writes")
    def test_erasure_racing_writes(self, backend: BackendUnderTest) -> None:
        ops = self.profile.history_ops
        kinds = ("append", "save", "record", "cas", "token")

        async def body(stores: Stores) -> None:
            async with clients(backend, stores, 1 + len(kinds) + len(READS)) as bundles:
                for r in range(self._rounds()):
                    key = self.key(f"erase-{r}")
                    await erasure_setup(stores, key)
                    rec, tokens = Recorder(), ["tok"]
                    roles = [
                        eraser(key, rec, r % 4),
                        *(erasure_writer(k, key, rec, ops, tokens) for k in kinds),
                        *(reader(k, key, rec, ops) for k in READS),
                    ]
                    await run_clients(bundles, roles)
                    rec.assert_linearizable(ERASURE_START, erasure_step, f"round {r}")
                    await assert_erased(stores, key, tokens)

        self.run(backend, body)

    @promise("races.truncate.appends")
    def test_truncate_racing_appends(self, backend: BackendUnderTest) -> None:
        targets = ("a1", "c1-0b", "u1", "c2-1", "c1-1b", "a0")

        async def body(stores: Stores) -> None:
            async with clients(backend, stores, 8) as bundles:
                for r in range(self._rounds()):
                    on = Race(self.key(f"truncate-{r}"), self.profile.history_ops)
                    await seed(stores, on.key)
                    roles = [
                        on.truncater(targets, r),
                        on.appender(),
                        on.appender(),
                        on.conditional(),
                        on.speaker("user", -1),
                        on.speaker("assistant", 1),
                        on.whole(),
                    ]
                    await run_clients(bundles, roles[r % 2 :] + roles[: r % 2])
                    on.rec.assert_linearizable(SEED, transcript_step, f"round {r}")
                    await assert_indexes_agree(stores, on.key)

        self.run(backend, body)

    @promise("races.branch.source")
    def test_branch_racing_source_writes(self, backend: BackendUnderTest) -> None:
        # Each step's truncate cuts before that step's branch point.
        at = ("a1", "c2-0b", "c3-1b", "a0")
        cut = ("u1", "c2-0", "c3-1", "a0")

        async def body(stores: Stores) -> None:
            async with clients(backend, stores, 5) as bundles:
                for r in range(self._rounds()):
                    on = Race(self.key(f"branch-{r}"), self.profile.history_ops)
                    await seed(stores, on.key)
                    roles = [
                        on.brancher(at, r),
                        on.truncater(cut, r),
                        on.appender(),
                        on.appender(),
                        on.whole(),
                    ]
                    await run_clients(bundles, roles)
                    on.rec.assert_linearizable(SEED, transcript_step, f"round {r}")

        self.run(backend, body)

    @promise("races.sweep.touch")
    def test_sweep_racing_touch(self, backend: BackendUnderTest) -> None:
        rounds = self._rounds()
        rules: dict[str, SweepRule] = {
            "expired": Expired(),
            "idle": IdleFor(IDLE),
            "over_cap": OverCap(1),
        }

        async def body(stores: Stores) -> None:
            keys = [
                {name: ConversationKey(self.tenant(f"sweep{r}"), name) for name in rules}
                for r in range(rounds)
            ]
            past = await stores.now() - timedelta(seconds=1)
            first = [Message("m0", "user", 0)]
            conv = stores.conversations
            for by_rule in keys:
                await conv.append_messages(by_rule["expired"], OWNER, first, expires_at=past)
                await conv.append_messages(by_rule["idle"], OWNER, first)
                capped = by_rule["over_cap"]
                await conv.append_messages(capped, OWNER, first)
                newer = ConversationKey(capped.tenant, "over_cap-newer")
                await conv.append_messages(newer, OWNER, first)
            await asyncio.sleep(IDLE.total_seconds() * 1.2)
            async with clients(backend, stores, 3 * len(rules)) as bundles:
                for r, by_rule in enumerate(keys):
                    recs = {name: Recorder(timed=name == "idle") for name in rules}
                    roles: list[Client] = []
                    for name, rule in rules.items():
                        key, rec = by_rule[name], recs[name]
                        touch = "set_title" if r % 4 >= 2 and name != "expired" else "append"
                        trio = [
                            sweep_eraser(key, rule, rec),
                            toucher(key, touch, rec),
                            sweep_reader(key, rec),
                        ]
                        roles += trio if r % 2 == 0 else [trio[1], trio[0], trio[2]]
                    await run_clients(bundles, roles)
                    for name, key in by_rule.items():
                        rec = recs[name]
                        await rec(0, ("info",), partial(count_of, stores, key))
                        start: tuple[object, ...]
                        if name == "idle":
                            start, step = (False, True, 1, None), idle_sweep_step
                        else:
                            start, step = (False, True, 1), sweep_step
                        rec.assert_linearizable(start, step, f"{name}, round {r}")
                        if await stores.conversations.get_conversation(key, OWNER) is None:
                            await assert_erased(stores, key, [])

            await self._sweeper_racing_renewal(backend, stores)

        self.run(backend, body)

    async def _sweeper_racing_renewal(self, backend: BackendUnderTest, stores: Stores) -> None:
        """The protocol Sweeper against a renewal: renewed means kept, and kept whole."""

        async def sweep(i: int, s: Stores) -> None:
            await Sweeper(s).sweep_once()

        async with clients(backend, stores, 2) as bundles:
            for r in range(2):
                key = self.key(f"swept-{r}")
                past = await stores.now() - timedelta(seconds=1)
                await stores.conversations.append_messages(
                    key, OWNER, [Message("m0", "user", 0)], expires_at=past
                )
                renewed: list[str] = []
                renew = renewer(key, renewed)
                await run_clients(bundles, [sweep, renew] if r == 0 else [renew, sweep])
                if renewed == ["ok"]:
                    assert await ids_of(stores, key) == ("m0", "m1"), (
                        "the sweeper erased a conversation renewed before its re-check"
                    )
                else:
                    await assert_erased(stores, key, [])

    @promise("races.sharing.reads")
    def test_sharing_racing_reads(self, backend: BackendUnderTest) -> None:
        readers = ("r1", "r2")

        def step(shared: frozenset[str], call: Any) -> tuple[Any, frozenset[str]]:
            kind, who = call
            if kind == "share":
                return None, shared | {who}
            if kind == "unshare":
                return None, shared - {who}
            if kind == "shared_with":
                return shared, shared
            return (tuple(mid for mid, _ in SEED) if who in shared else ()), shared

        async def body(stores: Stores) -> None:
            async with clients(backend, stores, 4) as bundles:
                for r in range(self._rounds()):
                    on = Race(self.key(f"share-{r}"), self.profile.history_ops)
                    await seed(stores, on.key)
                    roles = [*map(on.sharer, readers), *map(on.viewer, readers)]
                    await run_clients(bundles, roles)
                    await on.rec(0, ("shared_with", ""), partial(shared_with, stores, on.key))
                    on.rec.assert_linearizable(frozenset(), step, f"round {r}")

        self.run(backend, body)


@dataclass
class Race:
    """Clients racing on one conversation, each repeating one kind of call ``ops`` times."""

    key: ConversationKey
    ops: int
    rec: Recorder = field(default_factory=Recorder)

    def truncater(self, targets: Sequence[str], offset: int) -> Client:
        async def client(i: int, s: Stores) -> None:
            for j in range(self.ops):
                mid = targets[(j + offset) % len(targets)]
                await self.rec(i, ("truncate", mid), partial(truncate, s, self.key, mid))

        return client

    def appender(self) -> Client:
        async def client(i: int, s: Stores) -> None:
            for j in range(self.ops):
                pair = batch(i, j)
                append = s.conversations.append_messages(self.key, OWNER, list(pair))
                await self.rec(i, ("append", pairs(pair)), partial(accepted, append))

        return client

    def conditional(self) -> Client:
        """Appends on the tail it last read (the read is not part of the history)."""

        async def client(i: int, s: Stores) -> None:
            for j in range(self.ops):
                pair = batch(i, j)
                info = await s.conversations.get_conversation(self.key, OWNER)
                tail = None if info is None else info.tail_message_id
                thunk = partial(conditional_append, s, self.key, pair, tail)
                await self.rec(i, ("cond", tail, pairs(pair)), thunk)

        return client

    def speaker(self, speaker: str, index: int) -> Client:
        async def client(i: int, s: Stores) -> None:
            for _ in range(self.ops):
                thunk = partial(by_speaker, s, self.key, speaker, index)
                await self.rec(i, ("speaker", speaker, index), thunk)

        return client

    def whole(self) -> Client:
        """Reads the transcript and its metadata in turn."""

        async def client(i: int, s: Stores) -> None:
            for j in range(self.ops):
                if j % 2:
                    await self.rec(i, ("info",), partial(info_of, s, self.key))
                else:
                    await self.rec(i, ("messages",), partial(ids_of, s, self.key))

        return client

    def brancher(self, targets: Sequence[str], offset: int) -> Client:
        async def client(i: int, s: Stores) -> None:
            for j in range(self.ops):
                mid = targets[(j + offset) % len(targets)]
                thunk = partial(branch, s, self.key, mid, f"{self.key.session_id}-b{j}")
                await self.rec(i, ("branch", mid), thunk)

        return client

    def sharer(self, who: str) -> Client:
        """Shares with ``who``, unsharing every fourth call."""

        async def client(i: int, s: Stores) -> None:
            for j in range(self.ops):
                kind = "unshare" if j % 4 == 3 else "share"
                write = getattr(s.conversations, kind)
                await self.rec(i, (kind, who), partial(write, self.key, OWNER, who))

        return client

    def viewer(self, who: str) -> Client:
        async def client(i: int, s: Stores) -> None:
            for _ in range(self.ops):
                await self.rec(i, ("read", who), partial(ids_of, s, self.key, who))

        return client


def renewer(key: ConversationKey, outcome: list[str]) -> Client:
    async def client(i: int, s: Stores) -> None:
        later = await s.now() + timedelta(days=1)
        append = s.conversations.append_messages(
            key, OWNER, [Message("m1", "user", 1)], expires_at=later
        )
        outcome.append(await accepted(append))

    return client


def sweep_eraser(key: ConversationKey, rule: SweepRule, rec: Recorder) -> Client:
    async def client(i: int, s: Stores) -> None:
        await rec(i, ("erase_if",), partial(s.conversations.erase_if, key, rule))

    return client


def toucher(key: ConversationKey, how: str, rec: Recorder) -> Client:
    async def client(i: int, s: Stores) -> None:
        if how == "set_title":
            write: Awaitable[Any] = s.conversations.set_title(key, OWNER, "touched")
        else:
            later = await s.now() + timedelta(days=1)
            write = s.conversations.append_messages(
                key, OWNER, [Message("m1", "user", 1)], expires_at=later
            )
        await rec(i, ("touch", how), partial(accepted, write))

    return client


def sweep_reader(key: ConversationKey, rec: Recorder) -> Client:
    async def client(i: int, s: Stores) -> None:
        for _ in range(2):
            await rec(i, ("info",), partial(count_of, s, key))

    return client


async def count_of(s: Stores, key: ConversationKey) -> int | None:
    info = await s.conversations.get_conversation(key, OWNER)
    return None if info is None else info.message_count


async def shared_with(s: Stores, key: ConversationKey) -> frozenset[str]:
    info = await s.conversations.get_conversation(key, OWNER)
    assert info is not None
    return frozenset(info.shared_with)


async def truncate(s: Stores, key: ConversationKey, mid: str) -> Hashable:
    try:
        return await s.conversations.truncate(key, OWNER, mid)
    except NotFoundError:
        return "missing"


async def conditional_append(
    s: Stores, key: ConversationKey, pair: Sequence[Message], tail: str | None
) -> str:
    try:
        await s.conversations.append_messages(key, OWNER, list(pair), expected_tail=tail)
    except StaleWriteError as exc:
        check_stale_in_race(exc, tail, "a conditional append")
        return "stale"
    return "ok"


async def by_speaker(s: Stores, key: ConversationKey, speaker: Any, index: int) -> str | None:
    rows = await s.conversations.get_transcript(key, OWNER, index=index, speaker=speaker)
    return rows[0].id if rows else None


async def branch(s: Stores, key: ConversationKey, mid: str, new_session: str) -> Hashable:
    """The branch's (role, content) rows, or ``"missing"``; its ids must all be fresh."""
    try:
        new_key = await s.conversations.branch(key, OWNER, mid, new_session_id=new_session)
    except NotFoundError:
        return "missing"
    copied = await s.conversations.read_messages(new_key, OWNER)
    reused = [m.id for m in copied if m.id == m.content]
    assert not reused, f"the branch at {mid!r} kept the source's ids {reused}"
    return tuple((m.role, m.content) for m in copied)


async def assert_indexes_agree(stores: Stores, key: ConversationKey) -> None:
    """Count, tail, speaker views by index and ``recent`` agree with the full transcript."""
    conv = stores.conversations
    stored = await conv.read_messages(key, OWNER)
    ids = [m.id for m in stored]
    assert [m.seq for m in stored] == list(range(len(stored))), "seq has gaps after the race"
    assert [m.id for m in await conv.get_transcript(key, OWNER)] == ids
    assert await info_of(stores, key) == (len(ids), ids[-1] if ids else None)
    for speaker in ("user", "assistant"):
        view = [m.id for m in stored if m.role == speaker]
        for index in {0, 1, -1, -2, len(view), -len(view) - 1}:
            want = view[index] if -len(view) <= index < len(view) else None
            got = await by_speaker(stores, key, speaker, index)
            assert got == want, (
                f"{speaker} message {index} is {got!r}, the transcript says {want!r}"
            )
    turns = [m.id for m in stored if m.role in ("user", "assistant")][-3:]
    assert [m.id for m in await conv.recent(key, OWNER, 3)] == turns
