"""A server started once for many test sessions (a mutation run's: ``tests/mutation/
serve.py``), standing in for the private server a session would start.

A mutation run forks one short pytest session per mutant: a server started per session
would cost more than the tests. When ``$AGENTSTORES_MUTATION_URL`` names the run's
server, an adapter's conftest hands that server to its tests instead of starting one,
and parametrizes them on it alone (its other variants need servers of their own).
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit

SHARED_URL_ENV = "AGENTSTORES_MUTATION_URL"


def shared_url() -> str | None:
    """The shared server's base URL, or None when every session starts its own."""
    return os.environ.get(SHARED_URL_ENV) or None


def shared_port(url: str) -> int:
    port = urlsplit(url).port
    if port is None:
        raise ValueError("the shared server's URL names no port")
    return port


__all__ = ["SHARED_URL_ENV", "shared_port", "shared_url"]
