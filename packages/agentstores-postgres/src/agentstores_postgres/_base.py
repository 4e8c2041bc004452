"""What every PostgreSQL store shares: the database, the schema and the error edge."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any, TypeVar

from agentstores.errors import AgentStoresError, ErasedError, Refusal, refusal_error

from .database import Conn, Database, Reconcile
from .errors import translate, translate_refusal
from .migrations import quote_ident

T = TypeVar("T")

_TOMBSTONE_LAPSES = (
    "SELECT erased_at + $3::interval FROM __S__.keys "
    "WHERE tenant = $1 AND session_id = $2 AND erased_at IS NOT NULL"
)
"""When a key's tombstone lapses; NULL when the key holds none."""


class PostgresStoreBase:
    """Mixin of every PostgreSQL store: the database, the quoted schema name, the
    tombstone retention the server-side functions are given."""

    def __init__(self, db: Database, tombstone_ttl: timedelta) -> None:
        self.db = db
        self.quoted_schema = quote_ident(db.schema)
        """The schema name as SQL writes it, substituted for ``__S__``."""
        self.ttl = tombstone_ttl

    def translate_error(self, exc: Exception) -> AgentStoresError | None:
        return translate(exc)

    async def write(
        self,
        run: Callable[[Conn], Awaitable[T]],
        reconcile: Reconcile[T] | None,
        *,
        what: str,
        **call: Any,
    ) -> T:
        """:meth:`Database.write`, with a refusal the server raises turned into its typed
        error here, carrying what the call knows and the server does not send back
        (``key``, the ``epoch`` the write carried, the tail it ``expected``)."""
        try:
            return await self.db.write(run, reconcile, what=what)
        except Exception as exc:
            refused = translate_refusal(exc, **call)
            if refused is None:
                raise
            if isinstance(refused, ErasedError):
                refused = await self._with_until(refused)
            raise refused from exc

    async def _with_until(self, erased: ErasedError) -> AgentStoresError:
        """``erased`` with ``until``: when the key's tombstone lapses (its ``erased_at``
        plus this bundle's ``tombstone_ttl``, the rule the functions apply).

        One read on the refusal path only, so every write stays one round trip. When that
        read fails, or the tombstone lapsed in between, the refusal stands without it.
        """
        key = erased.key
        if key is None or erased.until is not None:
            return erased

        async def run(conn: Conn) -> datetime | None:
            args = (key.tenant, key.session_id, self.ttl)
            until: datetime | None = await conn.fetchval(self.sql(_TOMBSTONE_LAPSES), *args)
            return until

        try:
            until = await self.db.read(run)
        except Exception:
            return erased
        if until is None:
            return erased
        return refusal_error(Refusal.ERASED, **{**erased.context, "until": until})

    def sql(self, text: str) -> str:
        """``text`` with ``__S__`` replaced by the quoted schema name (cached: asyncpg's
        statement cache is keyed by the exact text)."""
        cache: dict[str, str] = self.__dict__.setdefault("_sql", {})
        rendered = cache.get(text)
        if rendered is None:
            rendered = cache[text] = text.replace("__S__", self.quoted_schema)
        return rendered


VISIBLE = "k.erased_at IS NULL AND (k.owner = $3 OR $3 = ANY (k.shared_with))"
"""The visibility rule for reads; expects the header aliased ``k`` and principal at ``$3``."""
