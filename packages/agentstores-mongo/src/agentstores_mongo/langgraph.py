"""LangGraph's checkpointer beside the stores: a ``langgraph-checkpoint-mongodb``
``MongoDBSaver`` on the same deployment, in collections of its own."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentstores.errors import UnsupportedError, UsageError

if TYPE_CHECKING:
    from .stores import MongoStores


def checkpointer(stores: MongoStores, client: Any = None, **options: Any) -> Any:
    """A ``MongoDBSaver`` in ``stores``' database (``db_name=`` overrides it), its
    collections named after the bundle's prefix (``<prefix>checkpoints`` and
    ``<prefix>checkpoint_writes`` unless given).

    The saver needs a synchronous ``pymongo.MongoClient``: ``client`` when given (the
    caller closes it), else one made from the bundle's URL and closed with the bundle.

    Raises:
        UnsupportedError: ``langgraph-checkpoint-mongodb`` is not installed.
        UsageError: the bundle was built on an application's client and no ``client``
            was given (there is no URL to connect a synchronous twin with).
    """
    try:
        from langgraph.checkpoint.mongodb import MongoDBSaver
    except ImportError as exc:
        raise UnsupportedError(
            "stores.langgraph_checkpointer() needs langgraph-checkpoint-mongodb: "
            "pip install 'agentstores-mongo[langgraph]'"
        ) from exc
    ctx = stores.ctx
    if client is None:
        if stores.driver_url is None:
            raise UsageError(
                "this bundle uses the application's AsyncMongoClient: pass client= a "
                "pymongo.MongoClient for the saver"
            )
        from pymongo import MongoClient

        client = MongoClient(stores.driver_url, tz_aware=True, **stores.client_options)
        stores.closing.append(client)
    options.setdefault("db_name", ctx.db.name)
    options.setdefault("checkpoint_collection_name", f"{ctx.prefix}checkpoints")
    options.setdefault("writes_collection_name", f"{ctx.prefix}checkpoint_writes")
    return MongoDBSaver(client, **options)


__all__ = ["checkpointer"]
