"""The built distributions the wheel tests install."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.wheels.distributions import ROOT, SHIPPED
from tests.wheels.tools import run, uv


@pytest.fixture(scope="session")
def dist_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``$AGENTSTORES_DIST_DIR`` (the tests-wheels session builds dist/ first), else every
    shipped distribution built now into a temporary directory."""
    given = os.environ.get("AGENTSTORES_DIST_DIR")
    if given:
        return Path(given)
    out = tmp_path_factory.mktemp("dist")
    for path in SHIPPED:
        run(uv(), "build", "--quiet", "--python", sys.executable, "--out-dir", out, ROOT / path)
    return out
