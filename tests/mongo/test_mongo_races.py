"""The windows between a read and the conditional write that should close it, driven
deliberately: another writer's steps run at a chosen point between one bundle's requests
to the server (:func:`hooked`), so each interleaving happens every run, not by luck.

Every document a write adds before its commit carries the header ``rev`` it read (``b``)
and the attempt's fresh writer nonce (``w``). A document at the header's rev or above is
in flight and is left to its writer; one below it that the header does not cover can never
be committed and is garbage, removed by its ``_id`` alone; a writer that lost its commit
removes only its own, by its nonce.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest

from agentstores.errors import ConflictError, FencedError
from agentstores.keys import ConversationKey
from agentstores.models import Message
from agentstores_mongo.stores import MongoStores
from tests.servers.mongo import Installation

P = "p"
pytestmark = pytest.mark.timeout(120)

Step = Callable[[], Awaitable[None]]

REQUESTS = frozenset(
    {"find_one", "insert_one", "insert_many", "update_one", "update_many"}
    | {"delete_one", "delete_many"}
)
"""The collection methods that are one request each (a ``find`` cursor passes untouched)."""


Match = Callable[[tuple[Any, ...]], bool]


class Steps:
    """One-shot steps run around a bundle's requests: :meth:`before` runs ``step`` before
    the next call of ``method`` (``"tokens.find_one"``, or ``"*"`` for any) whose
    arguments ``match`` accepts, :meth:`after` once it returned."""

    def __init__(self) -> None:
        self.queue: list[tuple[str, str, Step, Match | None]] = []

    def before(self, method: str, step: Step, match: Match | None = None) -> None:
        self.queue.append(("before", method, step, match))

    def after(self, method: str, step: Step, match: Match | None = None) -> None:
        self.queue.append(("after", method, step, match))

    async def run(self, when: str, method: str, args: tuple[Any, ...]) -> None:
        for i, (w, m, step, match) in enumerate(self.queue):
            if w == when and m in (method, "*") and (match is None or match(args)):
                del self.queue[i]
                await step()
                return


class _Collection:
    def __init__(self, inner: Any, name: str, steps: Steps) -> None:
        self._inner, self._name, self._steps = inner, name, steps

    def __getattr__(self, attr: str) -> Any:
        target = getattr(self._inner, attr)
        if attr not in REQUESTS:
            return target
        method = f"{self._name}.{attr}"

        async def call(*args: Any, **kwargs: Any) -> Any:
            await self._steps.run("before", method, args)
            result = await target(*args, **kwargs)
            await self._steps.run("after", method, args)
            return result

        return call


def hooked(stores: MongoStores) -> Steps:
    """Steps to run between ``stores``' requests (the server sees every request as sent)."""
    steps = Steps()
    for name in ("keys", "messages", "state", "tokens"):
        setattr(stores.ctx, name, _Collection(getattr(stores.ctx, name), name, steps))
    return steps


def _is_commit(args: tuple[Any, ...]) -> bool:
    """Whether a header update is a commit (it sets the writer nonce ``lw``), not a turn."""
    return len(args) > 1 and "lw" in args[1].get("$set", {})


def paused_before_commit(steps: Steps) -> tuple[asyncio.Event, asyncio.Event]:
    """Pause the bundle's next commit until the second event is set; the first is set
    once it is paused there."""
    reached, go = asyncio.Event(), asyncio.Event()

    async def hold() -> None:
        reached.set()
        await go.wait()

    steps.before("keys.update_one", hold, _is_commit)
    return reached, go


async def dead_writer(steps: Steps, call: Awaitable[Any]) -> None:
    """Run ``call`` on a hooked bundle until it is about to commit, then cancel it there:
    a process that died between the documents it inserted and its commit."""
    died, _ = paused_before_commit(steps)
    doomed = asyncio.ensure_future(call)
    await asyncio.wait_for(died.wait(), 30)
    doomed.cancel()
    with pytest.raises(asyncio.CancelledError):
        await doomed


def _key() -> ConversationKey:
    return ConversationKey("races", uuid.uuid4().hex)


async def _expiry(stores: MongoStores) -> Any:
    return await stores.now() + timedelta(minutes=5)


async def test_a_stale_writer_leaves_a_newer_writers_token_in_flight(
    installed: Installation,
) -> None:
    """Two puts of one pause token id: the first read the header, then another write
    committed and a second put read the newer header and inserted its token. The first
    finds that token above the rev it read: in flight (its own header is stale), not
    garbage. Removing it would lose the second put once it commits (acknowledged, then
    nothing to claim) and let both puts succeed."""
    key = _key()
    async with (
        MongoStores(installed.url) as live,
        MongoStores(installed.url) as first,
        MongoStores(installed.url) as second,
    ):
        expires = await _expiry(live)
        await live.conversations.append_messages(key, P, [Message("a", "user", 0)])
        first_steps, second_steps = hooked(first), hooked(second)
        at_commit, go = paused_before_commit(second_steps)
        newer: asyncio.Future[None] | None = None

        async def newer_put_in_flight() -> None:
            nonlocal newer
            await live.conversations.append_messages(key, P, [Message("b", "user", 1)])
            newer = asyncio.ensure_future(second.pause_tokens.put("t", key, P, "second", expires))
            await at_commit.wait()

        async def newer_put_commits() -> None:
            go.set()
            assert newer is not None
            await newer

        async def then_after_the_next_request() -> None:
            first_steps.after("*", newer_put_commits)

        first_steps.before("tokens.find_one", newer_put_in_flight)
        first_steps.after("tokens.find_one", then_after_the_next_request)
        with pytest.raises(ConflictError, match="already exists"):
            await first.pause_tokens.put("t", key, P, "first", expires)
        assert newer is not None and newer.done()
        assert await live.pause_tokens.claim("t", key, P) == "second"


async def test_a_dead_writers_token_is_cleared_and_no_other(installed: Installation) -> None:
    """A put that died between inserting its token and committing it leaves the token in
    the next put's way, below the header's rev: garbage, removed by its ``_id``. Another
    key's token, inserted earlier and still in flight, is left to its writer, whose put
    then commits and is claimable."""
    key, other = _key(), _key()
    async with (
        MongoStores(installed.url) as live,
        MongoStores(installed.url) as dying,
        MongoStores(installed.url) as elsewhere,
    ):
        expires = await _expiry(live)
        await live.conversations.append_messages(key, P, [Message("a", "user", 0)])
        at_commit, go = paused_before_commit(hooked(elsewhere))
        in_flight = asyncio.ensure_future(
            elsewhere.pause_tokens.put("u", other, P, "kept", expires)
        )
        await asyncio.wait_for(at_commit.wait(), 30)

        await dead_writer(hooked(dying), dying.pause_tokens.put("t", key, P, "dead", expires))

        await live.conversations.append_messages(key, P, [Message("b", "user", 1)])
        await live.pause_tokens.put("t", key, P, "next", expires)
        go.set()
        await in_flight
        assert await live.pause_tokens.claim("t", key, P) == "next"
        assert await live.pause_tokens.claim("u", other, P) == "kept", (
            "clearing a dead writer's token removed another key's token in flight"
        )


async def test_a_save_that_lost_its_commit_removes_only_its_own_version(
    installed: Installation,
) -> None:
    """A state save whose commit lost to a newer save (one that also raised the fence)
    removes the version it wrote, by its nonce, and is then fenced out: the newer save's
    version, now the committed one, stays readable."""
    key = _key()
    async with MongoStores(installed.url) as live, MongoStores(installed.url) as stale:
        await live.state.save(key, P, {"v": 0}, epoch=1)

        async def newer_save() -> None:
            await live.state.save(key, P, {"v": 2}, epoch=2)

        hooked(stale).before("state.insert_one", newer_save)
        with pytest.raises(FencedError):
            await stale.state.save(key, P, {"v": 1}, epoch=1)
        assert await live.state.load(key, P) == {"v": 2}


async def test_a_dead_writers_message_is_cleared_only_as_it_was_read(
    installed: Installation,
) -> None:
    """Two appenders meet a dead writer's message in their way, below the header's rev.
    The second clears it and inserts its own message at that position before the first
    gets to clear what it read: the first's removal names the rev it read the leftover
    at, so it misses the second's message, which commits; removed by ``_id`` alone, the
    second's acknowledged message would be lost."""
    key = _key()
    async with (
        MongoStores(installed.url) as live,
        MongoStores(installed.url) as dying,
        MongoStores(installed.url) as first,
        MongoStores(installed.url) as second,
    ):
        await live.conversations.append_messages(key, P, [Message("a", "user", 0)])
        await dead_writer(
            hooked(dying), dying.conversations.append_messages(key, P, [Message("dead", "user", 1)])
        )
        await live.state.save(key, P, {"moved": True})  # the header passes the leftover's rev
        first_steps = hooked(first)
        at_commit, go = paused_before_commit(hooked(second))
        newer: asyncio.Future[Any] | None = None

        async def second_clears_and_inserts() -> None:
            nonlocal newer
            call = second.conversations.append_messages(key, P, [Message("second", "user", 2)])
            newer = asyncio.ensure_future(call)
            await asyncio.wait_for(at_commit.wait(), 30)

        async def second_commits() -> None:
            go.set()
            assert newer is not None
            await newer

        first_steps.before("messages.delete_one", second_clears_and_inserts)
        first_steps.after("messages.delete_one", second_commits)
        await first.conversations.append_messages(key, P, [Message("first", "user", 3)])
        assert [m.id for m in await live.conversations.read_messages(key, P)] == [
            "a",
            "second",
            "first",
        ]


async def test_a_put_that_lost_its_commit_removes_only_its_own_token(
    installed: Installation,
) -> None:
    """A put stalled before its commit is retired by a second put of the same token id,
    which clears the first's token as garbage and inserts its own. The first's commit then
    fails, and its clean-up names its own nonce: the second's token, in flight under the
    same (generation, token id), stays and commits, and the first put is refused."""
    key = _key()
    async with (
        MongoStores(installed.url) as live,
        MongoStores(installed.url) as first,
        MongoStores(installed.url, stall_after=0.05) as second,
    ):
        expires = await _expiry(live)
        await live.conversations.append_messages(key, P, [Message("a", "user", 0)])
        first_steps = hooked(first)
        first_at_commit, first_go = paused_before_commit(first_steps)
        second_at_commit, second_go = paused_before_commit(hooked(second))

        stalled = asyncio.ensure_future(first.pause_tokens.put("t", key, P, "first", expires))
        await asyncio.wait_for(first_at_commit.wait(), 30)
        newer = asyncio.ensure_future(second.pause_tokens.put("t", key, P, "second", expires))
        await asyncio.wait_for(second_at_commit.wait(), 30)

        async def second_commits() -> None:
            second_go.set()
            await newer

        first_steps.after("tokens.delete_one", second_commits)
        first_go.set()
        with pytest.raises(ConflictError, match="already exists"):
            await stalled
        assert newer.done()
        assert await live.pause_tokens.claim("t", key, P) == "second"
