"""A secret written into an S3 URL never shows. Credentials come from boto3's chain
only: an ``endpoint_url`` carrying a user, a password or a query is refused before any
request (botocore repeats the endpoint verbatim in every connection error), and no
refusal, error chain, log record or ``repr`` repeats the secret."""

from __future__ import annotations

import logging

import pytest

from agentstores.errors import BackendUnavailableError, UsageError
from agentstores_s3.stores import S3Stores
from tests.leaks import SECRET, assert_hidden
from tests.servers.moto import MotoServer
from tests.servers.process import free_port


@pytest.mark.parametrize(
    "url",
    [
        f"s3://bucket/p?endpoint_url=http://key:{SECRET}@127.0.0.1:1",
        f"s3://bucket/p?endpoint_url=http://:{SECRET}@127.0.0.1:1",
        f"s3://bucket/p?endpoint_url=http://127.0.0.1:1/?X-Amz-Signature={SECRET}",
        f"s3://AKIA:{SECRET}@bucket/p",
        f"S3://AKIA:{SECRET}@bucket/p",
        f"s3://bucket/p?aws_secret_access_key={SECRET}",
    ],
)
def test_url_refusals(url: str) -> None:
    with pytest.raises(UsageError) as caught:
        S3Stores(url)
    assert_hidden(error=caught.value)


def test_endpoint_keyword_with_credentials_is_refused() -> None:
    with pytest.raises(UsageError) as caught:
        S3Stores("s3://bucket/p", endpoint_url=f"https://key:{SECRET}@minio.internal")
    assert_hidden(error=caught.value)
    assert "boto3 chain" in str(caught.value)


async def test_nothing_listening(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    url = f"s3://bucket/p?endpoint_url=http://127.0.0.1:{free_port()}&reconnect_window=0"
    stores = S3Stores(url, max_attempts=1)
    with pytest.raises(BackendUnavailableError) as caught:
        async with stores:
            pass
    assert_hidden(error=caught.value, records=caplog.records, objects=[stores])


async def test_a_real_server_and_a_wrong_secret_key(
    moto_server: MotoServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """moto takes any key; what it is sent must not show in the bundle or the logs."""
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    stores = S3Stores(moto_server.url("no-such-bucket-here"), reconnect_window=0)
    with pytest.raises(BackendUnavailableError) as caught:
        async with stores:
            pass
    assert_hidden(error=caught.value, records=caplog.records, objects=[stores, stores.io])
