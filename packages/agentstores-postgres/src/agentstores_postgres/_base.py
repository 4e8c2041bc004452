"""What every PostgreSQL store shares: the database, the schema and the error edge."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

from agentstores.errors import AgentStoresError

from .database import Conn, Database, Reconcile
from .errors import translate, translate_refusal
from .migrations import quote_ident

T = TypeVar("T")


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
            raise refused from exc

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
