"""redact_url: what a URL looks like wherever it is printed, logged or raised."""

from __future__ import annotations

import pytest

from agentstores.urls import redact_url


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://:s3cret@h:6379/0", "redis://:***@h:6379/0"),
        ("rediss://user:s3cret@h", "rediss://user:***@h"),
        ("redis+cluster://u:s3cret@h1:7000?db=0", "redis+cluster://u:***@h1:7000?db=0"),
        ("redis://:s3cr/et@h:6379", "redis://:***@h:6379"),  # a password holding "/"
        ("postgresql://app:s3cret@h1,h2/db", "postgresql://app:***@h1,h2/db"),
        (
            "postgresql://app@db/x?sslpassword=s3cret&schema=a",
            "postgresql://app@db/x?sslpassword=***&schema=a",
        ),
        ("redis://h?password=s3cret#frag", "redis://h?password=***#frag"),
        (
            "s3://b/p?aws_secret_access_key=s3cret&region=r",
            "s3://b/p?aws_secret_access_key=***&region=r",
        ),
        ("postgresql://app@db/app", "postgresql://app@db/app"),  # nothing secret: unchanged
        ("file://./.agentstores", "file://./.agentstores"),
        ("file:///srv/a@b/x", "file:///srv/a@b/x"),
        ("memory://", "memory://"),
        ("not a url", "not a url"),
    ],
)
def test_secrets_are_masked_and_the_rest_kept(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert "s3cr" not in redact_url(url)
