"""nx-27017 test servers (a MongoDB wire-protocol server on SQLite, from its wheel), and
the installed prefix every test run gets on a server.

    with NxServer() as server:
        print(server.url)            # mongodb://127.0.0.1:<port>/?directConnection=true
        server.restart(crash=True)   # SIGKILL, then the same port and data file again
    with mongo_base_url() as base, Installation(base) as inst:
        print(inst.url)              # base URL + ?collection_prefix=<fresh>, indexes installed

:func:`mongo_base_url` picks the server: ``$MONGODB_URI`` when set (a real MongoDB),
otherwise a fresh nx-27017. :class:`Installation` installs a fresh collection prefix
(through ``agentstores_mongo.schema.install``, as the CLI would) and drops its
collections at the end, so runs sharing a server never collide.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

from .process import LoopbackServer, free_port

__all__ = [
    "MONGODB_URI_ENV",
    "Installation",
    "NxServer",
    "free_port",
    "mongo_base_url",
    "nx_executable",
    "with_option",
]

MONGODB_URI_ENV = "MONGODB_URI"


def nx_executable() -> str:
    """The ``nx-27017`` console script of the running interpreter's environment."""
    here = Path(sys.executable).parent / "nx-27017"
    if here.exists():
        return str(here)
    found = shutil.which("nx-27017")
    if found is None:
        raise RuntimeError("nx-27017 is not installed (pip install nx-27017==0.8.1)")
    return found


class NxServer(LoopbackServer):
    """One ``nx-27017`` process on a free loopback port, its SQLite file in a private
    directory. ``restart()`` keeps the port and the file."""

    name = "nx-27017"

    def __init__(self, *, port: int | None = None, directory: str | None = None) -> None:
        super().__init__(port=port, directory=directory, prefix="nx27017-")

    @property
    def url(self) -> str:
        return f"mongodb://127.0.0.1:{self.port}/?directConnection=true"

    @property
    def log_path(self) -> Path:
        return self.directory / "nx.log"

    def args(self) -> list[str]:
        return [
            nx_executable(),
            "--db",
            str(self.directory / "data.db"),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--log-file",
            str(self.log_path),
            "--pid-file",
            str(self.directory / "nx.pid"),
        ]


@contextlib.contextmanager
def mongo_base_url() -> Iterator[str]:
    """``$MONGODB_URI`` when set, otherwise a fresh nx-27017's URL."""
    external = os.environ.get(MONGODB_URI_ENV)
    if external:
        yield external
        return
    with NxServer() as server:
        yield server.url


def with_option(url: str, name: str, value: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}{name}={value}"


class Installation:
    """A fresh collection prefix on a server, with its indexes installed; dropped at
    exit. ``url`` is the base URL with ``collection_prefix`` set."""

    def __init__(self, base_url: str, prefix: str | None = None) -> None:
        self.base_url = base_url
        self.prefix = prefix or f"t{uuid.uuid4().hex[:10]}_"
        self.url = with_option(base_url, "collection_prefix", self.prefix)

    def install(self) -> str:
        from agentstores_mongo.schema import install

        return asyncio.run(install(self.url))

    def drop(self) -> None:
        from agentstores_mongo.stores import MongoStores

        async def main() -> None:
            stores = MongoStores(self.url, check_indexes=False, push=False)
            async with stores:
                for name in await stores.ctx.db.list_collection_names():
                    if name.startswith(self.prefix):
                        await stores.ctx.db.drop_collection(name)

        asyncio.run(main())

    def __enter__(self) -> Installation:
        self.install()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        with contextlib.suppress(Exception):
            self.drop()


if __name__ == "__main__":
    with mongo_base_url() as base, Installation(base) as inst:
        print(inst.url, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(3600)
