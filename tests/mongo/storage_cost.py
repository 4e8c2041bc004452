"""What nx-27017's storage layer (neosqlite) spends on the adapter's common CAS update and
on the raw floor's, without the wire, the driver or the event loop: CPU time per update,
in alternating rounds, so a loaded machine distorts the ratio little.

Run: ``.nox/bench/bin/python -m tests.mongo.storage_cost [updates]`` (after one
``python3 run.py nox -s bench``). The adapter's filter and update come from
``agentstores_mongo.supervision.in_place`` (a takeover to the next epoch, as the bench's
``cas`` does); the floor's are those of ``agentstores_tools.floors.mongo.MongoFloor.cas``.
"""

from __future__ import annotations

import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from neosqlite import Connection

from agentstores.keys import ConversationKey
from agentstores.models import SupervisionRow
from agentstores.stores import kit
from agentstores_mongo.supervision import in_place
from agentstores_tools.floors.mongo import MongoFloor

PRINCIPAL = "bench"
KEY = ConversationKey("asbench", "storage-cost")


def adapter_header() -> dict[str, Any]:
    """A supervised key's header as the adapter leaves it after a CAS at epoch 1 (the row
    as ``in_place`` writes it, so the script measures whichever layout the code has)."""
    row = SupervisionRow("running", "turn", 1)
    _, update = in_place(KEY, PRINCIPAL, 0, row, kit.writer_nonce_hex())
    return {
        "_id": KEY.storage_name,
        "rev": 1,
        "t": KEY.tenant,
        "s": KEY.session_id,
        "o": PRINCIPAL,
        "f": 1,
        "g": kit.writer_nonce_hex(),
        "lw": kit.writer_nonce_hex(),
        "redo": None,
        "hb": datetime.now(UTC),
        **update["$set"],
    }


def main(updates: int = 4000, rounds: int = 8) -> None:
    with tempfile.TemporaryDirectory() as directory:
        conn = Connection(str(Path(directory) / "data.db"), check_same_thread=False)
        keys = conn["keys"]
        floor_id = "asfloor-storage-cost"
        keys.insert_one(MongoFloor.document(floor_id))
        keys.insert_one(adapter_header())
        state = {"floor": 0, "adapter": 1}

        def floor(count: int) -> list[tuple[dict[str, Any], dict[str, Any]]]:
            op = state["floor"]
            state["floor"] = op + count
            return [
                (
                    {"_id": floor_id, "rev": n},
                    {"$set": {"rev": n + 1}, "$currentDate": {"hb": True}},
                )
                for n in range(op, op + count)
            ]

        def adapter(count: int) -> list[tuple[dict[str, Any], dict[str, Any]]]:
            epoch = state["adapter"]
            state["adapter"] = epoch + count
            return [
                in_place(
                    KEY,
                    PRINCIPAL,
                    e,
                    SupervisionRow("running", "turn", e + 1),
                    kit.writer_nonce_hex(),
                )
                for e in range(epoch, epoch + count)
            ]

        spent = {"floor": 0.0, "adapter": 0.0}
        per_round = updates // rounds
        for number in range(rounds + 1):  # round 0 warms up
            order = [("floor", floor), ("adapter", adapter)]
            for name, build in order if number % 2 else order[::-1]:
                calls = build(per_round)  # built before the clock starts: storage alone
                started = time.process_time()
                for where, update in calls:
                    assert keys.update_one(where, update).matched_count == 1
                if number:
                    spent[name] += time.process_time() - started
        conn.close()
    done = rounds * per_round
    for name, seconds in spent.items():
        print(f"{name:8s} {seconds / done * 1e6:7.1f} us CPU per update")
    print(f"floor/adapter: {spent['floor'] / spent['adapter']:.3f}x ({done} updates each)")


if __name__ == "__main__":
    main(*(int(arg) for arg in sys.argv[1:2]))
