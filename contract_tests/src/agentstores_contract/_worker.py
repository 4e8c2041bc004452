"""One racing client in its own OS process (used by the multi-process contract).

``python -m agentstores_contract._worker MODE TENANT SESSION WORKER ROUNDS``: reads the
backend URL from the first line of stdin (never the command line, which other local users
can read), opens it, prints ``ready``, waits for a line on stdin, races, prints one JSON
line.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from agentstores.errors import ErasedError, StaleWriteError
from agentstores.keys import ConversationKey
from agentstores.models import Message, SupervisionRow
from agentstores.plugins import create_stores


async def race_cas(stores: Any, key: ConversationKey, worker: str, rounds: int) -> list[int]:
    """Round r expects epoch r (no row for r = 0) and writes epoch r + 1."""
    won = []
    for r in range(rounds):
        row = SupervisionRow("running", worker, r + 1)
        if await stores.supervision.compare_and_swap(key, "p", r or None, row):
            won.append(r)
    return won


async def race_append(stores: Any, key: ConversationKey, worker: str, total: int) -> list[Any]:
    """Append on the tail last seen until the transcript holds ``total`` messages."""
    appended: list[list[Any]] = []
    n = 0
    while n < total * 100:
        info = await stores.conversations.get_conversation(key, "p")
        if info is not None and info.message_count >= total:
            return appended
        tail = None if info is None else info.tail_message_id
        mid = f"{worker}-{n}"
        n += 1
        try:
            await stores.conversations.append_messages(
                key, "p", [Message(mid, "user", worker)], expected_tail=tail
            )
        except StaleWriteError:
            continue
        appended.append([tail, mid])
    return appended


async def race_erasure(stores: Any, key: ConversationKey, worker: str, rounds: int) -> Any:
    """Append pairs until refused; ``w0`` erases the key after ``rounds`` of its own.
    Reports the appends that landed after this worker had already been refused."""
    appended: list[str] = []
    late: list[str] = []
    refused = 0
    erased = None
    for n in range(rounds * 200):
        mid = f"{worker}-{n}"
        pair = [Message(mid, "user", worker), Message(f"{mid}b", "assistant", worker)]
        try:
            await stores.conversations.append_messages(key, "p", pair)
        except ErasedError:
            refused += 1
            if refused > 3:
                break
            continue
        (late if refused or erased else appended).append(mid)
        if worker == "w0" and erased is None and len(appended) == rounds:
            erased = await stores.conversations.delete(key, "p")
    return {"appended": appended, "late": late, "refused": refused, "erased": erased}


async def write_and_exit(stores: Any, key: ConversationKey, worker: str) -> list[Any]:
    """Acknowledged writes in three stores; the process exits right after."""
    assert await stores.supervision.compare_and_swap(
        key, "p", None, SupervisionRow("running", worker, 1)
    )
    await stores.state.save(key, "p", {"written_by": worker}, epoch=1)
    await stores.conversations.append_messages(key, "p", [Message(worker, "user", worker)])
    return [worker]


async def main(argv: list[str]) -> None:
    mode, tenant, session, worker, rounds = argv
    key = ConversationKey(tenant, session)
    url = sys.stdin.readline().rstrip("\n")
    async with create_stores(url) as stores:
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        if mode == "cas":
            result: Any = await race_cas(stores, key, worker, int(rounds))
        elif mode == "erase":
            result = await race_erasure(stores, key, worker, int(rounds))
        elif mode == "append":
            result = await race_append(stores, key, worker, int(rounds))
        else:
            result = await write_and_exit(stores, key, worker)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
