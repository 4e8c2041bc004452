"""A pytest plugin the mutation runner loads: the run fails at once unless the adapter it
imports is the copy holding the mutant (else a survivor would prove nothing). In the
runner's map run it also records, per test, its duration and the probed files it ran
(see :mod:`tests.mutation.adapters.probes`)."""

from __future__ import annotations

import importlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

PROBE_OUT_ENV = "AGENTSTORES_PROBE_OUT"
"""Where the map run writes its map (unset: no probes are read)."""
PROBE_ADAPTER_ENV = "AGENTSTORES_PROBE_ADAPTER"

_map: dict[str, dict[str, object]] = {}


def pytest_configure(config: pytest.Config) -> None:
    root = os.environ.get("AGENTSTORES_MUTANT_ROOT")
    package = os.environ.get("AGENTSTORES_MUTANT_PACKAGE")
    if not root or not package:
        return
    module = importlib.import_module(package)
    found = Path(module.__file__ or "").resolve().parent
    if found != Path(root).resolve():
        raise pytest.UsageError(f"{package} was imported from {found}, not the mutant's copy")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    if not os.environ.get(PROBE_OUT_ENV):
        yield
        return
    from tests.mutation.adapters import probes
    from tests.servers.shared import shared_url

    adapter, url = os.environ[PROBE_ADAPTER_ENV], shared_url() or ""
    before = probes.read(adapter, url)
    began = time.monotonic()
    yield
    seconds = time.monotonic() - began
    after = probes.read(adapter, url)
    ran = sorted(name for name, n in after.items() if n != before.get(name, 0))
    _map[item.nodeid] = {"seconds": round(seconds, 3), "files": ran}


def pytest_sessionfinish(session: pytest.Session) -> None:
    out = os.environ.get(PROBE_OUT_ENV)
    if out:
        Path(out).write_text(json.dumps(_map, indent=1, sort_keys=True))
