"""Transcripts past every size an adapter switches strategy at.

Adapters change paths as a transcript grows: a header that keeps only the latest ids, a
window of bytes, pages of 256 rows, copies in chunks of 500, purges in batches of 1,000,
probe tables that double. The model-based tests stay below all of those, so this one
grows a conversation past every length the backend declares
(``Stores.transcript_thresholds``, and at least 128) in batches of every awkward size
(one below, at and one above each power of two up to 256), with one message past 64 KiB,
a compaction and every role, and then drives each read, idempotent re-append,
conditional append, branch, truncate and erasure on both sides of those sizes. Every
call runs on the backend under test and on a fresh in-memory reference, and both must
answer the same.
"""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Awaitable, Callable, Hashable
from typing import Any

from agentstores.errors import AgentStoresError
from agentstores.keys import ConversationKey
from agentstores.memory.stores import MemoryStores
from agentstores.models import (
    ConversationInfo,
    ConversationTail,
    Message,
    Role,
    StoredMessage,
    TranscriptMessage,
)
from agentstores.stores import ConversationStore, Stores

from .backend import BackendUnderTest
from .base import ContractBase
from .promises import promise

OWNER = "p"
BATCHES = (1, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257)
"""Batch sizes of the growth, in order, as far as the thresholds need (1,495 in all)."""
ROLES: tuple[Role, ...] = ("user", "assistant", "tool", "assistant", "system", "other")
BIG_AT = 40
"""The message that carries more than 64 KiB of content."""


def _message(i: int, prefix: str = "m") -> Message:
    content: Any = {"n": i, "text": "x" * (70_000 if i == BIG_AT else i % 7)}
    return Message(f"{prefix}{i}", ROLES[i % 5 if i % 3 else 0], content, compaction=i == 200)


def _plain(value: Any) -> Hashable:
    """What both sides must agree on, without times (each store has its own clock)."""
    if isinstance(value, AgentStoresError):
        return ("error", type(value).__name__)
    if isinstance(value, StoredMessage):
        return (value.id, value.role, repr(value.content), repr(dict(value.metadata)),
                value.compaction, value.seq)  # fmt: skip
    if isinstance(value, TranscriptMessage):
        return (value.index, value.role, repr(value.content), value.id)
    if isinstance(value, ConversationInfo):
        return (value.key, value.message_count, value.tail_message_id, value.title)
    if isinstance(value, ConversationTail):
        return (_plain(value.info), _plain(value.messages))
    if isinstance(value, list | tuple):
        return tuple(_plain(v) for v in value)
    if isinstance(value, ConversationKey):
        return "key"  # a branch's new key differs per side; its content is compared after
    return repr(value)


def _conv(stores: Stores) -> ConversationStore:
    return stores.conversations


class _Both:
    """Runs each call on the backend and on the reference, and compares the answers."""

    def __init__(self, stores: Stores, reference: Stores) -> None:
        self.sides = (stores, reference)
        self.calls = 0

    async def __call__(self, what: str, call: Callable[..., Awaitable[Any]]) -> Any:
        """``call(stores)`` on each side; the answers (or errors), backend's first."""
        self.calls += 1
        answers = []
        for side in self.sides:
            try:
                answers.append(await call(side))
            except AgentStoresError as exc:
                answers.append(exc)
        got, want = (_plain(a) for a in answers)
        assert got == want, (
            f"{what}: the backend answered\n  {got!r:.600}\nthe reference\n  {want!r:.600}"
        )
        return answers


async def _reads(both: _Both, key: ConversationKey, count: int, label: str, *, every: bool) -> None:
    """Windows at the awkward offsets; ``every``: the whole-transcript reads too."""
    await both(f"{label}: get_conversation", lambda s: _conv(s).get_conversation(key, OWNER))
    for start, limit in ((0, 1), (31, 3), (250, 300), (511, 2), (999, 4), (count - 1, 5)):
        await both(
            f"{label}: read_messages start={start} limit={limit}",
            lambda s, a=start, b=limit: _conv(s).read_messages(key, OWNER, start=a, limit=b),
        )
    for limit in (1, 20, 257):
        await both(f"{label}: recent {limit}", lambda s, n=limit: _conv(s).recent(key, OWNER, n))
        await both(f"{label}: tail {limit}", lambda s, n=limit: _conv(s).tail(key, OWNER, n))
    if not every:
        return
    await both(f"{label}: read_messages", lambda s: _conv(s).read_messages(key, OWNER))
    await both(f"{label}: recent 1000", lambda s: _conv(s).recent(key, OWNER, 1000))
    await both(f"{label}: tail 1000", lambda s: _conv(s).tail(key, OWNER, 1000))
    await both(f"{label}: history", lambda s: _conv(s).history(key, OWNER))
    for index, speaker in ((0, "all"), (33, "user"), (1001, "all"), (-1, "assistant"),
                           (-300, "user"), (count, "all")):  # fmt: skip
        await both(
            f"{label}: get_transcript index={index} speaker={speaker}",
            lambda s, i=index, sp=speaker: _conv(s).get_transcript(key, OWNER, index=i, speaker=sp),
        )
    await both(
        f"{label}: get_transcript limit=700 speaker=user",
        lambda s: _conv(s).get_transcript(key, OWNER, speaker="user", limit=700),
    )


MINIMUM = 128
"""Grown at least this far whatever a backend declares (a batch size of many)."""


def growth(thresholds: tuple[int, ...]) -> tuple[int, ...]:
    """The batch sizes, in order, that take a transcript past every threshold."""
    target = max((MINIMUM, *thresholds)) + 1
    out: list[int] = []
    for size in BATCHES:
        out.append(size)
        if sum(out) > target:
            return tuple(out)
    raise AssertionError(f"no growth in {BATCHES} passes {target} messages")


class LongTranscriptContract(ContractBase):
    @promise("conversations.long")
    def test_transcripts_past_every_threshold(self, backend: BackendUnderTest) -> None:
        async def body(stores: Stores) -> None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the reference says it is in-memory
                reference = MemoryStores(f"memory://reference-{uuid.uuid4().hex}")
            async with reference:
                batches = growth(type(stores).transcript_thresholds)
                await _drive(_Both(stores, reference), self.key("long"), batches)

        self.run(backend, body)


async def _drive(both: _Both, key: ConversationKey, batches: tuple[int, ...]) -> None:
    count = 0
    for size in batches:
        batch = [_message(i) for i in range(count, count + size)]
        expected = None if count == 0 else f"m{count - 1}"
        await both(
            f"append {size} after {count}",
            lambda s, b=batch, e=expected: _conv(s).append_messages(key, OWNER, b, expected_tail=e),
        )
        count += size
        if size in (33, 129):
            await _reads(both, key, count, f"at {count}", every=False)
    await _reads(both, key, count, f"at {count}", every=True)
    middle, late = count // 2, count - count // 4
    await both(
        "re-append the first id", lambda s: _conv(s).append_messages(key, OWNER, [_message(0)])
    )
    await both(
        "re-append an id from the middle, conditionally on an old tail",
        lambda s: _conv(s).append_messages(key, OWNER, [_message(middle)], expected_tail="m3"),
    )
    await both(
        "re-append ids of every batch",
        lambda s: _conv(s).append_messages(
            key, OWNER, [_message(i) for i in (2, 64, middle, count - 1)]
        ),
    )
    await both(
        "append on an old tail",
        lambda s: _conv(s).append_messages(
            key, OWNER, [_message(0, "n")], expected_tail=f"m{late}"
        ),
    )
    await both(
        "append with an old id among new ones",
        lambda s: _conv(s).append_messages(key, OWNER, [_message(1, "n"), _message(5)]),
    )
    for at in ("m10", f"m{middle}", f"m{count - 1}"):
        made = await both(f"branch at {at}", lambda s, a=at: _conv(s).branch(key, OWNER, a))
        forks = dict(zip(both.sides, made, strict=True))
        await both(f"the branch at {at}", lambda s, f=forks: _contents(s, f[s]))
    await both(
        f"truncate after m{late}", lambda s: _conv(s).truncate(key, OWNER, f"m{late}", cut="after")
    )
    await _reads(both, key, late + 1, f"cut to {late + 1}", every=False)
    await both("truncate at m60", lambda s: _conv(s).truncate(key, OWNER, "m60"))
    await _reads(both, key, 61, "cut to 60", every=False)
    await both(
        "append past the cut again, with removed ids",
        lambda s: _conv(s).append_messages(key, OWNER, [_message(i) for i in range(59, 140)]),
    )
    await _reads(both, key, 140, "regrown", every=True)
    await both("erase", lambda s: _conv(s).delete(key, OWNER))
    await both("read after erasure", lambda s: _conv(s).read_messages(key, OWNER))
    await both(
        "append after erasure", lambda s: _conv(s).append_messages(key, OWNER, [_message(0, "z")])
    )


async def _contents(stores: Stores, fork: ConversationKey) -> list[tuple[str, Any]]:
    return [(m.role, m.content) for m in await stores.conversations.read_messages(fork, OWNER)]
