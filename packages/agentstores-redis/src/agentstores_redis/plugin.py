"""Registers the Redis / Valkey backend. Imports nothing but core: no driver at discovery."""

from __future__ import annotations

from agentstores.capabilities import Capability
from agentstores.plugins import BackendInfo, hookimpl

DURABILITY = (
    "what the server's persistence gives, no more: with appendonly yes and appendfsync "
    "always an acknowledged write survives a server crash; with the default everysec up "
    "to ~1 s of acknowledged writes can be lost on a crash (RDB only: everything since the "
    "last snapshot). Replication is asynchronous: a failover can undo acknowledged writes, "
    "including fence raises, so a fenced-out producer can write again after a failover. "
    "Options wait_aof_local=1 (WAITAOF, Redis/Valkey 7.2+) and wait_replicas=N (WAIT) "
    "make each write wait for fsync / replicas before it is acknowledged (off by default); "
    "an unconfirmed write is reported as UnknownOutcomeError, never as success."
)


BACKEND = BackendInfo(
    name="redis",
    schemes=(
        "redis",
        "rediss",
        "valkey",
        "valkeys",
        "redis+cluster",
        "rediss+cluster",
        "valkey+cluster",
        "valkeys+cluster",
        "redis+sentinel",
        "valkey+sentinel",
        "rediss+sentinel",
        "valkeys+sentinel",
    ),
    factory="agentstores_redis.stores:RedisStores",
    capabilities=frozenset({Capability.MULTI_PROCESS, Capability.NATIVE_TTL, Capability.CLUSTER}),
    distribution="agentstores-redis",
    description=(
        "Redis / Valkey (standalone, cluster or Sentinel) via redis-py asyncio; one Lua "
        "script per write, server TIME, native expiry"
    ),
    durability=DURABILITY,
)
"""The one declaration of this backend; its ``Stores`` class reads its capabilities here."""


@hookimpl
def agentstores_backends() -> list[BackendInfo]:
    return [BACKEND]
