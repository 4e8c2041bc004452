"""Erasure leaves nothing of an owner behind: once their last conversation is erased (by
them or by the sweeper), no document of the installation carries their id."""

from __future__ import annotations

import json
import uuid

from agentstores.keys import ConversationKey
from agentstores.models import Message
from agentstores.stores import OverCap
from agentstores_mongo._base import COLLECTIONS
from agentstores_mongo.stores import MongoStores
from tests.servers.mongo import Installation


async def _traces(stores: MongoStores, owner: str) -> list[str]:
    """``collection: _id`` of every document that holds ``owner``."""
    found = []
    for name in COLLECTIONS:
        async for doc in getattr(stores.ctx, name).find({}):
            if owner in json.dumps(doc, default=str):
                found.append(f"{name}: {doc['_id']}")
    return found


async def test_an_owner_with_no_conversation_left_leaves_no_trace(installed: Installation) -> None:
    tenant, owner = f"t-{uuid.uuid4().hex[:8]}", f"owner-{uuid.uuid4().hex}"
    a, b = ConversationKey(tenant, "a"), ConversationKey(tenant, "b")
    async with MongoStores(installed.url) as stores:
        for key in (a, b):
            await stores.conversations.append_messages(key, owner, [Message.user("hi")])
        assert await _traces(stores, owner)
        assert await stores.conversations.delete(a, owner)
        assert await stores.conversations.erase_if(b, OverCap(0))
        assert await _traces(stores, owner) == []
