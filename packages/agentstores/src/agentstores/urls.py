"""Backend URLs as they may be shown: without the secrets they can carry.

A backend URL may hold a password (``redis://:secret@host``, ``postgresql://app:secret@db``)
or a secret in its query (``?password=``, ``?sslpassword=``, ``?aws_secret_access_key=``).
Anything that prints, logs or raises a URL passes it through :func:`redact_url` first, so
a secret never reaches a terminal, a log line, an error message or a ``repr``.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode

MASK = "***"
"""What a secret is replaced with."""

SECRET_NAMES = ("password", "passwd", "pass", "secret", "token", "credential", "key")
"""A query option whose name contains one of these (case-insensitive) holds a secret,
e.g. ``password``, ``sslpassword``, ``ssl_password``, ``aws_secret_access_key``,
``session_token``. ``key`` also masks options such as ``sslkey`` (a file path): showing
less is the safe side."""


def is_secret_option(name: str) -> bool:
    """Whether the query option ``name`` holds a secret (see :data:`SECRET_NAMES`)."""
    lowered = name.lower()
    return any(part in lowered for part in SECRET_NAMES)


def redact_url(url: str) -> str:
    """``url`` with its password and every secret query option replaced by ``***``.

    The user name, host, port, path and other options stay, so the result still says
    which server and database were meant; nothing else of the text changes. Anything
    that is not a ``scheme://`` string comes back as it is.
    """
    if not isinstance(url, str) or "://" not in url:
        return url
    scheme, _, rest = url.partition("://")
    # The credentials end at the last "@" before the query: a password may hold "/".
    end = min((i for i in (rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    at = rest.rfind("@", 0, end)
    if at >= 0:
        user, colon, _ = rest[:at].partition(":")
        rest = f"{user}{colon and ':' + MASK}{rest[at:]}"
    before, mark, query = rest.partition("?")
    if mark:
        query, hash_mark, fragment = query.partition("#")
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(is_secret_option(name) for name, _ in pairs):
            masked = [(n, MASK if is_secret_option(n) else v) for n, v in pairs]
            query = urlencode(masked, safe="*/:,")
        rest = f"{before}?{query}{hash_mark}{fragment}"
    return f"{scheme}://{rest}"


__all__ = ["MASK", "SECRET_NAMES", "is_secret_option", "redact_url"]
