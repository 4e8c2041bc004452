"""Worker processes for the file backend's multi-process tests.

``python -m tests.file._worker race URL FACTORY TENANT SESSION GO_FILE ATTEMPTS OUT``
    waits for GO_FILE, then loops: read the supervision row, then heartbeat it (CAS to
    the same epoch), append a message to the conversation (a write that replaces the
    header and keeps the epoch), or take it over (CAS to the next epoch); writes the
    expectations whose takeover it won (JSON) to OUT.

``python -m tests.file._worker write URL WORKER LOG``
    a writer for the crash loop: appends to a shared conversation, CASes, saves state,
    puts recordings and appends/truncates its own conversation in a tight loop until
    killed. Before each call it logs ``begin <op>`` and after it ``ok``, so the checker
    knows what was acknowledged and what was in flight when the SIGKILL came.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
import sys
import time
from typing import Any, TextIO

from agentstores.errors import AgentStoresError
from agentstores.keys import ConversationKey
from agentstores.models import Message, RecordedEvent, SupervisionRow
from agentstores.stores import Stores

SHARED = ConversationKey("crash", "shared")
PRINCIPAL = "writer"


def own_key(worker: int) -> ConversationKey:
    return ConversationKey("crash", f"worker-{worker}")


def padded(worker: int, n: int, rng: random.Random) -> dict[str, Any]:
    """A body that proves itself whole: its pad's length varies and its digest is inside."""
    pad = "".join(rng.choice("abcdef") for _ in range(rng.randrange(1, 3000)))
    return {"w": worker, "n": n, "pad": pad, "sum": hashlib.sha256(pad.encode()).hexdigest()}


def whole(body: Any) -> bool:
    return (
        isinstance(body, dict) and hashlib.sha256(body["pad"].encode()).hexdigest() == body["sum"]
    )


def _load(spec: str) -> Any:
    module, _, attr = spec.partition(":")
    return getattr(__import__(module, fromlist=[attr]), attr)


def _wait_for(path: str) -> None:
    while not os.path.exists(path):
        time.sleep(0.001)


async def race(
    url: str, factory: str, tenant: str, session: str, go: str, attempts: int
) -> dict[str, Any]:
    key = ConversationKey(tenant, session)
    stores: Stores = _load(factory)(url)
    won: list[int | None] = []
    errors: list[str] = []
    rng = random.Random()
    async with stores:
        await asyncio.to_thread(_wait_for, go)
        for _ in range(attempts):
            try:
                view = await stores.supervision.read(key, "racer")
                expected = view.row.epoch if view.row is not None else None
                pick = rng.random()
                if expected is not None and pick < 0.25:
                    # A heartbeat: same epoch, fresh stamp (written in place).
                    row = SupervisionRow("running", "turn", expected)
                    await stores.supervision.compare_and_swap(key, "racer", expected, row)
                    continue
                if expected is not None and pick < 0.5:
                    # An append: the header is replaced, the epoch kept.
                    message = Message(f"m{rng.getrandbits(64):x}", "assistant", "x")
                    await stores.conversations.append_messages(key, "racer", [message])
                    continue
                row = SupervisionRow("running", "turn", (expected or 0) + 1)
                if await stores.supervision.compare_and_swap(key, "racer", expected, row):
                    won.append(expected)
            except AgentStoresError as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
    return {"won": won, "errors": errors}


async def write(url: str, worker: int, log: TextIO) -> None:
    from agentstores_file.stores import FileStores

    rng = random.Random(time.time_ns() ^ worker)
    mine = own_key(worker)
    async with FileStores(url) as stores:
        conv = stores.conversations
        state = await stores.state.load(mine, PRINCIPAL)
        n = int(state.get("n", 0)) if state else 0
        recorded = await stores.recording.read(mine, PRINCIPAL)
        rec_n = recorded.index if recorded is not None else 0
        pairs = len(await conv.read_messages(mine, PRINCIPAL)) // 2
        print("ready", flush=True)
        while True:
            n += 1
            op = rng.randrange(6)
            if op == 0:
                mid = f"w{worker}-{time.time_ns()}"
                log.write(f"begin append {mid}\n")
                await conv.append_messages(
                    SHARED, PRINCIPAL, [Message(mid, "user", padded(worker, n, rng))]
                )
            elif op == 1:
                view = await stores.supervision.read(mine, PRINCIPAL)
                epoch = view.row.epoch if view.row is not None else None
                log.write(f"begin cas {(epoch or 0) + 1}\n")
                row = SupervisionRow("running", "turn", (epoch or 0) + 1)
                if not await stores.supervision.compare_and_swap(mine, PRINCIPAL, epoch, row):
                    raise SystemExit("a CAS from the epoch just read failed with one writer")
            elif op == 2:
                log.write(f"begin state {n}\n")
                await stores.state.save(mine, PRINCIPAL, padded(worker, n, rng))
            elif op == 3:
                rec_n += 1
                log.write(f"begin recording {rec_n}\n")
                fence = (await stores.supervision.read(mine, PRINCIPAL)).fence
                event = RecordedEvent(rec_n, padded(worker, rec_n, rng), "turn", fence)
                if not await stores.recording.put(mine, PRINCIPAL, event):
                    raise SystemExit("a recording with a higher index was refused")
            elif op == 4 or pairs == 0:
                pairs += 1
                stamp = time.time_ns()
                ids = f"u{worker}-{stamp}", f"a{worker}-{stamp}"
                log.write(f"begin pair {ids[0]} {ids[1]}\n")
                await conv.append_messages(
                    mine,
                    PRINCIPAL,
                    [
                        Message(ids[0], "user", padded(worker, n, rng)),
                        Message(ids[1], "assistant", padded(worker, n, rng)),
                    ],
                )
            else:
                last = (await conv.get_transcript(mine, PRINCIPAL, index=-1, speaker="user"))[0]
                log.write(f"begin truncate {last.id}\n")
                await conv.truncate(mine, PRINCIPAL, last.id)
                pairs -= 1
            log.write("ok\n")


def main(argv: list[str]) -> None:
    mode = argv[0]
    if mode == "race":
        url, factory, tenant, session, go, attempts, out = argv[1:]
        result = asyncio.run(race(url, factory, tenant, session, go, int(attempts)))
        with open(out, "w") as f:
            json.dump(result, f)
    elif mode == "write":
        url, worker, log_path = argv[1:]
        with open(log_path, "a", buffering=1) as log:
            asyncio.run(write(url, int(worker), log))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
