"""What the tools show of a URL: the URL redacted wherever it appears whole, and each of
its secrets masked wherever it appears alone (as written or percent-decoded)."""

from __future__ import annotations

from dataclasses import dataclass, field

from agentstores.urls import redact_url
from agentstores_tools.redaction import Redaction, url_secrets

URL = "postgresql://app:p%40ss@db:5432/app?sslpassword=k3y&schema=agents"


def test_the_secrets_of_a_url_are_its_password_and_secret_options() -> None:
    assert url_secrets(URL) == {"p%40ss", "p@ss", "k3y"}
    assert url_secrets("redis://:only-pw@cache:6379/0") == {"only-pw"}
    assert url_secrets("s3://bucket/prefix?aws_secret_access_key=a%2Fb") == {"a%2Fb", "a/b"}
    assert url_secrets("file:///tmp/x") == set()
    assert url_secrets("postgresql://app@db/app?schema=agents") == set()


def test_text_shows_the_url_redacted_and_no_secret_alone() -> None:
    text = f"cannot reach {URL}: auth failed for password 'p@ss' (ssl key k3y)"
    shown = Redaction(URL).text(text)
    assert redact_url(URL) in shown
    for secret in url_secrets(URL):
        assert secret not in shown
    assert "auth failed for password '***'" in shown


def test_a_url_without_secrets_changes_nothing() -> None:
    text = "opening file:///tmp/store and postgresql://app@db/app"
    redaction = Redaction(None, "file:///tmp/store", "postgresql://app@db/app")
    assert redaction.text(text) == text


@dataclass
class Report:
    url: str
    errors: list[str] = field(default_factory=list)
    detail: dict[str, tuple[str, int]] = field(default_factory=dict)


def test_data_masks_every_string_inside_and_changes_nothing_in_place() -> None:
    report = Report(URL, [f"lost {URL}"], {"p@ss": ("k3y", 1)})
    shown = Redaction(URL).data(report)
    assert shown == Report(redact_url(URL), [f"lost {redact_url(URL)}"], {"***": ("***", 1)})
    assert report.url == URL  # a copy, not the caller's object
