"""moto's S3 in server mode, as a child process on a free loopback port.

``threaded=False`` (the default) serves one request at a time: werkzeug's
``run_simple(threaded=False)`` over moto's ``DomainDispatcherApplication``, so each
request, conditional check and write together, is atomic. moto's own server is threaded,
and there its If-Match / If-None-Match checks are not atomic with the write (two racing
conditional PUTs can both succeed); ``threaded=True`` serves it that way, for the test
that shows the contract suite catches it.

    with MotoServer() as server:
        print(server.url("bucket"))      # s3://bucket/?endpoint_url=http://127.0.0.1:<port>...
        server.restart()                 # same port; moto keeps nothing: the data is gone

Run directly (``python -m tests.servers.moto --port N [--threaded]``) it is the server.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from types import TracebackType

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}
"""moto accepts any credentials; the tests put these in the environment (the standard
boto3 chain), so child processes opening the same URL find them too."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def use_test_credentials() -> None:
    """Put moto's dummy credentials in this process's environment (children inherit)."""
    for name, value in CREDENTIALS.items():
        os.environ.setdefault(name, value)


class MotoServer:
    """One moto server process; ``threaded`` picks werkzeug's threaded or serial server."""

    def __init__(self, *, threaded: bool = False, port: int | None = None) -> None:
        self.threaded = threaded
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, bucket: str, prefix: str = "", **options: str) -> str:
        """An ``s3://`` URL for ``bucket``/``prefix`` on this server."""
        query = "&".join(f"{k}={v}" for k, v in {"endpoint_url": self.endpoint, **options}.items())
        return f"s3://{bucket}/{prefix}?region=us-east-1&{query}"

    def start(self) -> None:
        args = [sys.executable, "-m", "tests.servers.moto", "--port", str(self.port)]
        if self.threaded:
            args.append("--threaded")
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
        self.proc = subprocess.Popen(
            args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"moto server exited with {self.proc.returncode}")
            with contextlib.suppress(OSError):
                urllib.request.urlopen(self.endpoint + "/moto-api/", timeout=1).close()
                return
            time.sleep(0.1)
        self.stop()
        raise RuntimeError("moto server did not answer within 60 s")

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)

    def kill(self) -> None:
        """SIGKILL the server (a crash, not a shutdown)."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(10)
            self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def __enter__(self) -> MotoServer:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def serve(port: int, threaded: bool) -> None:
    """Serve moto on 127.0.0.1:``port`` until SIGTERM."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import run_simple

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    if threaded:
        # Switch threads often (CPython's default is every 5 ms), as a loaded many-core
        # host does: the race between moto's precondition check and its write then shows
        # in seconds instead of in rare runs.
        sys.setswitchinterval(1e-6)
    app = DomainDispatcherApplication(create_backend_app)
    run_simple("127.0.0.1", port, app, threaded=threaded, use_reloader=False)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--threaded", action="store_true")
    ns = parser.parse_args()
    serve(ns.port, ns.threaded)
