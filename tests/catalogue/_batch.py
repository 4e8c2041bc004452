"""Run the contract suite against several catalogue entries in one process.

``python -m tests.catalogue._batch PROFILE SEED NAME...`` prints one JSON line per entry:
``{"name": ..., "report": ...}`` (or ``"error"``), so the start-up cost is paid once.
Under the scope ``promise`` (``AGENTSTORES_CATALOGUE_SCOPE``, what the README's test run
uses) a mutant meets only the tests of the promise it breaks: that they fail it is what
the catalogue proves, and a mutant takes seconds instead of the whole suite's minute.
The scope ``suite`` (``nox -s catalogue``, ``nox -s deep``) runs the whole suite against
every mutant, so the table shows every promise each one breaks. The control runs the
whole suite under both.

An entry that runs longer than :data:`ENTRY_LIMIT` is a hang, not a slow machine (one
takes seconds): a watchdog prints every thread's stack and every running event loop's
tasks to stderr, then exits with :data:`HUNG`, so the caller names the entry and where it
waited instead of timing out the whole batch blind.
"""

from __future__ import annotations

import asyncio
import faulthandler
import gc
import json
import os
import sys
import threading
import traceback

import agentstores.memory.data as memory_data
from agentstores_contract import validate
from tests.catalogue.catalogue import CONTROL, MUTANTS

ENTRY_LIMIT = float(os.environ.get("AGENTSTORES_CATALOGUE_ENTRY_LIMIT", "600"))
SCOPES = ("promise", "suite")
HUNG = 3
_STDERR = os.fdopen(os.dup(2), "w")
"""The process's stderr, kept aside: while the suite runs, pytest captures fd 2."""


def _report_hang(name: str) -> None:
    out = _STDERR
    print(f"catalogue entry {name!r} still running after {ENTRY_LIMIT:.0f} s", file=out)
    out.flush()
    faulthandler.dump_traceback(file=out, all_threads=True)
    for loop in [o for o in gc.get_objects() if isinstance(o, asyncio.AbstractEventLoop)]:
        if not loop.is_running():
            continue
        for task in list(asyncio.all_tasks(loop)):
            print(f"--- {task!r}", file=out)
            task.print_stack(limit=12, file=out)
    out.flush()
    os._exit(HUNG)


def main(profile: str, seed: int, names: list[str]) -> None:
    by_name = {m.name: m for m in [CONTROL, *MUTANTS]}
    scope = os.environ.get("AGENTSTORES_CATALOGUE_SCOPE", "promise")
    if scope not in SCOPES:
        raise SystemExit(f"AGENTSTORES_CATALOGUE_SCOPE must be one of {SCOPES}, not {scope!r}")
    for name in names:
        before = set(memory_data._registry)
        watchdog = threading.Timer(ENTRY_LIMIT, _report_hang, args=(name,))
        watchdog.daemon = True
        watchdog.start()
        try:
            mutant = by_name[name]
            promises = [mutant.breaks] if scope == "promise" and mutant.breaks else None
            report = validate(factory=mutant.factory, profile=profile, seed=seed, promises=promises)
            line = {"name": name, "report": report.to_dict()}
        except Exception:
            line = {"name": name, "error": traceback.format_exc()[-3000:]}
        finally:
            watchdog.cancel()
        for used in set(memory_data._registry) - before:
            memory_data.forget(used)  # each run's data is garbage once it reported
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3:])
