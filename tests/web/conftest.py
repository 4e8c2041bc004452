"""Fixtures for the web tests: two replicas of the demo app over one store (the proxy in
front of them), on the file backend and on PostgreSQL."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentstores_asgi.demo import USER_HEADER, answer_text
from agentstores_tools.demo import DemoCluster
from tests.servers.backends import Servers

QUESTION = "Tell me a long story."
WORDS = 200
"""The demo producer's answer: 200 words, one every 20 ms (a 4 s answer)."""
REPLICA_ARGS = ("--pace", "0.02", "--words", str(WORDS), "--dead-after", "1.5")
REPLICA_ARGS += ("--heartbeat", "0.3")
"""The producer's pace and length, and a lease declared dead 1.5 s after its last
heartbeat, so a takeover comes quickly."""
EXPECTED = answer_text(QUESTION, WORDS)
"""The whole answer, as every replica writes it (agentstores_asgi.demo)."""

__all__ = ["EXPECTED", "QUESTION", "USER_HEADER"]


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
