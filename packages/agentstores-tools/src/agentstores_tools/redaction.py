"""What the tools show of the backend URLs they were given: never a secret.

What the tools write from a URL themselves shows it through
:func:`agentstores.urls.redact_url`. Text they pass on (a backend's error, a worker's
traceback, a failed write's message) may quote the URL whole or its password alone:
:class:`Redaction` masks both wherever they appear, in text and in JSON-like results.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar
from urllib.parse import unquote, unquote_plus

from agentstores.urls import MASK, is_secret_option, redact_url

T = TypeVar("T")


def url_secrets(url: str) -> set[str]:
    """The secrets ``url`` holds, as written and percent-decoded: its password and the
    value of every secret query option (the parts :func:`redact_url` masks)."""
    if not isinstance(url, str) or "://" not in url:
        return set()
    rest = url.partition("://")[2]
    end = min((i for i in (rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    found: set[str] = set()
    at = rest.rfind("@", 0, end)
    if at >= 0:
        password = rest[:at].partition(":")[2]
        found |= {password, unquote(password)}
    query = rest.partition("?")[2].partition("#")[0]
    for option in query.split("&"):
        name, _, value = option.partition("=")
        if is_secret_option(unquote_plus(name)):
            found |= {value, unquote_plus(value)}
    return {secret for secret in found if secret}


class Redaction:
    """Masks the secrets of ``urls`` in whatever a tool is about to show."""

    def __init__(self, *urls: str | None) -> None:
        given = [url for url in urls if url]
        self._urls = [(url, redact_url(url)) for url in given if redact_url(url) != url]
        secrets = {secret for url in given for secret in url_secrets(url)}
        # Longest first: a secret holding another is masked whole.
        self._secrets = sorted(secrets, key=len, reverse=True)

    def text(self, text: str) -> str:
        """``text`` with each URL shown redacted and any secret left masked."""
        for url, shown in self._urls:
            text = text.replace(url, shown)
        for secret in self._secrets:
            text = text.replace(secret, MASK)
        return text

    def data(self, value: T) -> T:
        """``value`` with :meth:`text` applied to every string inside it: through dicts
        (keys too), lists, tuples and dataclass instances, which are copied, not changed."""
        return self._walk(value)  # type: ignore[no-any-return]

    def _walk(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self._walk(k): self._walk(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(self._walk(v) for v in value)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            changes = {
                f.name: self._walk(getattr(value, f.name)) for f in dataclasses.fields(value)
            }
            return dataclasses.replace(value, **changes)
        return value


__all__ = ["Redaction", "url_secrets"]
