"""Run the contract suite against several catalogue entries in one process.

``python -m tests.catalogue._batch PROFILE SEED NAME...`` prints one JSON line per entry:
``{"name": ..., "report": ...}`` (or ``"error"``), so the start-up cost is paid once.
"""

from __future__ import annotations

import json
import sys
import traceback

import agentstores.memory.data as memory_data
from agentstores_contract import validate
from tests.catalogue.catalogue import CONTROL, MUTANTS


def main(profile: str, seed: int, names: list[str]) -> None:
    by_name = {m.name: m for m in [CONTROL, *MUTANTS]}
    for name in names:
        before = set(memory_data._registry)
        try:
            report = validate(factory=by_name[name].factory, profile=profile, seed=seed)
            line = {"name": name, "report": report.to_dict()}
        except Exception:
            line = {"name": name, "error": traceback.format_exc()[-3000:]}
        for used in set(memory_data._registry) - before:
            memory_data.forget(used)  # each run's data is garbage once it reported
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3:])
