"""``zav_stores(url)``: everything ``setup_app`` needs to run on one agentstores bundle."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, FastAPI
from zav.agents_sdk.adapters.mcp import MCPOAuthIntegrationStore
from zav.agents_sdk.controllers import routers as default_routers

from agentstores.oauth import keys_from_env

from .bundle import Bundle
from .conversations import AgentStoresConversationStore
from .events import ZavEventHandlers
from .oauth import AgentStoresMCPOAuthRepository
from .recording import AgentStoresRecordingStore
from .state import AgentStoresStateStore
from .supervision import AgentStoresSupervisionStore


class ZavStores(Mapping[str, Any]):
    """The keyword arguments for ``setup_app``: ``setup_app(**zav_stores(url), ...)``.

    Besides the five stores it passes what makes the wired app work out of the box:
    ``event_handler_registry`` (a handler for ``ConversationUpdated``) with
    ``extra_bootstrap_deps`` (without which ``setup_app`` ignores the registry), and
    ``routers`` (the SDK's own, plus one whose lifespan opens the bundle at startup and
    closes it at shutdown, since ``setup_app`` has no lifespan argument).
    """

    def __init__(self, bundle: Bundle, arguments: dict[str, Any]) -> None:
        self.bundle = bundle
        self._arguments = arguments

    def __getitem__(self, name: str) -> Any:
        return self._arguments[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._arguments)

    def __len__(self) -> int:
        return len(self._arguments)

    @asynccontextmanager
    async def lifespan(self, app: FastAPI | None = None) -> AsyncIterator[None]:
        """Open the bundle for the app's lifetime."""
        await self.bundle.stores()
        try:
            yield
        finally:
            await self.bundle.close()


def zav_stores(
    url: str | None = None,
    *,
    oauth_keys: Sequence[str] | None = None,
    allow_plaintext_oauth: bool = False,
    clock: Callable[[], float] = time.time,
    routers: Sequence[tuple[str, APIRouter]] | None = None,
    extra_bootstrap_deps: Sequence[Any] | None = None,
    **options: Any,
) -> ZavStores:
    """The SDK's five stores over the agentstores backend ``url``, ready for ``setup_app``.

    ``oauth_keys`` (default: ``$AGENTSTORES_OAUTH_KEYS``) encrypt MCP OAuth records at
    rest; without keys the OAuth store is left out unless ``allow_plaintext_oauth``.
    ``routers`` and ``extra_bootstrap_deps`` are yours to add to (the SDK's routers are
    the default); ``options`` go to the backend. ``clock`` is the one the SDK judges
    heartbeats with (its default, ``time.time``).
    """
    bundle = Bundle(url, **options)
    lifespan_router = APIRouter()
    arguments: dict[str, Any] = {
        "agent_state_store": AgentStoresStateStore(bundle),
        "chat_stream_recording_store": AgentStoresRecordingStore(bundle),
        "chat_stream_supervision_store": AgentStoresSupervisionStore(bundle, clock=clock),
        "chat_conversation_store": AgentStoresConversationStore(bundle),
        "event_handler_registry": ZavEventHandlers,
        "extra_bootstrap_deps": list(extra_bootstrap_deps or []),
        "routers": [*(routers if routers is not None else default_routers), ("", lifespan_router)],
    }
    keys = list(oauth_keys) if oauth_keys is not None else keys_from_env()
    if keys or allow_plaintext_oauth:
        from zav.agents_sdk import get_mcp_oauth_token_client

        repository = AgentStoresMCPOAuthRepository(
            bundle, keys=keys, allow_plaintext=allow_plaintext_oauth
        )
        arguments["mcp_oauth_store"] = MCPOAuthIntegrationStore(repository)
        arguments["mcp_oauth_token_client"] = get_mcp_oauth_token_client()
    stores = ZavStores(bundle, arguments)
    lifespan_router.lifespan_context = stores.lifespan
    return stores


__all__ = ["ZavStores", "zav_stores"]
