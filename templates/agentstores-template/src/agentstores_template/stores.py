"""``TemplateStores``: the bundle ``open_stores("template://...")`` yields.

Parse the URL and options here (refuse an unknown query option before connecting:
:func:`agentstores.stores.kit.url_options` names it and the known ones), build the
shared :class:`Context`, and give each store module its part of it. ``now`` is the
store's own clock (the one liveness and expiry use). A backend that holds connections
or workers also overrides ``_open`` (connect, check the schema) and ``_close`` (release
them); by default both do nothing.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from agentstores.errors import UsageError
from agentstores.stores import Stores, kit
from agentstores.stores.kit import url_options

from ._base import Context
from .conversations import TemplateConversationStore
from .oauth import TemplateOAuthStore
from .pause_tokens import TemplatePauseTokenStore
from .plugin import BACKEND
from .recording import TemplateRecordingStore
from .state import TemplateAgentStateStore
from .supervision import TemplateSupervisionStore

URL_OPTIONS: tuple[str, ...] = ()
"""The options this backend reads from the URL's query string (none yet)."""


class TemplateStores(Stores):
    """``template://...``. Options: ``tombstone_ttl`` (a timedelta; default 30 days, at
    most 100 years)."""

    backend = BACKEND.name
    capabilities = BACKEND.capabilities

    def __init__(self, url: str = "template://", *, tombstone_ttl: timedelta | None = None):
        if not url.startswith("template://"):
            raise UsageError(f"not a template:// URL: {url!r}")
        url_options(url, URL_OPTIONS, backend=BACKEND.name)
        self.ctx = Context(url, kit.tombstone_ttl(tombstone_ttl))
        self.supervision = TemplateSupervisionStore(self.ctx)
        self.recording = TemplateRecordingStore(self.ctx)
        self.state = TemplateAgentStateStore(self.ctx)
        self.conversations = TemplateConversationStore(self.ctx)
        self.pause_tokens = TemplatePauseTokenStore(self.ctx)
        self.oauth = TemplateOAuthStore(self.ctx)

    async def now(self) -> datetime:
        raise NotImplementedError(
            "Stores rule now: the store's own clock, timezone-aware UTC (the server's, "
            "where there is one)"
        )


__all__ = ["TemplateStores"]
