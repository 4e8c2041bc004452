"""Registers the MongoDB backend. Imports nothing but core: no driver at discovery."""

from __future__ import annotations

from agentstores.capabilities import Capability
from agentstores.plugins import BackendInfo, hookimpl

DURABILITY = (
    "what the write concern gives: by default every write waits for w=majority (on a "
    "replica set an acknowledged write survives the loss of a minority and a failover; on "
    "a standalone server it is acknowledged once applied, and survives a restart with "
    "journaling on). Option write_concern=1 acknowledges on the primary alone (a failover "
    "can undo acknowledged writes, fence raises included). A write whose reply is lost is "
    "reconciled through its writer nonce or reported as UnknownOutcomeError."
)

BACKEND = BackendInfo(
    name="mongo",
    schemes=("mongodb", "mongodb+srv"),
    factory="agentstores_mongo.stores:MongoStores",
    capabilities=frozenset({Capability.MULTI_PROCESS, Capability.DURABLE}),
    distribution="agentstores-mongo",
    description=(
        "MongoDB via PyMongo's AsyncMongoClient; a header document per conversation is the "
        "commit point (filtered update_one judged by matched_count), server clock"
    ),
    durability=DURABILITY,
    schema_installer="agentstores_mongo.schema:install",
)
"""The one declaration of this backend; ``MongoStores`` reads its capabilities here."""


@hookimpl
def agentstores_backends() -> list[BackendInfo]:
    return [BACKEND]
