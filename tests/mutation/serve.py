"""Start a networked adapter's server once, then run a command with its URL in
``$AGENTSTORES_MUTATION_URL``; stop the server when the command ends.

    python -m tests.mutation.serve --adapter postgres --cwd .mutation-postgres -- mutmut run

The mutation tool runs the suite once per mutant: a server per run would cost more than
the suite. The servers are the ones the adapters' own tests start (a private PostgreSQL
18, Valkey, nx-27017, moto served single-threaded), each with a fresh data folder; every
test takes a namespace of its own on it (``network_suite_under_mutation.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator

from tests.servers.shared import SHARED_URL_ENV as URL_ENV

BUCKET = "agentstores-mutation"


@contextlib.contextmanager
def serving(adapter: str) -> Iterator[str]:
    """The base URL of a private server for ``adapter``, up for the block."""
    if adapter == "postgres":
        from tests.servers.postgres import postgres_admin_url

        with postgres_admin_url(embedded=True) as url:
            yield url
    elif adapter == "redis":
        from tests.servers.valkey import ValkeyServer

        with ValkeyServer(appendonly=True, appendfsync="always") as server:  # as its tests'
            yield server.url
    elif adapter == "mongo":
        from tests.servers.mongo import NxServer

        with NxServer() as server:
            yield server.url
    elif adapter == "s3":
        from tests.s3.conftest import make_bucket
        from tests.servers.moto import MotoServer, use_test_credentials

        use_test_credentials()  # the run's tests inherit the dummy credentials
        with MotoServer() as server:
            make_bucket(server.url(BUCKET))
            yield server.url(BUCKET)
    else:
        raise ValueError(f"no server for {adapter!r}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--adapter", required=True, choices=["postgres", "redis", "mongo", "s3"])
    parser.add_argument("--cwd", required=True, help="where the command runs")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the server is stopped too
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    with serving(args.adapter) as url:
        print(f"{args.adapter} server up for the run", flush=True)
        env = {**os.environ, URL_ENV: url}
        return subprocess.run(command, cwd=args.cwd, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
