"""agentstores-asgi: the web surface any replica serves over the same stores.

``create_app(stores_or_url, identity=..., producer=...)`` gives a Starlette app: chat
turns streamed as the AI SDK's UI message stream, resumed on any replica, stopped from
any replica, and the conversation reads and writes, every refusal a typed JSON error.
"""

from .app import MAX_BODY_BYTES, create_app
from .context import Identity, IdentityResolver, ProduceContext, Producer

__all__ = [
    "MAX_BODY_BYTES",
    "Identity",
    "IdentityResolver",
    "ProduceContext",
    "Producer",
    "create_app",
]
