"""Atomicity under real concurrency, and linearizability of recorded histories.

Many clients (asyncio tasks, each with a bundle of its own where the backend has
connections) race one key from behind a barrier.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Awaitable, Callable
from datetime import timedelta
from functools import partial
from typing import Any

from agentstores.errors import AlreadyClaimedError, FencedError, StaleWriteError
from agentstores.keys import ConversationKey
from agentstores.models import Message, SupervisionRow, Swap
from agentstores.stores import Stores

from . import seeds
from .backend import BackendUnderTest
from .base import ContractBase
from .linearizability import Operation, check, format_history
from .promises import promise
from .runtime import Outcome, capture, clients, race
from .scenarios import check_fenced, check_stale, check_stale_in_race

Planned = tuple[Any, Callable[[], Awaitable[Any]]]
"""A history operation: its hashable description and the thunk that performs it."""


def describe(outcomes: list[Outcome]) -> str:
    return ", ".join(f"c{i}: {o.describe()}" for i, o in enumerate(outcomes))


class ConcurrencyContract(ContractBase):
    @promise("supervision.cas.race")
    def test_cas_has_one_winner(self, backend: BackendUnderTest) -> None:
        n, rounds = self.profile.clients, self.profile.rounds
        key = self.key()

        async def body(stores: Stores) -> None:
            async with clients(backend, stores, n) as bundles:
                expected: int | None = None
                for r in range(rounds):
                    epoch = r + 1
                    calls = [
                        partial(
                            s.supervision.compare_and_swap,
                            key,
                            "p",
                            expected,
                            SupervisionRow("running", f"c{i}", epoch),
                        )
                        for i, s in enumerate(bundles)
                    ]
                    outcomes = await race(calls)
                    winners = [i for i, o in enumerate(outcomes) if o.ok and o.value is True]
                    assert len(winners) == 1, (
                        f"round {r}: {len(winners)} of {n} CAS calls expecting {expected} "
                        f"won: {describe(outcomes)}"
                    )
                    row = (await stores.supervision.read(key, "p")).row
                    assert row is not None and (row.message_id, row.epoch) == (
                        f"c{winners[0]}",
                        epoch,
                    ), f"round {r}: the stored row {row} is not the winner's (c{winners[0]})"
                    expected = epoch

        self.run(backend, body)

    @promise("supervision.cas_many.race")
    def test_batched_cas_has_one_winner_per_key(self, backend: BackendUnderTest) -> None:
        n, rounds = self.profile.clients, self.profile.rounds
        keys = [self.key(f"k{j}") for j in range(4)]

        async def body(stores: Stores) -> None:
            async with clients(backend, stores, n) as bundles:
                expected: list[int | None] = [None] * len(keys)
                for r in range(rounds):
                    epoch = r + 1
                    rng = seeds.rng(f"cas_many.race:{r}")

                    def batch(i: int, epoch: int, rng: random.Random) -> list[Swap]:
                        # each client its own key order: batches over the same keys in
                        # different orders must neither deadlock nor lose a row
                        order = list(range(len(keys)))
                        rng.shuffle(order)
                        row = SupervisionRow("running", f"c{i}", epoch)
                        return [Swap(keys[j], "p", expected[j], row) for j in order]

                    plans = [batch(i, epoch, rng) for i in range(len(bundles))]
                    calls = [
                        partial(s.supervision.compare_and_swap_many, plan)
                        for s, plan in zip(bundles, plans, strict=True)
                    ]
                    outcomes = await race(calls)
                    for i, o in enumerate(outcomes):
                        assert o.ok, f"round {r}: client c{i}'s batch raised {o.describe()}"
                    for j, key in enumerate(keys):
                        winners = [
                            i
                            for i, (plan, o) in enumerate(zip(plans, outcomes, strict=True))
                            for sw, out in zip(plan, o.value, strict=True)
                            if sw.key == key and out.error is None and out.swapped
                        ]
                        assert len(winners) == 1, (
                            f"round {r}, key {j}: {len(winners)} of {n} batched CAS rows "
                            f"expecting {expected[j]} won"
                        )
                        row = (await stores.supervision.read(key, "p")).row
                        assert row is not None and (row.message_id, row.epoch) == (
                            f"c{winners[0]}",
                            epoch,
                        ), f"round {r}, key {j}: the stored row {row} is not the winner's"
                        expected[j] = epoch

        self.run(backend, body)

    @promise("conversations.append.race")
    def test_conditional_append_has_one_winner(self, backend: BackendUnderTest) -> None:
        n, rounds = self.profile.clients, self.profile.rounds
        key = self.key()

        async def body(stores: Stores) -> None:
            async with clients(backend, stores, n) as bundles:
                tail: str | None = None
                length = 0
                for r in range(rounds):
                    calls = [
                        partial(
                            s.conversations.append_messages,
                            key,
                            "p",
                            [
                                Message(f"r{r}c{i}", "user", i),
                                Message(f"r{r}c{i}b", "assistant", i),
                            ],
                            expected_tail=tail,
                        )
                        for i, s in enumerate(bundles)
                    ]
                    outcomes = await race(calls)
                    winners = [i for i, o in enumerate(outcomes) if o.ok]
                    losers = [o for o in outcomes if not o.ok]
                    assert len(winners) == 1, (
                        f"round {r}: {len(winners)} of {n} appends expecting tail {tail!r} "
                        f"succeeded: {describe(outcomes)}"
                    )
                    assert all(isinstance(o.error, StaleWriteError) for o in losers), (
                        f"round {r}: losers must get StaleWriteError: {describe(outcomes)}"
                    )
                    expected, tail = tail, f"r{r}c{winners[0]}b"
                    for loser in losers:
                        assert isinstance(loser.error, StaleWriteError)
                        check_stale(
                            loser.error, tail=tail, expected=expected, what=f"round {r}'s loser"
                        )
                    length += 2
                    stored = await stores.conversations.read_messages(key, "p")
                    assert [m.id for m in stored][-2:] == [f"r{r}c{winners[0]}", tail], (
                        f"round {r}: transcript tail is {[m.id for m in stored][-2:]}"
                    )
                    assert len(stored) == length, f"round {r}: {len(stored)} messages, not {length}"

        self.run(backend, body)

    @promise("conversations.append.no_lost_updates")
    def test_unconditional_appends_all_land(self, backend: BackendUnderTest) -> None:
        n, per = self.profile.clients, max(3, self.profile.rounds)
        key = self.key()

        async def body(stores: Stores) -> None:
            async with clients(backend, stores, n) as bundles:

                async def writer(i: int, s: Stores) -> None:
                    for j in range(per):
                        await s.conversations.append_messages(
                            key, "p", [Message(f"c{i}-{j}", "user", j)]
                        )

                for outcome in await race([partial(writer, i, s) for i, s in enumerate(bundles)]):
                    if outcome.error is not None:
                        raise outcome.error
            stored = await stores.conversations.read_messages(key, "p")
            ids = [m.id for m in stored]
            assert len(ids) == n * per == len(set(ids)), (
                f"{n} clients appended {per} messages each; the transcript holds {len(ids)} "
                f"({len(set(ids))} distinct)"
            )
            assert [m.seq for m in stored] == list(range(n * per))
            for i in range(n):
                mine = [x for x in ids if x.startswith(f"c{i}-")]
                assert mine == [f"c{i}-{j}" for j in range(per)], f"client {i}'s order: {mine}"

        self.run(backend, body)

    @promise("conversations.append.idempotent_race")
    def test_same_id_lands_once(self, backend: BackendUnderTest) -> None:
        n, rounds = self.profile.clients, self.profile.rounds
        key = self.key()

        async def body(stores: Stores) -> None:
            async with clients(backend, stores, n) as bundles:
                for r in range(rounds):
                    batch = [Message(f"same-{r}", "user", r), Message(f"same-{r}b", "assistant", r)]
                    outcomes = await race(
                        [partial(s.conversations.append_messages, key, "p", batch) for s in bundles]
                    )
                    assert all(o.ok for o in outcomes), describe(outcomes)
                    landed = sum(len(o.value) for o in outcomes)
                    assert landed == 2, f"round {r}: {landed} messages reported appended, not 2"
                    ids = [m.id for m in await stores.conversations.read_messages(key, "p")]
                    assert len(ids) == 2 * (r + 1) == len(set(ids)), f"round {r}: {ids}"

        self.run(backend, body)

    @promise("conversations.truncate.pop_race")
    def test_pops_racing_appends_lose_nothing(self, backend: BackendUnderTest) -> None:
        """Poppers take the last message off as a framework's ``pop_item`` does (``tail(1)``,
        then ``truncate(last, cut="before", expected_tail=last)``, read again when stale)
        while appenders add messages: every appended message that was not popped is there,
        in its appender's order, and each pop removed its own message and nothing else."""
        n, per = max(2, self.profile.clients // 2), max(3, self.profile.rounds)
        key = self.key()

        async def body(stores: Stores) -> None:
            seed = [Message(f"seed-{x}", "user", x) for x in range(n)]
            await stores.conversations.append_messages(key, "p", seed)
            appended = [m.id for m in seed]
            popped: list[str] = []
            async with clients(backend, stores, 2 * n) as bundles:

                async def appender(i: int, s: Stores) -> None:
                    for j in range(per):
                        batch = [Message(f"a{i}-{j}-{x}", "assistant", x) for x in range(1 + j % 2)]
                        await s.conversations.append_messages(key, "p", batch)
                        appended.extend(m.id for m in batch)

                # A correct backend refuses a pop as stale only after another writer moved
                # the tail, so no pop is refused more times in a row than the race writes;
                # a broken one could refuse it forever (a livelock, not a verdict).
                writes = 2 * n * per

                async def popper(s: Stores) -> None:
                    for _ in range(per):
                        for attempt in itertools.count():
                            assert attempt <= writes, (
                                f"a pop's truncate was refused as stale {attempt} times in a "
                                f"row, more than the race's {writes} writes could move the "
                                "tail: the tail `tail()` reads and the one truncate checks "
                                "disagree"
                            )
                            found = await s.conversations.tail(key, "p", 1)
                            assert found is not None, "tail of a live conversation returned None"
                            if not found.messages:
                                break  # nothing to pop now
                            last = found.messages[-1].id
                            try:
                                removed = await s.conversations.truncate(
                                    key, "p", last, cut="before", expected_tail=last
                                )
                            except StaleWriteError as exc:
                                check_stale_in_race(exc, last, "a pop's truncate")
                                continue  # another writer moved the tail: read it again
                            assert removed == 1, f"popping the tail {last!r} removed {removed}"
                            popped.append(last)
                            break

                work = [partial(appender, i, s) for i, s in enumerate(bundles[:n])]
                work += [partial(popper, s) for s in bundles[n:]]
                for outcome in await race(work):
                    if outcome.error is not None:
                        raise outcome.error
            assert len(popped) == len(set(popped)), f"a message was popped twice: {popped}"
            assert set(popped) <= set(appended), f"popped what was never appended: {popped}"
            stored = await stores.conversations.read_messages(key, "p")
            ids = [m.id for m in stored]
            gone = set(popped)
            want = [x for x in appended if x not in gone]
            lost = sorted(set(want) - set(ids))
            assert not lost, f"appended, never popped, and not in the transcript: {lost}"
            assert sorted(ids) == sorted(want), f"the transcript {ids} is not {want} in some order"
            assert [m.seq for m in stored] == list(range(len(ids)))
            for i in range(n):
                mine = [x for x in ids if x.startswith(f"a{i}-")]
                assert mine == [x for x in want if x.startswith(f"a{i}-")], (
                    f"appender {i}'s messages out of order: {mine}"
                )
            info = await stores.conversations.get_conversation(key, "p")
            assert info is not None
            assert (info.message_count, info.tail_message_id) == (
                len(ids),
                ids[-1] if ids else None,
            ), f"{info} does not describe the transcript {ids}"

        self.run(backend, body)

    @promise("conversations.tail.snapshot")
    def test_tail_is_one_snapshot(self, backend: BackendUnderTest) -> None:
        """Writers append (each append naming its last row in the conversation's metadata)
        while readers take ``tail``: every read's rows are contiguous, end at the tail and
        count its metadata names, and that metadata is the one written with those rows."""
        n, per = max(2, self.profile.clients // 2), max(6, 2 * self.profile.rounds)
        key = self.key()

        async def body(stores: Stores) -> None:
            await stores.conversations.append_messages(
                key, "p", [Message("seed", "user", 0)], metadata={"last": "seed"}
            )
            seen: list[str] = []
            async with clients(backend, stores, 2 * n) as bundles:

                async def writer(i: int, s: Stores) -> None:
                    for j in range(per):
                        batch = [Message(f"w{i}-{j}-{x}", "assistant", x) for x in range(1 + j % 3)]
                        await s.conversations.append_messages(
                            key, "p", batch, metadata={"last": batch[-1].id}
                        )

                async def reader(i: int, s: Stores) -> None:
                    for j in range(per):
                        limit = 1 + (i + j) % 4
                        found = await s.conversations.tail(key, "p", limit)
                        assert found is not None, "tail of a live conversation returned None"
                        info, rows = found.info, found.messages
                        count = info.message_count
                        where = f"tail({limit}) read {[(m.seq, m.id) for m in rows]} with {info}"
                        assert len(rows) == min(limit, count), where
                        assert [m.seq for m in rows] == list(range(count - len(rows), count)), where
                        assert rows[-1].id == info.tail_message_id, where
                        assert info.metadata.get("last") == rows[-1].id, (
                            f"{where}: the metadata is not the one written with these rows"
                        )
                        seen.append(rows[-1].id)

                work = [partial(writer, i, s) for i, s in enumerate(bundles[:n])]
                work += [partial(reader, i, s) for i, s in enumerate(bundles[n:])]
                for outcome in await race(work):
                    if outcome.error is not None:
                        raise outcome.error
            assert seen, "no tail was read"

        self.run(backend, body)

    @promise("pause_tokens.claim_once")
    def test_token_claimed_once(self, backend: BackendUnderTest) -> None:
        n, rounds = self.profile.clients, self.profile.rounds
        key = self.key()

        async def body(stores: Stores) -> None:
            later = await stores.now() + timedelta(hours=1)
            async with clients(backend, stores, n) as bundles:
                for r in range(rounds):
                    await stores.pause_tokens.put(f"tok{r}", key, "p", {"round": r}, later)
                    outcomes = await race(
                        [partial(s.pause_tokens.claim, f"tok{r}", key, "p") for s in bundles]
                    )
                    got = [o.value for o in outcomes if o.ok]
                    assert got == [{"round": r}], (
                        f"round {r}: {len(got)} of {n} claims got the payload: {describe(outcomes)}"
                    )
                    assert all(
                        isinstance(o.error, AlreadyClaimedError) for o in outcomes if not o.ok
                    ), describe(outcomes)

        self.run(backend, body)

    @promise("supervision.linearizable")
    def test_supervision_history_is_linearizable(self, backend: BackendUnderTest) -> None:
        def step(state: Any, call: Any) -> tuple[Any, Any]:
            row, fence = state
            if call[0] == "read":
                return (row, fence), state
            if call[0] == "delete":
                if row == call[1:]:
                    return True, (None, fence)
                return False, state
            _, expected, mid, epoch = call
            current = None if row is None else row[1]
            if current != expected or epoch < fence:
                return False, state
            return True, ((mid, epoch), max(fence, epoch))

        async def op(s: Stores, key: ConversationKey, rng: random.Random) -> Planned:
            kind = rng.choice(("cas", "cas", "cas", "read", "delete"))
            if kind == "read":

                async def read() -> Any:
                    view = await s.supervision.read(key, "p")
                    return view.row and (view.row.message_id, view.row.epoch), view.fence

                return ("read",), read
            if kind == "delete":
                mid, epoch = rng.choice("ab"), rng.randint(1, 4)
                return ("delete", mid, epoch), lambda: s.supervision.delete(key, "p", mid, epoch)
            expected = rng.choice((None, 1, 2, 3))
            mid, epoch = rng.choice("ab"), (expected or 0) + rng.choice((0, 1, 1))
            row = SupervisionRow("running", mid, epoch)
            return ("cas", expected, mid, epoch), lambda: s.supervision.compare_and_swap(
                key, "p", expected, row
            )

        self._check_histories(backend, step, (None, 0), op)

    @promise("supervision.cas_many.linearizable")
    def test_batched_supervision_history_is_linearizable(self, backend: BackendUnderTest) -> None:
        """Batch rows, single CAS and reads on one key: each batch row is one CAS in the
        key's history (the batch's other rows, on the client's own keys, are noise)."""

        def step(state: Any, call: Any) -> tuple[Any, Any]:
            row, fence = state
            if call[0] == "read":
                return (row, fence), state
            _, expected, mid, epoch = call
            current = None if row is None else row[1]
            if current != expected or epoch < fence:
                return False, state
            return True, ((mid, epoch), max(fence, epoch))

        async def op(s: Stores, key: ConversationKey, rng: random.Random) -> Planned:
            kind = rng.choice(("many", "many", "many", "cas", "read"))
            if kind == "read":

                async def read() -> Any:
                    view = await s.supervision.read(key, "p")
                    return view.row and (view.row.message_id, view.row.epoch), view.fence

                return ("read",), read
            expected = rng.choice((None, 1, 2, 3))
            mid, epoch = rng.choice("ab"), (expected or 0) + rng.choice((0, 1, 1))
            row = SupervisionRow("running", mid, epoch)
            if kind == "cas":
                return ("cas", expected, mid, epoch), lambda: s.supervision.compare_and_swap(
                    key, "p", expected, row
                )
            noise = ConversationKey(key.tenant, f"{key.session_id}-noise-{rng.getrandbits(40)}")
            swaps = [Swap(key, "p", expected, row), Swap(noise, "p", None, row)]
            if rng.random() < 0.5:
                swaps.reverse()

            async def many() -> Any:
                outcomes = await s.supervision.compare_and_swap_many(swaps)
                mine = outcomes[[sw.key for sw in swaps].index(key)]
                return mine.result()

            return ("cas", expected, mid, epoch), many

        self._check_histories(backend, step, (None, 0), op)

    @promise("state.linearizable")
    def test_state_history_is_linearizable(self, backend: BackendUnderTest) -> None:
        def step(state: Any, call: Any) -> tuple[Any, Any]:
            value, fence = state
            if call[0] == "load":
                return value, state
            _, tag, epoch = call
            if epoch < fence:
                return "fenced", state
            return "ok", (tag, epoch)

        async def op(s: Stores, key: ConversationKey, rng: random.Random) -> Planned:
            if rng.random() < 0.4:

                async def load() -> Any:
                    return (await s.state.load(key, "p")).get("tag")

                return ("load",), load
            tag, epoch = f"v{rng.randrange(10**6)}", rng.randint(0, 4)

            async def save() -> str:
                try:
                    await s.state.save(key, "p", {"tag": tag}, epoch=epoch)
                except FencedError as exc:
                    check_fenced(exc, epoch, "a fenced state.save")
                    return "fenced"
                return "ok"

            return ("save", tag, epoch), save

        self._check_histories(backend, step, (None, 0), op)

    @promise("conversations.linearizable")
    def test_transcript_history_is_linearizable(self, backend: BackendUnderTest) -> None:
        def step(tail: Any, call: Any) -> tuple[Any, Any]:
            if call[0] == "tail":
                return tail, tail
            _, expected, mid = call
            if expected != tail:
                return "stale", tail
            return "ok", mid

        async def tail_of(s: Stores, key: ConversationKey) -> str | None:
            info = await s.conversations.get_conversation(key, "p")
            return None if info is None else info.tail_message_id

        async def op(s: Stores, key: ConversationKey, rng: random.Random) -> Planned:
            if rng.random() < 0.3:
                return ("tail",), lambda: tail_of(s, key)
            seen = await tail_of(s, key)
            mid = f"m{rng.randrange(10**9)}"

            async def append() -> str:
                try:
                    await s.conversations.append_messages(
                        key, "p", [Message(mid, "user", 0)], expected_tail=seen
                    )
                except StaleWriteError as exc:
                    check_stale_in_race(exc, seen, "a conditional append")
                    return "stale"
                return "ok"

            return ("append", seen, mid), append

        self._check_histories(backend, step, None, op)

    def _check_histories(
        self,
        backend: BackendUnderTest,
        step: Callable[[Any, Any], tuple[Any, Any]],
        initial: Any,
        op: Callable[[Stores, ConversationKey, random.Random], Awaitable[Planned]],
    ) -> None:
        """Record concurrent histories on fresh keys and check each for linearizability.

        ``op`` does any preparation (such as reading the tail it will expect) and returns
        the call's description and a thunk; only the thunk is timed.
        """
        n = min(8, self.profile.clients)
        histories = max(2, self.profile.rounds // 2)

        async def body(stores: Stores) -> None:
            async with clients(backend, stores, n) as bundles:
                for h in range(histories):
                    seed = seeds.rng(f"{step.__qualname__}:{h}").getrandbits(32)
                    key = self.key(f"history-{h}")
                    history: list[Operation] = []

                    async def client(
                        i: int,
                        s: Stores,
                        key: ConversationKey,
                        rng: random.Random,
                        history: list[Operation],
                    ) -> None:
                        for _ in range(self.profile.history_ops):
                            call, thunk = await op(s, key, rng)
                            out = await capture(thunk())
                            if out.error is not None:
                                raise out.error
                            history.append(
                                Operation(i, call, out.value, out.invoked, out.completed)
                            )

                    outcomes = await race(
                        [
                            partial(client, i, s, key, random.Random(seed * 1000 + i), history)
                            for i, s in enumerate(bundles)
                        ]
                    )
                    for outcome in outcomes:
                        if outcome.error is not None:
                            raise outcome.error  # a client that failed recorded no history
                    assert len(history) == n * self.profile.history_ops, (
                        f"history {h}: {len(history)} operations recorded, "
                        f"{n * self.profile.history_ops} planned"
                    )
                    verdict = check(history, initial, step)
                    assert verdict.linearizable, (
                        f"history {h} (seed {seed}, {len(history)} operations by {n} clients) is "
                        f"not linearizable:\n{format_history(history)}"
                    )

        self.run(backend, body)
