"""The LangGraph saver shows a backend URL's password nowhere: not in the error of
``from_url`` on an unreachable backend, its chain and context, nor the log records."""

from __future__ import annotations

import logging

import pytest

from agentstores.errors import BackendUnavailableError
from agentstores_langgraph import AgentStoresSaver
from tests.leaks import SECRET, assert_hidden
from tests.servers.process import free_port


@pytest.mark.parametrize(
    "url",
    [
        "redis://app:{pw}@127.0.0.1:{port}/0?connect_timeout=1&reconnect_window=0.2",
        "rediss://:{pw}@127.0.0.1:{port}/0?connect_timeout=1&reconnect_window=0.2",
        "postgresql://app:{pw}@127.0.0.1:{port}/chat?acquire_timeout=1",
        "mongodb://app:{pw}@127.0.0.1:{port}/chat?serverSelectionTimeoutMS=300",
    ],
)
async def test_from_url_on_an_unreachable_backend(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with pytest.raises(BackendUnavailableError) as caught:
        async with AgentStoresSaver.from_url(
            url.format(pw=SECRET, port=free_port()), tenant="acme", principal="alice"
        ):
            pass
    assert_hidden(error=caught.value, records=caplog.records)
