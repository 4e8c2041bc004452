"""agentstores backend for Redis and Valkey (standalone and cluster), on redis-py asyncio.

Import :class:`agentstores_redis.stores.RedisStores` directly or open a ``redis://``,
``valkey://`` or ``redis+cluster://`` URL through :func:`agentstores.open_stores`.
"""

__all__: list[str] = []
