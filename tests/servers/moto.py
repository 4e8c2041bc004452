"""moto's S3 in server mode, as a child process on a free loopback port.

``threaded=False`` (the default) serves one request at a time: werkzeug's
``run_simple(threaded=False)`` over moto's ``DomainDispatcherApplication``, so each
request, conditional check and write together, is atomic. moto's own server is threaded,
and there its If-Match / If-None-Match checks are not atomic with the write (two racing
conditional PUTs can both succeed); ``threaded=True`` serves it that way, each write held
a moment after its check so the race shows on every run, for the test that shows the
contract suite catches it.

moto keeps its objects in memory only. ``journal=PATH`` (single-threaded only) makes the
server durable across a crash: every write request that succeeded (``PUT``, ``POST``,
``DELETE`` answered 2xx) is appended to ``PATH`` *before* its reply is sent, and a server
started on an existing journal replays it through moto, in order, before it serves (each
object's last plain write only: :meth:`Journal.replay`). So
an acknowledged write survives a SIGKILL; a write cut before its reply either landed (it
was journaled) or did not, as on any durable store; a refused one (412) changes nothing
either way. (The journal is flushed to the OS, not fsynced: it survives the process
dying, not the machine.)

    with MotoServer() as server:
        print(server.url("bucket"))      # s3://bucket/?endpoint_url=http://127.0.0.1:<port>...
        server.restart()                 # same port; moto kept nothing: the data is gone
    with MotoServer(journal=path) as server:
        server.restart(crash=True)       # SIGKILL, then the same port, the journal replayed

Run directly (``python -m tests.servers.moto --port N [--threaded] [--journal PATH]``) it
is the server.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import io
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any

from .process import free_port as free_port

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}
"""moto accepts any credentials; the tests put these in the environment (the standard
boto3 chain), so child processes opening the same URL find them too."""


def use_test_credentials() -> None:
    """Put moto's dummy credentials in this process's environment (children inherit)."""
    for name, value in CREDENTIALS.items():
        os.environ.setdefault(name, value)


class MotoServer:
    """One moto server process; ``threaded`` picks werkzeug's threaded or serial server."""

    def __init__(
        self, *, threaded: bool = False, port: int | None = None, journal: str | None = None
    ) -> None:
        if threaded and journal is not None:
            raise ValueError("the journal needs the single-threaded server (requests in order)")
        self.threaded = threaded
        self.port = port or free_port()
        self.journal = journal
        self.proc: subprocess.Popen[bytes] | None = None
        self.standbys: list[subprocess.Popen[bytes]] = []

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, bucket: str, prefix: str = "", **options: str) -> str:
        """An ``s3://`` URL for ``bucket``/``prefix`` on this server."""
        query = "&".join(f"{k}={v}" for k, v in {"endpoint_url": self.endpoint, **options}.items())
        return f"s3://{bucket}/{prefix}?region=us-east-1&{query}"

    def _spawn(self, standby: bool) -> subprocess.Popen[bytes]:
        args = [sys.executable, "-m", "tests.servers.moto", "--port", str(self.port)]
        if self.threaded:
            args.append("--threaded")
        if self.journal is not None:
            args += ["--journal", self.journal]
        if standby:
            args.append("--standby")
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
        pipe = subprocess.PIPE if standby else subprocess.DEVNULL
        return subprocess.Popen(args, env=env, stdin=pipe, stdout=pipe, stderr=subprocess.DEVNULL)

    def prepare_restarts(self, count: int = 1) -> None:
        """Start ``count`` standby processes now, for crash restarts to come (each one
        imports moto, then waits to be told to take over)."""
        self.standbys += [self._spawn(standby=True) for _ in range(count)]

    def start(self) -> None:
        self.proc = self._spawn(standby=False)
        self._wait()

    def _wait(self) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"moto server exited with {self.proc.returncode}")
            with contextlib.suppress(OSError):
                urllib.request.urlopen(self.endpoint + "/moto-api/", timeout=1).close()
                return
            time.sleep(0.1)
        self.stop()
        raise RuntimeError("moto server did not answer within 120 s")

    def stop(self) -> None:
        for standby in self.standbys:
            standby.kill()
            standby.wait(10)
        self.standbys = []
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

    def restart(self, *, crash: bool = False) -> None:
        """Stop (SIGTERM, or SIGKILL when ``crash``) and start again on the same port.

        A crash restart with a journal starts the next process first and lets it import
        moto (seconds on a loaded machine), then SIGKILLs the running one: the outage is
        the journal's replay, as for a real server recovering from its log, not Python's
        start-up. The standby takes the port only once the old process is gone."""
        if not (crash and self.journal is not None):
            self.kill() if crash else self.stop()
            self.start()
            return
        standby = self.standbys.pop(0) if self.standbys else self._spawn(standby=True)
        assert standby.stdout is not None and standby.stdin is not None
        if standby.stdout.readline().strip() != b"ready":
            standby.kill()
            raise RuntimeError("the standby moto server did not start")
        standby.stdout.close()
        self.kill()
        standby.stdin.write(b"go\n")
        standby.stdin.close()
        self.proc = standby
        self._wait()

    def create_bucket(self, bucket: str) -> None:
        """Create ``bucket`` on this server (moto accepts the test credentials)."""
        import boto3

        use_test_credentials()
        client = boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1")
        try:
            client.create_bucket(Bucket=bucket)
        except client.exceptions.BucketAlreadyOwnedByYou:
            pass
        finally:
            client.close()

    def __enter__(self) -> MotoServer:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


WRITES = frozenset({"PUT", "POST", "DELETE"})
_SKIPPED = ("wsgi.", "werkzeug.")

App = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class Journal:
    """The WSGI app wrapped so every successful write is appended to a file first."""

    def __init__(self, app: App, path: str) -> None:
        self.app = app
        self.path = path
        self.file: io.TextIOWrapper | None = None

    def replay(self) -> int:
        """Apply the journal's writes through moto, in order; how many were applied.

        A plain ``PUT`` or ``DELETE`` of one object is replayed only if no later one
        names the same object (the later one decides what the object holds), so a
        restart costs one request per object written, not one per write ever made: a
        header rewritten by every heartbeat is replayed once, as a durable store
        recovers its current data, not its history. Every other write (the bucket's
        creation, a multi-object delete) is replayed as it came, and a journal holding a
        copy is replayed whole (a copy reads its source as it was then). Preconditions
        are dropped: each was met when the write was acknowledged, and the version it
        named may be one of the writes skipped."""
        from werkzeug.test import create_environ, run_wsgi_app

        if not os.path.exists(self.path):
            return 0
        entries: list[dict[str, Any]] = []
        with open(self.path, encoding="utf-8") as lines:
            for line in lines:
                if not line.endswith("\n"):
                    break  # the process died while writing this line: never acknowledged
                entries.append(json.loads(line))
        last = {_object_of(e["environ"]): n for n, e in enumerate(entries)}
        last.pop(None, None)
        if any(_copies(e["environ"]) for e in entries):
            last = {}  # a copy reads an object's version at its time: replay everything
        count = 0
        for n, entry in enumerate(entries):
            target = _object_of(entry["environ"])
            if target is not None and last.get(target, n) != n:
                continue
            body = base64.b64decode(entry["body"])
            environ = create_environ()
            environ.update(entry["environ"])
            environ["wsgi.input"] = io.BytesIO(body)
            environ["CONTENT_LENGTH"] = str(len(body))
            for condition in ("HTTP_TRANSFER_ENCODING", "HTTP_IF_MATCH", "HTTP_IF_NONE_MATCH"):
                environ.pop(condition, None)
            app_iter, status, _ = run_wsgi_app(self.app, environ)
            b"".join(app_iter)
            if not status.startswith("2"):
                raise RuntimeError(f"journal replay: {entry['environ']['PATH_INFO']} {status}")
            count += 1
        return count

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if environ.get("REQUEST_METHOD") not in WRITES:
            return self.app(environ, start_response)
        length = environ.get("CONTENT_LENGTH")
        stream = environ["wsgi.input"]
        if length:
            body = stream.read(int(length))
        elif environ.get("wsgi.input_terminated"):  # chunked: werkzeug ends the stream
            body = stream.read()
        else:
            body = b""
        environ["wsgi.input"] = io.BytesIO(body)
        replied: list[Any] = []

        def capture(status: str, headers: Any, exc_info: Any = None) -> Any:
            replied[:] = [status, headers, exc_info]
            return lambda _data: None

        chunks = b"".join(self.app(environ, capture))
        status, headers, exc_info = replied
        if status.startswith("2"):
            kept = {
                k: v
                for k, v in environ.items()
                if isinstance(v, str) and not k.startswith(_SKIPPED)
            }
            entry = {"environ": kept, "body": base64.b64encode(body).decode("ascii")}
            if self.file is None:
                self.file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115
            self.file.write(json.dumps(entry) + "\n")
            self.file.flush()
        start_response(status, headers, exc_info)
        return [chunks]


def _copies(environ: dict[str, Any]) -> bool:
    return any(name.startswith("HTTP_X_AMZ_COPY_SOURCE") for name in environ)


def _object_of(environ: dict[str, Any]) -> str | None:
    """The object a journaled write replaces or removes whole (a plain ``PUT`` or
    ``DELETE`` of one key, path-style), or None for any other write."""
    if environ.get("REQUEST_METHOD") not in ("PUT", "DELETE") or environ.get("QUERY_STRING"):
        return None
    if _copies(environ):
        return None
    path = environ.get("PATH_INFO", "")
    if path.strip("/").count("/") < 1:
        return None  # the bucket itself
    return f"{environ.get('HTTP_HOST', '')}{path}"


def _await_port(port: int) -> None:
    """Return once 127.0.0.1:``port`` can be bound (its previous server is gone)."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("127.0.0.1", port))
                return
            except OSError:
                pass
        time.sleep(0.005)


WRITE_PAUSE = 0.003
"""Seconds the threaded server sleeps between moto's If-Match check and its write."""


def _pause_between_check_and_write(seconds: float) -> None:
    """Make ``S3Backend.put_object`` sleep first: moto checks ``If-Match`` /
    ``If-None-Match`` in its request handler and writes afterwards in the backend, with
    no lock across the two; the sleep widens that window (it does not create it: the
    single-threaded server serves the same code one request at a time and never races)."""
    from moto.s3.models import S3Backend

    write = S3Backend.put_object

    def paused(self: Any, *args: Any, **kwargs: Any) -> Any:
        time.sleep(seconds)
        return write(self, *args, **kwargs)

    S3Backend.put_object = paused  # type: ignore[method-assign]


def serve(port: int, threaded: bool, journal: str | None = None, standby: bool = False) -> None:
    """Serve moto on 127.0.0.1:``port`` until SIGTERM (replaying ``journal`` first).
    ``standby``: import everything, print ``ready``, and wait for the port to be free."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import run_simple

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    if threaded:
        # Switch threads often (CPython's default is every 5 ms), as a loaded many-core
        # host does, and hold each write a moment after moto's precondition check: the
        # race between the check and the write (moto's own) then shows on every run, not
        # only when the scheduler happens to split the two.
        sys.setswitchinterval(1e-6)
        _pause_between_check_and_write(WRITE_PAUSE)
    app: App = DomainDispatcherApplication(create_backend_app)
    if standby:
        from werkzeug.test import create_environ, run_wsgi_app

        # Load moto's S3 backend before the outage (a real server's warm binary).
        probe = create_environ("/", "http://127.0.0.1/", method="GET")
        b"".join(run_wsgi_app(app, probe)[0])
        print("ready", flush=True)
        sys.stdin.readline()  # "go": the running server is being killed
        _await_port(port)
    if journal is not None:
        durable = Journal(app, journal)
        durable.replay()
        app = durable
    run_simple("127.0.0.1", port, app, threaded=threaded, use_reloader=False)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--threaded", action="store_true")
    parser.add_argument("--journal")
    parser.add_argument("--standby", action="store_true")
    ns = parser.parse_args()
    serve(ns.port, ns.threaded, ns.journal, ns.standby)
