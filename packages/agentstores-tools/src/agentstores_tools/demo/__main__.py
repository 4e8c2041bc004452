"""``python -m agentstores_tools.demo``: two replicas behind the proxy, the page's URL
printed, running until Ctrl-C."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from agentstores.api import default_url

from .cluster import DemoCluster


def main(argv: list[str] | None = None) -> int:
    """Run the demo until Ctrl-C (or SIGTERM)."""
    parser = argparse.ArgumentParser(
        prog="python -m agentstores_tools.demo",
        description="Two replicas of the agentstores-asgi demo app over one store, behind a "
        "round-robin proxy that serves a chat page. Kill a replica mid-answer (its pid is "
        "printed) and watch the other one take the turn over.",
    )
    parser.add_argument("--url", help="store URL (default: $AGENTSTORES_URL, else ./.agentstores)")
    parser.add_argument("--port", type=int, default=8765, help="the proxy's port (8765)")
    parser.add_argument("--replicas", type=int, default=2, help="how many replicas (2)")
    parser.add_argument("--logs", default=".agentstores-demo", help="replica logs go here")
    parser.add_argument(
        "replica_args", nargs=argparse.REMAINDER, help="after --: options for every replica"
    )
    args = parser.parse_args(argv)
    extra = [a for a in args.replica_args if a != "--"]
    cluster = DemoCluster(
        args.url or default_url(),
        replicas=args.replicas,
        port=args.port,
        replica_args=extra,
        log_dir=Path(args.logs),
    )
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):  # also when started with SIGINT ignored
        signal.signal(signum, lambda *_: stop.set())
    with cluster:
        for replica in cluster.replicas:
            pid = replica.process.pid if replica.process else "?"
            print(f"{replica.name}: {replica.url} (pid {pid}, log {replica.log_path})")
        print(f"open {cluster.proxy_url}/  (Ctrl-C stops the demo)", flush=True)
        stop.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
