"""With ``concurrent_requests``, an append and a read by index send requests that follow
from the header together with the header's own read, guessed from the version of it the
bundle saw last. These tests make the guess wrong (another bundle wrote in between) and
check that the answer is still right: an old id appended again is a no-op however stale
the guess, a read returns the message at the asked position, and a copy-out that lands
after an erasure's sweep is removed again."""

from __future__ import annotations

import asyncio
from typing import Any

from agentstores.errors import ErasedError
from agentstores.keys import ConversationKey
from agentstores.models import Message
from agentstores_s3 import RequestStats, S3Stores
from agentstores_s3.conversations import S3ConversationStore

KEY = ConversationKey("guess", "c")


def _msg(n: int) -> Message:
    return Message(f"m{n}", "user" if n % 2 == 0 else "assistant", {"n": n})


def test_stale_guess_keeps_old_ids_idempotent_and_reads_right(url: str) -> None:
    async def main() -> None:
        stats = RequestStats()
        async with S3Stores(url, stats=stats, concurrent_requests=True) as a, S3Stores(url) as b:
            for n in range(40):  # m0 .. m7 leave the 32-message window
                await a.conversations.append_messages(KEY, "p", [_msg(n)])
            await b.conversations.append_messages(KEY, "p", [_msg(40)])  # a's guess is stale
            assert await a.conversations.append_messages(KEY, "p", [_msg(3)]) == []
            await b.conversations.append_messages(KEY, "p", [_msg(41)])
            assert await a.conversations.append_messages(KEY, "p", [_msg(3), _msg(42)]) != []
            assert await a.conversations.append_messages(KEY, "p", [_msg(5)]) == []  # fresh guess
            await b.conversations.truncate(KEY, "p", "m20")  # a new run; a's guess is stale
            await a.conversations.append_messages(KEY, "p", [_msg(n) for n in range(50, 90)])
            ids = [m.id for m in await a.conversations.read_messages(KEY, "p")]
            assert ids == [f"m{n}" for n in [*range(20), *range(50, 90)]]
            assert await a.conversations.append_messages(KEY, "p", [_msg(4)]) == []
            assert await a.conversations.append_messages(KEY, "p", [_msg(51)]) == []
            await b.conversations.append_messages(KEY, "p", [_msg(90)])
            for index in (0, 5, 19, 20, 25, -1, -40):
                got = await a.conversations.get_transcript(KEY, "p", index=index)
                want = await b.conversations.get_transcript(KEY, "p", index=index)
                assert got == want and len(got) == 1, (index, got, want)

    asyncio.run(main())


def test_copy_out_landing_after_an_erasure_is_removed(url: str) -> None:
    """An erasure lands between an append's header read and its copy-out: the copies
    would outlive the erasure's sweep, so the append removes them when it finds the
    tombstone."""

    async def main() -> None:
        async with S3Stores(url, concurrent_requests=True) as a, S3Stores(url) as b:
            for n in range(33):
                await a.conversations.append_messages(KEY, "p", [_msg(n)])
            a.root.forget(KEY)  # the copy-out is sent after the header read, alone
            put = a.root.io.put
            erase = S3ConversationStore._erase.__wrapped__  # type: ignore[attr-defined]

            def put_after_erasure(name: str, body: bytes, **kwargs: Any) -> str | None:
                if "/m/" in name and not erased:
                    erased.append(erase(b.conversations, KEY, "p", None))
                return put(name, body, **kwargs)

            erased: list[bool] = []
            a.root.io.put = put_after_erasure  # type: ignore[method-assign]
            try:
                await a.conversations.append_messages(KEY, "p", [_msg(33)])
            except ErasedError:
                pass
            else:
                raise AssertionError("the append went through an erasure")
            assert erased == [True]
            kdir = a.root.key_dir(KEY)
            assert a.root.io.list(kdir) == [kdir + "h"]

    asyncio.run(main())


def test_append_guessing_from_an_erased_conversation_leaves_nothing(url: str) -> None:
    """A bundle remembers a conversation's header, another erases the conversation, and
    the first appends at once: its copy-outs, sent with the header read, are of the
    erased conversation's rows, and are removed when the read finds the tombstone."""

    async def main() -> None:
        stats = RequestStats()
        async with S3Stores(url, stats=stats, concurrent_requests=True) as a, S3Stores(url) as b:
            for n in range(33):
                await a.conversations.append_messages(KEY, "p", [_msg(n)])
            assert await b.conversations.delete(KEY, "p")
            stats.reset()
            try:
                await a.conversations.append_messages(KEY, "p", [_msg(33)])
            except ErasedError:
                pass
            else:
                raise AssertionError("the append went through an erasure")
            assert stats.puts == 2 and stats.deletes == 1, stats  # guessed copies, removed
            kdir = a.root.key_dir(KEY)
            assert a.root.io.list(kdir) == [kdir + "h"]

    asyncio.run(main())


def test_a_guess_from_a_header_appended_since_still_counts(url: str) -> None:
    """Another bundle appended a few messages since this one's last read: the id checks
    sent with the header read still count (everything that left the window since was in
    the window this bundle saw), so the append writes after one round, and an id that
    left meanwhile is still found."""

    async def main() -> None:
        stats = RequestStats()
        async with S3Stores(url, stats=stats, concurrent_requests=True) as a, S3Stores(url) as b:
            for n in range(40):  # a's header: m8 .. m39 in the window
                await a.conversations.append_messages(KEY, "p", [_msg(n)])
            for n in range(40, 44):  # m8 .. m11 leave the window
                await b.conversations.append_messages(KEY, "p", [_msg(n)])
            stats.reset()
            stored = await a.conversations.append_messages(KEY, "p", [_msg(9), _msg(99)])
            assert [m.id for m in stored] == ["m99"]
            # the header, m99's id check and the guessed copy-out of m8 (two objects)
            # together, then the header write: no GET of m9's id object, no second header
            # read, and m12 (which the guess did not copy) stays in the header a while
            assert (stats.gets, stats.puts) == (2, 3), stats.snapshot()
            for n in range(44, 80):  # more than a window: the next guess cannot count
                await b.conversations.append_messages(KEY, "p", [_msg(n)])
            assert await a.conversations.append_messages(KEY, "p", [_msg(50), _msg(100)]) != []
            ids = [m.id for m in await b.conversations.read_messages(KEY, "p")]
            assert ids == [f"m{n}" for n in [*range(44), 99, *range(44, 80), 100]]

    asyncio.run(main())


def test_rows_a_stale_guess_did_not_copy_out_stay_in_the_header(url: str) -> None:
    """The header moved since the version an append guessed from (another writer pushed
    rows out of the window): the rows that must leave now beyond what the guess copied
    out stay in the header (within twice the window) rather than cost the append a round
    of copies, and the next append copies them out with its header read."""

    async def main() -> None:
        async with S3Stores(url, concurrent_requests=True) as a, S3Stores(url) as b:
            for n in range(32):  # a full window
                await a.conversations.append_messages(KEY, "p", [_msg(n)])
            await b.conversations.append_messages(KEY, "p", [_msg(32), _msg(33)])
            await a.conversations.append_messages(KEY, "p", [_msg(34)])  # guessed m0's copy
            head, _ = a.root.load(KEY)
            assert head is not None and len(head["conv"]["p"]) == 33  # m2 held back
            await a.conversations.append_messages(KEY, "p", [_msg(35)])
            head, _ = a.root.load(KEY)
            assert head is not None and len(head["conv"]["p"]) == 32
            ids = [m.id for m in await b.conversations.read_messages(KEY, "p")]
            assert ids == [f"m{n}" for n in range(36)]
            for index in (0, 1, 2, 3, 4, -1):
                got = await a.conversations.get_transcript(KEY, "p", index=index)
                assert [m.id for m in got] == [ids[index]]

    asyncio.run(main())
