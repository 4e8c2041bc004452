"""Headless Chromium from Debian's ``chromium`` package, for the browser test, driven by
Playwright's Python API with the system browser (Playwright's own browser downloads are
never used).

Missing, it is installed with apt-get when running as root (as the Ceph session installs
its packages); otherwise the test fails with the command to run. Never a skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

EXECUTABLE = Path("/usr/bin/chromium")
PACKAGES = ("chromium",)
"""Debian's packages for the browser (``apt-get install --no-install-recommends``)."""
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
"""Chromium's command line here: headless, no sandbox (root in a container), and nothing
that reaches the network on its own."""
INSTALL_TIMEOUT = 900


def install() -> None:
    """``apt-get install chromium`` non-interactively (root only).

    Raises:
        RuntimeError: not root, or apt-get failed (its output in the message).
    """
    command = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *PACKAGES]
    if os.geteuid() != 0:
        raise RuntimeError(
            f"the browser test needs {EXECUTABLE}: run `{' '.join(command)}` as root"
        )
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for step in (["apt-get", "update", "-q"], command):
        done = subprocess.run(
            step, capture_output=True, text=True, env=env, timeout=INSTALL_TIMEOUT, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(step)} failed:\n{done.stdout[-2000:]}{done.stderr}")


def executable() -> str:
    """The system Chromium's path, installed first when it is missing."""
    if not EXECUTABLE.exists():
        install()
    if not EXECUTABLE.exists():
        found = shutil.which("chromium")
        if found is None:
            raise RuntimeError(f"apt-get installed {PACKAGES} but there is no {EXECUTABLE}")
        return found
    return str(EXECUTABLE)
