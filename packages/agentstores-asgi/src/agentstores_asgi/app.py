"""``create_app``: the Starlette application every replica runs over the same stores."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.routing import Route

from agentstores import Stores, open_stores
from agentstores.errors import UsageError
from agentstores.protocol import DEFAULT_LEASE_CONFIG, LeaseConfig

from . import chat, conversations
from .context import IdentityResolver, Producer
from .runner import Runner, TurnSettings
from .service import FollowSettings, Service, endpoint

MAX_BODY_BYTES = 1 << 20
"""Default cap on a request body (1 MiB): a larger one is refused unread."""


def routes() -> list[Route]:
    """Every route, relative to where the app is mounted."""
    e = endpoint
    return [
        Route("/chat", e(chat.post_chat), methods=["POST"]),
        Route("/chat/{id}/stream", e(chat.get_stream), methods=["GET"]),
        Route("/chat/{id}/turn", e(chat.get_turn), methods=["GET"]),
        Route("/chat/{id}/stop", e(chat.post_stop), methods=["POST"]),
        Route("/conversations", e(conversations.list_conversations), methods=["GET"]),
        Route("/conversations/{id}", e(conversations.get_conversation), methods=["GET"]),
        Route("/conversations/{id}", e(conversations.patch_conversation), methods=["PATCH"]),
        Route("/conversations/{id}", e(conversations.delete_conversation), methods=["DELETE"]),
        Route("/conversations/{id}/messages", e(conversations.get_messages), methods=["GET"]),
        Route(
            "/conversations/{id}/shares/{principal}", e(conversations.put_share), methods=["PUT"]
        ),
        Route(
            "/conversations/{id}/shares/{principal}",
            e(conversations.delete_share),
            methods=["DELETE"],
        ),
        Route("/conversations/{id}/truncate", e(conversations.post_truncate), methods=["POST"]),
        Route("/conversations/{id}/branch", e(conversations.post_branch), methods=["POST"]),
    ]


def create_app(
    stores: Stores | str,
    *,
    identity: IdentityResolver,
    producer: Producer,
    lease_config: LeaseConfig = DEFAULT_LEASE_CONFIG,
    follow_poll: float = 0.3,
    follow_safety_poll: float = 2.0,
    stream_every: float = 0.1,
    max_body_bytes: int = MAX_BODY_BYTES,
    debug: bool = False,
) -> Starlette:
    """The app over ``stores`` (an open bundle the caller closes, or a URL the app's
    lifespan opens and closes).

    Args:
        stores: The stores every replica shares, or their URL.
        identity: The application's auth: ``async (request) -> Identity | None``.
        producer: The answer: ``async (ProduceContext) -> AsyncIterator[str]`` of deltas.
        lease_config: The lease timings of the turns this replica produces.
        follow_poll: Seconds between a follower's reads when nothing wakes it.
        follow_safety_poll: The same where the backend pushes other processes' writes.
        stream_every: Seconds between two recordings of a turn's text (what followers,
            the POST stream included, are shown).
        max_body_bytes: The largest request body accepted.
        debug: Starlette's debug mode.

    Mounted in another app (FastAPI's ``app.mount``), the mounted app's lifespan does not
    run: pass open stores, or enter ``app.router.lifespan_context(app)`` from the parent's.

    Raises:
        UsageError: a malformed setting.
    """
    for name, value in (("follow_poll", follow_poll), ("follow_safety_poll", follow_safety_poll)):
        if not value > 0:
            raise UsageError(f"{name} must be positive")
    if stream_every < 0:
        raise UsageError("stream_every must not be negative")
    if max_body_bytes < 1:
        raise UsageError("max_body_bytes must be positive")
    url = stores if isinstance(stores, str) else None
    if url is None and not isinstance(stores, Stores):
        raise UsageError(f"stores must be a Stores or a URL, got {type(stores).__name__}")
    runner = Runner(producer, TurnSettings(lease_config, stream_every))
    service = Service(
        None if url is not None else stores,  # type: ignore[arg-type]
        identity,
        runner,
        FollowSettings(follow_poll, follow_safety_poll),
        max_body_bytes,
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            if url is not None:
                service.use(await stack.enter_async_context(open_stores(url)))
            try:
                yield
            finally:
                await runner.abandon_all()
                if url is not None:
                    service.use(None)

    app = Starlette(debug=debug, routes=routes(), lifespan=lifespan)
    app.state.agentstores = service
    return app


__all__ = ["MAX_BODY_BYTES", "create_app", "routes"]
