"""Registers the ``postgresql://`` backend. Imports no driver: discovery stays cheap."""

from __future__ import annotations

from agentstores.capabilities import Capability
from agentstores.plugins import BackendInfo, hookimpl

BACKEND = BackendInfo(
    name="postgres",
    schemes=("postgresql", "postgres"),
    factory="agentstores_postgres.stores:PostgresStores",
    capabilities=frozenset({Capability.MULTI_PROCESS, Capability.DURABLE}),
    distribution="agentstores-postgres",
    description="PostgreSQL via asyncpg; every store in SQL, one round trip per call.",
    durability=(
        "what the server's commit settings give: with synchronous_commit=on (the "
        "default) an acknowledged write survives a server crash"
    ),
    schema_installer="agentstores_postgres.schema:install",
)
"""The one declaration of this backend; its ``Stores`` class reads its capabilities here."""


@hookimpl
def agentstores_backends() -> list[BackendInfo]:
    return [BACKEND]
