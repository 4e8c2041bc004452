"""LangGraph's checkpointer beside the stores: a ``langgraph-checkpoint-mongodb``
``MongoDBSaver`` on the same deployment, in its own collections."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentstores.errors import UnsupportedError

if TYPE_CHECKING:
    from .stores import MongoStores


def checkpointer(stores: MongoStores, **options: Any) -> Any:
    """A ``MongoDBSaver`` in ``stores``' database (``db_name=`` overrides it). The saver
    takes a synchronous ``MongoClient``; it gets one of its own to the same deployment
    (closed with the saver's client), since PyMongo's clients are not interchangeable."""
    try:
        from langgraph.checkpoint.mongodb import MongoDBSaver
    except ImportError as exc:
        raise UnsupportedError(
            "stores.langgraph_checkpointer() needs langgraph-checkpoint-mongodb: "
            "pip install 'agentstores-mongo[langgraph]'"
        ) from exc
    from pymongo import MongoClient

    ctx = stores.ctx
    client: Any = MongoClient(**_client_options(ctx.client))
    options.setdefault("db_name", ctx.db.name)
    return MongoDBSaver(client, **options)


def _client_options(client: Any) -> dict[str, Any]:
    """Connection settings of an ``AsyncMongoClient`` for a synchronous twin."""
    opts = client.options
    hosts = [f"{host}:{port}" for host, port in client._topology_settings.seeds]
    kwargs: dict[str, Any] = {"host": hosts, "tz_aware": opts.codec_options.tz_aware}
    if opts.replica_set_name:
        kwargs["replicaSet"] = opts.replica_set_name
    creds = opts._credentials
    if creds is not None:
        kwargs.update(username=creds.username, password=creds.password, authSource=creds.source)
    if opts.direct_connection is not None:
        kwargs["directConnection"] = opts.direct_connection
    return kwargs


__all__ = ["checkpointer"]
