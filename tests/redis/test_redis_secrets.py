"""A password in a Redis URL never shows: not in the errors of opening it (standalone,
``rediss://``, cluster; nothing listening, a wrong password, a TLS mismatch, a cluster
node named as standalone), their cause chains and context, the log records, nor the
bundle's ``repr``."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentstores.errors import AgentStoresError, BackendUnavailableError, UsageError
from agentstores.urls import redact_url
from agentstores_redis.stores import RedisStores
from tests.leaks import SECRET, assert_hidden
from tests.servers.process import free_port
from tests.servers.valkey import ValkeyServer

QUICK = {"connect_timeout": 1.0, "reconnect_window": 0.2, "pool_timeout": 1.0}


class LockedValkey(ValkeyServer):
    """A Valkey that wants a password: ready once it answers, even with NOAUTH."""

    def ready(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(64).startswith((b"+PONG", b"-NOAUTH"))
        except OSError:
            return False


@pytest.fixture(scope="module")
def locked() -> Iterator[ValkeyServer]:
    """A standalone server whose password is not :data:`SECRET`."""
    with LockedValkey(extra_args=("--requirepass", "the-right-one")) as server:
        yield server


@pytest.fixture(scope="module")
def cluster_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ValkeyServer]:
    """A cluster-enabled node whose password is :data:`SECRET`."""
    folder: Path = tmp_path_factory.mktemp("node")
    args = ("--cluster-enabled", "yes", "--cluster-config-file", str(folder / "nodes.conf"))
    with LockedValkey(extra_args=(*args, "--requirepass", SECRET)) as server:
        yield server


async def refused(url: str, caplog: pytest.LogCaptureFixture) -> AgentStoresError:
    """Open ``url``, expecting a typed error; check the secret shows nowhere."""
    caplog.set_level(logging.DEBUG)
    stores = RedisStores(url, **QUICK)
    with pytest.raises(AgentStoresError) as caught:
        async with stores:
            pass
    assert_hidden(error=caught.value, records=caplog.records, objects=[stores])
    return caught.value


@pytest.mark.parametrize(
    "template",
    [
        "redis://:{pw}@127.0.0.1:{port}/0",
        "redis://agent:{pw}@127.0.0.1:{port}/0",
        "redis://127.0.0.1:{port}/0?password={pw}",
        "rediss://:{pw}@127.0.0.1:{port}/0",
        "valkeys://:{pw}@127.0.0.1:{port}/0?ssl_password={pw}",
        "redis+cluster://:{pw}@127.0.0.1:{port}",
        "rediss+cluster://agent:{pw}@127.0.0.1:{port}",
    ],
)
async def test_nothing_listening(template: str, caplog: pytest.LogCaptureFixture) -> None:
    url = template.format(pw=SECRET, port=free_port())
    error = await refused(url, caplog)
    assert isinstance(error, BackendUnavailableError)
    assert "127.0.0.1" in str(error)  # still says where it tried


@pytest.mark.parametrize(
    "template",
    [
        "redis://:{pw}@127.0.0.1:{port}/0",
        "redis://default:{pw}@127.0.0.1:{port}/0",
        "redis+cluster://:{pw}@127.0.0.1:{port}",
        "rediss://:{pw}@127.0.0.1:{port}/0",  # a TLS client on a plain server
    ],
)
async def test_wrong_password(
    template: str, locked: ValkeyServer, caplog: pytest.LogCaptureFixture
) -> None:
    await refused(template.format(pw=SECRET, port=locked.port), caplog)


async def test_cluster_node_named_as_standalone(
    cluster_node: ValkeyServer, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"redis://:{SECRET}@127.0.0.1:{cluster_node.port}/0"
    error = await refused(url, caplog)
    assert isinstance(error, UsageError)
    assert "redis+cluster://" in str(error)


@pytest.mark.parametrize(
    "url",
    [
        f"redis://:{SECRET}@127.0.0.1:1/0?no_such_option=1",
        f"redis://:{SECRET}@127.0.0.1:1/0?ssl_certfile=x",  # a TLS option without TLS
        f"redis://:{SECRET}@127.0.0.1:1/0?pool_size=many",
        f"redis://:{SECRET}@127.0.0.1:1/0?protocol=3",
        f"http://:{SECRET}@127.0.0.1:1/0",
    ],
)
def test_url_usage_errors(url: str) -> None:
    with pytest.raises(UsageError) as caught:
        RedisStores(url)
    assert_hidden(error=caught.value)


def test_repr_shows_where_not_the_password() -> None:
    stores = RedisStores(f"redis://agent:{SECRET}@127.0.0.1:1/0?key_prefix=p")
    assert_hidden(objects=[stores])
    assert "agent:***@127.0.0.1:1" in repr(stores)


def test_contract_workers_get_the_url_outside_their_command_line(
    locked: ValkeyServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The multi-process contract's workers: any local user reads a command line."""
    from agentstores.keys import ConversationKey
    from agentstores_contract import multiprocess

    started: list[list[str]] = []
    real = subprocess.Popen

    def popen(args: list[str], **kwargs: object) -> subprocess.Popen[str]:
        started.append(list(args))
        return real(args, **kwargs)  # type: ignore[call-overload, no-any-return]

    monkeypatch.setattr(multiprocess.subprocess, "Popen", popen)
    url = f"redis://:the-right-one@127.0.0.1:{locked.port}/0?key_prefix=w{os.getpid()}"
    key = ConversationKey("t", f"s{os.getpid()}")
    assert multiprocess.race_processes(url, "write", key, 1, 1) == [["w0"]]
    (args,) = started
    assert not any("the-right-one" in arg or "redis://" in arg for arg in args), args


def test_the_contract_reports_name_the_backend_without_its_password() -> None:
    from agentstores_contract import BackendUnderTest, validate

    url = f"redis://:{SECRET}@127.0.0.1:{free_port()}/0?connect_timeout=1&reconnect_window=0.2"
    assert BackendUnderTest.from_url(url).label == redact_url(url)
    report = validate(url)
    assert report.error is not None and "cannot reach" in report.error
    assert_hidden(objects=[report.backend, report.error, report])
