"""Compare-and-swap raced by several OS processes on one directory: one winner each time.

Each process loops "read the row, then heartbeat it (CAS to the same epoch), append to
the conversation, or take it over (CAS to the next epoch)", as lease holders and
standbys do. Whatever the
interleaving, each expectation (None, 1, 2, ...) may be taken over by exactly one
process, and the final epoch equals the number of takeovers. The same race run against
the catalogue's variant that locks the replaced data file instead of the lock file must
fail it: a waiter holding a lock on the header an append replaced and a newcomer
holding one on the new header both see the same epoch, and both take over.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from agentstores.keys import ConversationKey
from agentstores_file.stores import FileStores

REPO = Path(__file__).resolve().parents[2]
CORRECT = "agentstores_file.stores:FileStores"
MUTANT = "tests.catalogue.file_mutants:DataFileLockStores"


def worker_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["AGENTSTORES_DISABLE_PLUGINS"] = "all"
    return env


@dataclass
class RaceResult:
    wins: list[int | None]
    errors: list[str]
    final_epoch: int | None

    @property
    def violations(self) -> list[str]:
        found = [f"expectation {e!r} won {n} times" for e, n in Counter(self.wins).items() if n > 1]
        if self.final_epoch != len(self.wins):
            found.append(f"final epoch {self.final_epoch} after {len(self.wins)} wins")
        found.extend(self.errors)
        return found


def run_race(tmp: Path, factory: str, *, processes: int = 4, attempts: int = 150) -> RaceResult:
    """Race ``processes`` workers of ``factory`` on one fresh key in ``tmp``'s store."""
    url = f"file://{tmp / 'store'}"
    key = ConversationKey("race", uuid.uuid4().hex)
    go = tmp / f"go-{key.session_id}"
    outs = [tmp / f"out-{key.session_id}-{i}.json" for i in range(processes)]
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.file._worker",
                "race",
                url,
                factory,
                key.tenant,
                key.session_id,
                str(go),
                str(attempts),
                str(out),
            ],
            cwd=REPO,
            env=worker_env(),
        )
        for out in outs
    ]
    try:
        time.sleep(0.5)  # let them import and open; they spin on the go file
        go.touch()
        codes = [p.wait(120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert codes == [0] * processes, codes
    wins: list[int | None] = []
    errors: list[str] = []
    for out in outs:
        data = json.loads(out.read_text())
        wins.extend(data["won"])
        errors.extend(data["errors"])
    return RaceResult(wins, errors, final_epoch(url, key))


def final_epoch(url: str, key: ConversationKey) -> int | None:
    async def read() -> int | None:
        async with FileStores(url) as stores:
            view = await stores.supervision.read(key, "racer")
        return view.row.epoch if view.row is not None else None

    return asyncio.run(read())


def test_processes_racing_cas_get_one_winner_per_expectation(tmp_path: Path) -> None:
    result = run_race(tmp_path, CORRECT)
    assert result.violations == []
    assert len(result.wins) > 20  # the race really raced: many rounds were decided


def test_the_race_catches_a_lock_on_the_replaced_data_file(tmp_path: Path) -> None:
    seen: list[str] = []
    for _ in range(4):
        result = run_race(tmp_path, MUTANT)
        seen = result.violations
        if seen:
            break
    assert seen, "the race did not catch the data-file lock"
    assert any("won" in v or "final epoch" in v for v in seen), seen
