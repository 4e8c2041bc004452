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
PACE = 0.02
LEASE_ARGS = ("--dead-after", "1.5", "--heartbeat", "0.3")
"""A lease declared dead 1.5 s after its last heartbeat, so a takeover comes quickly."""


def expected(words: int = WORDS) -> str:
    """The whole answer, as every replica writes it (agentstores_asgi.demo)."""
    return answer_text(QUESTION, words)


EXPECTED = expected()

__all__ = ["EXPECTED", "QUESTION", "USER_HEADER"]


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    with Servers(tmp_path_factory.mktemp("web-servers")) as found:
        yield found


def start_cluster(url: str, logs: Path, *, words: int = WORDS) -> DemoCluster:
    """Two replicas on ``url`` and the proxy, started (the caller closes them); the
    producer writes ``words`` words, one every :data:`PACE` seconds."""
    args = ("--pace", str(PACE), "--words", str(words), *LEASE_ARGS)
    return DemoCluster(url, replica_args=args, log_dir=logs, env=dict(os.environ)).start()


def headers(user: str) -> dict[str, str]:
    return {USER_HEADER: user}


def fresh_id() -> str:
    return uuid.uuid4().hex
