"""``MongoStores``: every store on one MongoDB deployment, through PyMongo's
``AsyncMongoClient`` (Motor is end-of-life and not used).

    MongoStores("mongodb://host:27017/app?replicaSet=rs0")
    MongoStores("mongodb+srv://user:pw@cluster.example.net/app")
    MongoStores(existing_async_mongo_client, database="app")   # never closed by us

The URL is PyMongo's (its own query options pass through); the database is the URL's
path, else ``database=``, else ``agentstores``. Options, as keyword arguments or URL
query parameters: ``collection_prefix`` (``agentstores_``), ``write_concern``
(``majority``, or a number of nodes), ``write_timeout`` (seconds the write concern may
take, 10), ``tombstone_ttl`` (seconds or a timedelta; 30 days; at most 100 years),
``stall_after`` (2 s: how long a write waits for another writer's uncommitted documents
before retiring it),
``reconcile_window`` (5 s: how long a write whose reply was lost tries to read its
outcome back), ``reconnect_window`` (5 s: how long a call keeps resending after a
connection failure before its commit, e.g. while the server restarts),
``check_indexes`` (true: refuse to open when an index is missing), ``push``
(``false`` by default; ``auto``: followers hear other processes' writes through a
change stream where the server serves them, and poll elsewhere; ``true``: the same, but
refuse to open where the server does not; see :mod:`.changes`). Unless the URL says
otherwise the client waits at most 5 s to select a server (``serverSelectionTimeoutMS``),
5 s for a pooled connection (``waitQueueTimeoutMS``) and 20 s for a reply
(``socketTimeoutMS``), each ending in ``BackendUnavailableError``.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from agentstores.errors import BackendUnavailableError, UsageError
from agentstores.stores import Stores
from agentstores.stores.kit import tombstone_ttl, url_options
from agentstores.urls import redact_url

from ._base import Context
from .changes import ChangeListener, Unsupported
from .conversations import COPY_CHUNK, MongoConversationStore
from .errors import translate_error
from .header import CUT_CHUNK
from .oauth import MongoOAuthStore
from .pause_tokens import MongoPauseTokenStore
from .plugin import BACKEND
from .recording import MongoRecordingStore
from .schema import check
from .state import MongoAgentStateStore
from .supervision import MongoSupervisionStore
from .transcript import PAGE

log = logging.getLogger(__name__)

SCHEMES = ("mongodb", "mongodb+srv")
OPTIONS = (
    "collection_prefix",
    "database",
    "write_concern",
    "write_timeout",
    "tombstone_ttl",
    "stall_after",
    "reconcile_window",
    "reconnect_window",
    "check_indexes",
    "push",
)
PUSH_CHOICES = ("auto", "true", "false")
CLIENT_DEFAULTS = {
    "serverSelectionTimeoutMS": 5000,
    "waitQueueTimeoutMS": 5000,
    "connectTimeoutMS": 5000,
    "socketTimeoutMS": 20000,
}
DEFAULT_DATABASE = "agentstores"
DEFAULT_PREFIX = "agentstores_"


def parse_url(url: str, options: dict[str, Any]) -> tuple[str, str | None, dict[str, Any]]:
    """``(driver URL, database from the path, our options)``: our query parameters are
    taken out of the URL and merged under the keyword options."""
    parts = urlsplit(url)
    if parts.scheme.lower() not in SCHEMES:
        raise UsageError(f"not a MongoDB URL: {redact_url(url)!r} (schemes: {', '.join(SCHEMES)})")
    ours: dict[str, Any] = {}
    rest = []
    driver_options = _driver_options()
    present = {n for n, _ in parse_qsl(parts.query, keep_blank_values=True)}
    known = {*OPTIONS, *(n for n in present if n.lower() in driver_options)}
    hint = " (or a PyMongo connection-string option, e.g. replicaSet)"
    for name, value in url_options(url, known, backend="mongo", hint=hint):
        if name in OPTIONS:
            ours[name] = value
        else:
            rest.append((name, value))
    for name, value in options.items():
        if name not in OPTIONS:
            raise UsageError(f"unknown mongo option {name!r}; known: {', '.join(sorted(OPTIONS))}")
        ours[name] = value
    database = parts.path.lstrip("/") or None
    driver = urlunsplit((parts.scheme, parts.netloc, "/", urlencode(rest), ""))
    return driver, database, ours


def _driver_options() -> frozenset[str]:
    """PyMongo's connection-string options, lower-cased (it matches them so)."""
    from pymongo import common

    names = set(common.URI_OPTIONS_VALIDATOR_MAP)
    names.update(getattr(common, "URI_OPTIONS_ALIAS_MAP", {}))
    names.update(getattr(common, "URI_OPTIONS_DEPRECATION_MAP", {}))
    return frozenset(n.lower() for n in names)


def _seconds(value: Any, what: str) -> float:
    if isinstance(value, timedelta):
        return value.total_seconds()
    try:
        seconds = float(value)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"{what} must be a number of seconds, got {value!r}") from exc
    if seconds <= 0:
        raise UsageError(f"{what} must be positive")
    return seconds


def _push(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value).strip().lower()
    text = {"1": "true", "yes": "true", "on": "true"}.get(text, text)
    text = {"0": "false", "no": "false", "off": "false"}.get(text, text)
    if text not in PUSH_CHOICES:
        raise UsageError(f"push must be one of {', '.join(PUSH_CHOICES)}, got {value!r}")
    return text


def _flag(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() not in ("0", "false", "no", "off")
    return bool(value)


class MongoStores(Stores):
    """Every store on MongoDB; see the module docstring for URLs and options."""

    backend = BACKEND.name
    capabilities = BACKEND.capabilities
    transcript_thresholds = (PAGE, COPY_CHUNK, CUT_CHUNK)

    def __init__(self, url: Any = "mongodb://127.0.0.1:27017", **options: Any) -> None:
        from pymongo import AsyncMongoClient, ReadPreference, WriteConcern
        from pymongo.errors import ConfigurationError

        if isinstance(url, AsyncMongoClient):
            client, owned, database = url, False, None
            for name in options:
                if name not in OPTIONS:
                    raise UsageError(f"unknown mongo option {name!r}")
            opts = dict(options)
            self.url = "mongodb://(application client)"
            self.driver_url: str | None = None
            self.client_options: dict[str, Any] = {}
        elif isinstance(url, str):
            driver, database, opts = parse_url(url, options)
            present = {k.lower() for k, _ in parse_qsl(urlsplit(driver).query)}
            extra: dict[str, Any] = {
                k: v for k, v in CLIENT_DEFAULTS.items() if k.lower() not in present
            }
            try:
                client = AsyncMongoClient(driver, tz_aware=True, connect=False, **extra)
            except (ConfigurationError, ValueError, TypeError) as exc:
                # PyMongo's messages name the option, never its value or the password
                raise UsageError(f"bad MongoDB URL {redact_url(url)!r}: {exc}") from exc
            owned = True
            self.url = url
            self.driver_url, self.client_options = driver, extra
        else:
            raise UsageError(
                f"expected a mongodb:// URL or an AsyncMongoClient, got {type(url).__name__}"
            )
        self._client, self._owned = client, owned
        self.closing: list[Any] = []
        """Synchronous clients made for the LangGraph saver, closed with the bundle."""
        database = opts.get("database") or database or DEFAULT_DATABASE
        prefix = str(opts.get("collection_prefix", DEFAULT_PREFIX))
        concern = opts.get("write_concern", "majority")
        if isinstance(concern, str) and concern.isdigit():
            concern = int(concern)
        timeout_ms = int(_seconds(opts.get("write_timeout", 10), "write_timeout") * 1000)
        try:
            wc = WriteConcern(w=concern, wtimeout=timeout_ms)
        except (TypeError, ValueError) as exc:
            raise UsageError(f"bad write_concern {concern!r}: {exc}") from exc
        db = client.get_database(database, write_concern=wc, read_preference=ReadPreference.PRIMARY)
        ttl = tombstone_ttl(opts.get("tombstone_ttl"))  # the kit's rule: at most 100 years
        self.check_indexes = _flag(opts.get("check_indexes", True))
        self.push = _push(opts.get("push", "false"))
        self.listener: ChangeListener | None = None
        """The change stream hearing other processes' writes, while open with push on
        and the server serves change streams."""
        self.ctx = Context(
            client=client,
            db=db,
            prefix=prefix,
            keys=db[prefix + "keys"],
            messages=db[prefix + "messages"],
            state=db[prefix + "state"],
            tokens=db[prefix + "tokens"],
            oauth_users=db[prefix + "oauth_users"],
            oauth_clients=db[prefix + "oauth_clients"],
            tombstone_ttl=ttl,
            stall_after=_seconds(opts.get("stall_after", 2.0), "stall_after"),
            reconcile_window=_seconds(opts.get("reconcile_window", 5.0), "reconcile_window"),
            reconnect_window=_seconds(opts.get("reconnect_window", 5.0), "reconnect_window"),
        )
        self.supervision = MongoSupervisionStore(self.ctx)
        self.recording = MongoRecordingStore(self.ctx)
        self.state = MongoAgentStateStore(self.ctx)
        self.conversations = MongoConversationStore(self.ctx)
        self.pause_tokens = MongoPauseTokenStore(self.ctx)
        self.oauth = MongoOAuthStore(self.ctx)

    def __repr__(self) -> str:
        return f"MongoStores({redact_url(self.url)!r})"

    async def _open(self) -> None:
        try:
            await self.ctx.db.command("ping")
            if self.check_indexes:
                await check(self.ctx.db, self.ctx.prefix)
            if self.push != "false":
                await self._listen()
        except BackendUnavailableError:
            await self._close()
            raise
        except Exception as exc:
            await self._close()
            translated = translate_error(exc)
            if translated is None:
                raise
            raise translated from exc

    async def _listen(self) -> None:
        """Start the change stream listener, where the server serves change streams."""
        listener = ChangeListener(self.ctx, self.wakeups)
        try:
            await listener.probe()
        except Unsupported as exc:
            if self.push == "true":
                raise BackendUnavailableError(
                    f"push=true, but this MongoDB refuses change streams ({exc}); they need "
                    "a replica set or a sharded cluster"
                ) from exc
            log.warning(
                "push: this MongoDB refuses change streams (%s); followers poll "
                "(a replica set or a sharded cluster serves them)",
                exc,
            )
            return
        listener.start()
        self.listener = listener

    async def _close(self) -> None:
        listener, self.listener = self.listener, None
        if listener is not None:
            await listener.close()
        while self.closing:
            self.closing.pop().close()
        if self._owned:
            await self._client.close()

    async def now(self) -> datetime:
        try:
            return await self.ctx.now()
        except Exception as exc:
            translated = translate_error(exc)
            if translated is None:
                raise
            raise translated from exc

    def langgraph_checkpointer(self, client: Any = None, **options: Any) -> Any:
        """A ``langgraph-checkpoint-mongodb`` ``MongoDBSaver`` on the same deployment (its
        own collections, in this bundle's database unless ``db_name=`` says otherwise);
        see :func:`agentstores_mongo.langgraph.checkpointer`.

        Raises:
            UnsupportedError: ``langgraph-checkpoint-mongodb`` is not installed.
            UsageError: built on an application's client and no sync ``client`` given.
        """
        from .langgraph import checkpointer

        return checkpointer(self, client, **options)


__all__ = ["MongoStores", "parse_url"]
