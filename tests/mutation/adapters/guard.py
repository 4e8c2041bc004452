"""A pytest plugin the mutation runner loads: the run fails at once unless the adapter it
imports is the copy holding the mutant (else a survivor would prove nothing)."""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import pytest


def pytest_configure(config: pytest.Config) -> None:
    root = os.environ.get("AGENTSTORES_MUTANT_ROOT")
    package = os.environ.get("AGENTSTORES_MUTANT_PACKAGE")
    if not root or not package:
        return
    module = importlib.import_module(package)
    found = Path(module.__file__ or "").resolve().parent
    if found != Path(root).resolve():
        raise pytest.UsageError(f"{package} was imported from {found}, not the mutant's copy")
