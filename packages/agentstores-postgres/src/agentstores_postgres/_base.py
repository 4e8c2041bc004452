"""What every PostgreSQL store shares: the database, the schema and the error edge."""

from __future__ import annotations

from datetime import timedelta

from agentstores.errors import AgentStoresError

from .database import Database
from .errors import translate
from .migrations import quote_ident


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
