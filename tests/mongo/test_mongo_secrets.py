"""A password in a MongoDB URL never shows: not in the errors of opening it (nothing
listening, a server that cannot authenticate), not in URL refusals, their cause chains
and context, the log records, nor the bundle's ``repr``."""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

import pytest

from agentstores.errors import BackendUnavailableError, UsageError
from agentstores_mongo.stores import MongoStores
from tests.leaks import SECRET, assert_hidden
from tests.servers.mongo import NxServer
from tests.servers.process import free_port


async def failed_open(url: str, caplog: pytest.LogCaptureFixture) -> Exception:
    caplog.set_level(logging.DEBUG)
    stores = MongoStores(url)
    with pytest.raises(Exception) as caught:
        async with stores:
            pass
    assert_hidden(error=caught.value, records=caplog.records, objects=[stores])
    return caught.value


@pytest.mark.parametrize(
    "template",
    [
        "mongodb://app:{pw}@127.0.0.1:{port}/chat?serverSelectionTimeoutMS=300",
        "mongodb://app:{pw}@127.0.0.1:{port}/chat?authSource=admin&connectTimeoutMS=300"
        "&serverSelectionTimeoutMS=300",
        "mongodb://127.0.0.1:{port}/chat?tls=true&tlsCertificateKeyFilePassword={pw}"
        "&serverSelectionTimeoutMS=300",
    ],
)
async def test_nothing_listening(template: str, caplog: pytest.LogCaptureFixture) -> None:
    error = await failed_open(template.format(pw=SECRET, port=free_port()), caplog)
    assert isinstance(error, BackendUnavailableError)


async def test_credentials_sent_to_a_real_server(
    nx_server: NxServer, caplog: pytest.LogCaptureFixture
) -> None:
    """nx-27017 takes no credentials: authenticating fails inside PyMongo."""
    host = urlsplit(nx_server.url).netloc
    url = f"mongodb://app:{SECRET}@{host}/chat?directConnection=true&serverSelectionTimeoutMS=2000"
    await failed_open(url, caplog)


@pytest.mark.parametrize(
    "url",
    [
        f"mongodb://app:{SECRET}@127.0.0.1:1/chat?no_such_option=1",
        f"mongodb://app:{SECRET}@127.0.0.1:port/chat",  # PyMongo refuses the port
        f"mongodb://app:{SECRET}@127.0.0.1:1/chat?write_timeout=soon",
        f"postgresql://app:{SECRET}@127.0.0.1:1/chat",
    ],
)
def test_url_usage_errors(url: str) -> None:
    with pytest.raises(UsageError) as caught:
        MongoStores(url)
    assert_hidden(error=caught.value)


def test_repr_shows_where_not_the_password() -> None:
    stores = MongoStores(f"mongodb://app:{SECRET}@127.0.0.1:1/chat")
    assert_hidden(objects=[stores])
    assert "app:***@127.0.0.1:1" in repr(stores)
