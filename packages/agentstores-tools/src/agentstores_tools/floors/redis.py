"""The raw floor for ``agentstores bench``: the adapter's own supervision CAS Lua script,
called directly with redis-py (``register_script``: EVALSHA with NOSCRIPT reload), with
no adapter in between: no key codec, no error translation, no reconciliation."""

from __future__ import annotations

import secrets
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from agentstores_redis.lua import SV_CAS
from agentstores_redis.stores import parse_url, pushes

from ..bench.floor import RawFloor


class RedisFloor(RawFloor):
    name = "redis-py EVALSHA of the adapter's supervision CAS script"

    def __init__(self) -> None:
        self.client: Any = None
        self.script: Any = None
        self.keys: list[list[str]] = []
        self.nonce = secrets.token_hex(12)

    async def setup(self, url: str, clients: int) -> None:
        driver_url, cluster, opts = parse_url(url, {})
        if cluster:
            self.client = RedisCluster.from_url(driver_url, max_connections=clients, protocol=2)
        else:
            self.client = Redis.from_url(driver_url, max_connections=clients, protocol=2)
        self.script = self.client.register_script(SV_CAS.source)
        run = secrets.token_hex(4)
        # the wake channel too where the adapter passes it (push on): the same script call
        wake = ("w",) if pushes(cluster, opts) else ()
        self.keys = [
            [f"asfloor-{run}:{{{client:08x}}}:{part}" for part in ("h", "sv", *wake)]
            for client in range(clients)
        ]
        for client in range(clients):
            reply = await self._cas(client, "", 0)
            if reply != [b"ok", b"1"]:
                raise RuntimeError(f"floor setup failed: {reply!r}")

    async def _cas(self, client: int, expected: str, epoch: int) -> Any:
        args = [self.nonce, "floor", "t", str(client), expected, "running", "m", str(epoch)]
        return await self.script(keys=self.keys[client], args=args)

    async def cas(self, client: int, op: int) -> bool:
        reply = await self._cas(client, str(op), op + 1)
        return bool(reply[1] == b"1")

    async def close(self) -> None:
        if self.client is None:
            return
        try:
            for keys in self.keys:
                await self.client.delete(*keys)
        finally:
            await self.client.aclose()
            self.client = None
