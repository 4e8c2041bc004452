"""``open_stores(url)``: the one way applications get a bundle of stores."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from .plugins import create_stores
from .stores import Stores

URL_ENV = "AGENTSTORES_URL"
DEFAULT_URL = "file://./.agentstores"
"""With nothing configured: the embedded file backend in ``./.agentstores``."""


def default_url() -> str:
    """The backend URL used when none is given: ``$AGENTSTORES_URL``, else :data:`DEFAULT_URL`."""
    return os.environ.get(URL_ENV) or DEFAULT_URL


@asynccontextmanager
async def open_stores(url: str | None = None, **options: Any) -> AsyncIterator[Stores]:
    """Open every store of the backend ``url`` names (default: ``$AGENTSTORES_URL``, else
    the embedded file backend); close them on exit.

    Raises:
        UsageError: no installed backend handles the URL's scheme.
    """
    stores = create_stores(url or default_url(), **options)
    await stores.open()
    try:
        yield stores
    finally:
        await stores.close()
