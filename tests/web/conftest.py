"""Fixtures for the web tests: two replicas of the demo app over one store (the proxy in
front of them), on the file backend and on PostgreSQL."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentstores_tools.demo import DemoCluster
from tests.servers.backends import Servers

USER_HEADER = "x-demo-user"
"""How the demo app learns who is asking (its identity resolver reads this header)."""
REPLICA_ARGS = ("--pace", "0.02", "--words", "300", "--dead-after", "1.5", "--heartbeat", "0.3")
"""The demo producer's pace (300 words, one every 20 ms: a 6 s answer) and a lease that
is declared dead 1.5 s after its last heartbeat, so a takeover comes quickly."""


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    with Servers(tmp_path_factory.mktemp("web-servers")) as found:
        yield found


def start_cluster(url: str, logs: Path) -> DemoCluster:
    """Two replicas on ``url`` and the proxy, started (the caller closes them)."""
    env = dict(os.environ)
    return DemoCluster(url, replica_args=REPLICA_ARGS, log_dir=logs, env=env).start()


def headers(user: str) -> dict[str, str]:
    return {USER_HEADER: user}


def fresh_id() -> str:
    return uuid.uuid4().hex
