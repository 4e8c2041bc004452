"""The indexes the adapter needs, ``agentstores schema install mongodb://...`` (which
creates them) and the check the adapter runs at open (which refuses, naming what is
missing). The adapter itself never creates an index.
"""

from __future__ import annotations

from typing import Any

from agentstores.errors import BackendUnavailableError

INDEXES: dict[str, list[tuple[str, list[tuple[str, int]], dict[str, Any]]]] = {
    "keys": [
        ("as_list", [("t", 1), ("lo", 1), ("u", -1), ("s", -1)], {}),
        ("as_expired", [("lv", 1), ("cx", 1)], {}),
        ("as_idle", [("lv", 1), ("u", 1)], {}),
    ],
    "messages": [
        ("as_seq", [("c", 1), ("s", 1)], {"unique": True}),
        ("as_rank", [("q", 1)], {}),
        ("as_id", [("ci", 1)], {}),
        ("as_writer", [("c", 1), ("w", 1)], {}),
    ],
    "state": [("as_version", [("g", 1), ("w", 1)], {})],
    "tokens": [("as_token", [("g", 1), ("t", 1)], {"unique": True})],
    "oauth_users": [
        ("as_user", [("t", 1), ("u", 1), ("n", 1)], {}),
        ("as_pending", [("ps", 1)], {}),
    ],
    "oauth_clients": [("as_tenant", [("t", 1), ("n", 1)], {})],
}
"""Per collection (without the prefix): (index name, keys, options)."""


async def missing_indexes(db: Any, prefix: str) -> list[str]:
    """``collection.index`` for every index the adapter needs that ``db`` lacks.

    Indexes are recognised by their fields (in order) and uniqueness, not by name or
    direction: nx-27017 renames indexes and keeps every direction ascending.
    """
    missing: list[str] = []
    for name, wanted in INDEXES.items():
        have = {
            (tuple(field for field, _ in ix["key"].items()), bool(ix.get("unique")))
            async for ix in await db[prefix + name].list_indexes()
        }
        missing.extend(
            f"{prefix}{name}.{ix}"
            for ix, keys, options in wanted
            if (tuple(field for field, _ in keys), bool(options.get("unique"))) not in have
        )
    return missing


async def create_indexes(db: Any, prefix: str) -> list[str]:
    """Create every missing index; returns what it created."""
    from pymongo import IndexModel

    created: list[str] = []
    for name, wanted in INDEXES.items():
        models = [IndexModel(keys, name=ix, **options) for ix, keys, options in wanted]
        created.extend(
            f"{prefix}{name}.{ix}" for ix in await db[prefix + name].create_indexes(models)
        )
    return created


async def check(db: Any, prefix: str) -> None:
    """Raise ``BackendUnavailableError`` naming the missing indexes, if any."""
    missing = await missing_indexes(db, prefix)
    if missing:
        raise BackendUnavailableError(
            "the MongoDB database is not set up for agentstores: missing indexes "
            + ", ".join(missing)
            + "; run `agentstores schema install <the same URL>` as an administrator"
        )


async def install(url: str, *, schema: str | None = None, runtime_role: str | None = None) -> str:
    """Create the collections' indexes at ``url`` (``schema`` overrides the collection
    prefix; MongoDB roles are managed by the deployment, so ``runtime_role`` is refused)."""
    from agentstores.errors import UsageError

    from .stores import MongoStores

    if runtime_role is not None:
        raise UsageError("MongoDB roles are granted by the deployment; drop --runtime-role")
    options: dict[str, Any] = {"check_indexes": False}
    if schema is not None:
        options["collection_prefix"] = schema
    stores = MongoStores(url, **options)
    async with stores:
        ctx = stores.ctx
        created = await create_indexes(ctx.db, ctx.prefix)
        still = await missing_indexes(ctx.db, ctx.prefix)
    if still:
        raise BackendUnavailableError("indexes still missing after install: " + ", ".join(still))
    return (
        f"agentstores-mongo: {len(created)} indexes present in database {ctx.db.name!r} "
        f"under prefix {ctx.prefix!r}"
    )


__all__ = ["INDEXES", "check", "create_indexes", "install", "missing_indexes"]
