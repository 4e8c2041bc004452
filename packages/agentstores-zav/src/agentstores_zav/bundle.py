"""One agentstores bundle shared by the five SDK stores, opened once per process."""

from __future__ import annotations

import asyncio
from typing import Any

from agentstores import Stores
from agentstores.plugins import create_stores


class Bundle:
    """The bundle ``url`` names, opened by the app's lifespan (or on first use).

    The SDK builds its stores before the event loop runs, so the bundle is created
    here unopened; :meth:`stores` opens it when a store is first used without the
    lifespan (a script, a test), and :meth:`close` releases it.
    """

    def __init__(self, url: str | None = None, **options: Any) -> None:
        from agentstores.api import default_url

        self.url = url or default_url()
        self._stores = create_stores(self.url, **options)
        self._lock: asyncio.Lock | None = None
        self._open = False

    async def stores(self) -> Stores:
        """The opened bundle."""
        if not self._open:
            if self._lock is None:
                self._lock = asyncio.Lock()
            async with self._lock:
                if not self._open:
                    await self._stores.open()
                    self._open = True
        return self._stores

    async def close(self) -> None:
        """Close the bundle (idempotent); a later use opens it again."""
        if self._open:
            self._open = False
            await self._stores.close()
        self._lock = None


__all__ = ["Bundle"]
