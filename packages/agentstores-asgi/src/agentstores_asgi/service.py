"""What every route shares: the stores, the identity resolver, the producers this
replica runs, and the one place a failure becomes a refusal."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response

from agentstores import Conversation, Stores
from agentstores.errors import NotOwnedError
from agentstores.keys import ConversationKey
from agentstores.protocol import LeaseConfig

from .context import Identity, IdentityResolver
from .errors import UNAUTHENTICATED, ApiError, api_error
from .requests import an_id
from .runner import Runner

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class FollowSettings:
    """How a follower reads the store: between reads with no wake-up (seconds)."""

    poll: float
    safety_poll: float


class Service:
    """The state of one app instance (one replica)."""

    def __init__(
        self,
        stores: Stores | None,
        identity: IdentityResolver,
        runner: Runner,
        follow: FollowSettings,
        max_body_bytes: int,
    ) -> None:
        self._stores = stores
        self.identity = identity
        self.runner = runner
        self.follow = follow
        self.max_body_bytes = max_body_bytes

    def use(self, stores: Stores | None) -> None:
        """Serve from ``stores`` (the lifespan's, once opened; None once closed)."""
        self._stores = stores

    @property
    def stores(self) -> Stores:
        """The open stores (503 before the app started or after it stopped)."""
        if self._stores is None:
            raise ApiError(503, "unavailable", "the store is not open")
        return self._stores

    @property
    def lease_config(self) -> LeaseConfig:
        """The lease timings of this replica's turns."""
        return self.runner.settings.lease_config

    async def identify(self, request: Request) -> Identity:
        """The request's identity from the application's resolver (401 without one)."""
        try:
            found = await self.identity(request)
        except Exception:
            log.info("identity resolver refused the request")
            raise UNAUTHENTICATED from None
        if found is None:
            raise UNAUTHENTICATED
        if not isinstance(found, Identity):
            raise TypeError(f"the identity resolver returned {type(found).__name__}")
        return found

    def conversation(self, request: Request, who: Identity, session_id: object) -> Conversation:
        """The conversation ``session_id`` in the caller's tenant, as the caller."""
        key = ConversationKey(who.tenant, an_id(session_id, "conversation id"))
        request.state.agentstores_key = key
        return self.stores.conversation(key, who.principal)

    async def refusal(self, exc: BaseException, request: Request, who: Identity | None) -> ApiError:
        """The refusal for ``exc``; a NotOwnedError is 403 only if the caller sees the key."""
        visible = False
        key = getattr(request.state, "agentstores_key", None)
        if isinstance(exc, NotOwnedError) and who is not None and key is not None:
            try:
                info = await self.stores.conversations.get_conversation(key, who.principal)
                visible = info is not None
            except Exception:
                visible = False
        return api_error(exc, visible=visible)


Handler = Callable[[Service, Request, Identity], Awaitable[Response]]


def endpoint(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """A Starlette endpoint: identify the caller, run ``handler``, map any failure."""

    async def run(request: Request) -> Response:
        service: Service = request.app.state.agentstores
        who: Identity | None = None
        try:
            who = await service.identify(request)
            return await handler(service, request, who)
        except Exception as exc:
            return (await service.refusal(exc, request, who)).response()

    run.__name__ = handler.__name__
    run.__doc__ = handler.__doc__
    return run


__all__ = ["FollowSettings", "Handler", "Service", "endpoint"]
