"""The zav bridge shows a backend URL's password nowhere: not in the error of opening
its bundle, that error's chain and context, the log records, nor the bundle's repr."""

from __future__ import annotations

import logging

import pytest

from agentstores.errors import BackendUnavailableError
from agentstores_zav import Bundle
from tests.leaks import SECRET, assert_hidden
from tests.servers.process import free_port


@pytest.mark.parametrize(
    "url",
    [
        "redis://app:{pw}@127.0.0.1:{port}/0?connect_timeout=1&reconnect_window=0.2",
        "redis+cluster://:{pw}@127.0.0.1:{port}?connect_timeout=1&reconnect_window=0.2",
        "postgresql://app:{pw}@127.0.0.1:{port}/chat?acquire_timeout=1",
    ],
)
async def test_opening_an_unreachable_backend(url: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    bundle = Bundle(url.format(pw=SECRET, port=free_port()))
    with pytest.raises(BackendUnavailableError) as caught:
        await bundle.stores()
    assert_hidden(error=caught.value, records=caplog.records, objects=[bundle, bundle._stores])
