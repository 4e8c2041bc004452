"""The raw floor for ``agentstores bench``: a compare-and-swap done directly with boto3,
GET (body + ETag) then ``put_object(IfMatch=etag)``, on a thread pool as large as the
clients, with no adapter in between: no key header rule, no nonce read-back, no error
translation."""

from __future__ import annotations

import asyncio
import secrets
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from botocore.exceptions import ClientError

from agentstores_s3.client import bare_etag
from agentstores_s3.stores import flag_option, make_client, parse_url

from ..bench.floor import RawFloor


class S3Floor(RawFloor):
    name = "boto3 GET + put_object(IfMatch=etag)"

    def __init__(self) -> None:
        self.client: Any = None
        self.pool: ThreadPoolExecutor | None = None
        self.bucket = ""
        self.names: list[str] = []
        self.quoted_if_match = True

    async def setup(self, url: str, clients: int) -> None:
        bucket, prefix, options = parse_url(url, {})
        options["workers"] = clients
        self.bucket = bucket
        self.quoted_if_match = flag_option(options.get("quoted_if_match", True), "quoted_if_match")
        self.pool = ThreadPoolExecutor(clients, thread_name_prefix="agentstores-s3-floor")
        self.client = await self._run(make_client, options)
        run = secrets.token_hex(4)
        self.names = [f"{prefix}asfloor-{run}/{client:08x}" for client in range(clients)]
        for name in self.names:
            await self._run(self._put, name, b"0", None)

    async def _run(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.pool, fn, *args)

    def _put(self, name: str, body: bytes, etag: str | None) -> bool:
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Key": name, "Body": body}
        if etag is not None:
            kwargs["IfMatch"] = etag if self.quoted_if_match else bare_etag(etag)
        try:
            self.client.put_object(**kwargs)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "PreconditionFailed":
                return False
            raise
        return True

    def _cas(self, name: str, op: int) -> bool:
        got = self.client.get_object(Bucket=self.bucket, Key=name)
        if int(got["Body"].read()) != op:
            return False
        return self._put(name, str(op + 1).encode(), got["ETag"])

    async def cas(self, client: int, op: int) -> bool:
        return bool(await self._run(self._cas, self.names[client], op))

    async def close(self) -> None:
        try:
            if self.client is not None:
                for name in self.names:
                    await self._run(
                        lambda n: self.client.delete_object(Bucket=self.bucket, Key=n), name
                    )
        finally:
            if self.client is not None:
                self.client.close()
                self.client = None
            if self.pool is not None:
                self.pool.shutdown(wait=False)
                self.pool = None
