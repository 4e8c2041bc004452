"""The SDK's ChatAgentStateStore on agentstores' fenced state blob."""

from __future__ import annotations

from typing import Any

from zav.agents_sdk.domain.chat_agent_state_store import ChatAgentStateStore

from .bundle import Bundle
from .errors import sdk_errors
from .keys import key_of


class AgentStoresStateStore(ChatAgentStateStore):
    """Checkpoints a resumed turn revives from.

    The SDK passes no epoch: inside a producing task the write carries the lease's epoch
    (the ambient epoch the supervision claim set), so a producer that lost its lease
    gets ``FencedError`` instead of overwriting its successor's checkpoint.
    """

    def __init__(self, bundle: Bundle) -> None:
        self._bundle = bundle

    async def load(
        self, tenant: str, user_uuid: str | None, session_id: str
    ) -> dict[str, dict[str, Any]]:
        stores = await self._bundle.stores()
        key, principal = key_of(tenant, user_uuid, session_id)
        return await stores.state.load(key, principal)

    async def save(
        self,
        tenant: str,
        user_uuid: str | None,
        session_id: str,
        state: dict[str, dict[str, Any]],
    ) -> None:
        stores = await self._bundle.stores()
        key, principal = key_of(tenant, user_uuid, session_id)
        async with sdk_errors(stores, key, principal):
            await stores.state.save(key, principal, state)

    async def delete(self, tenant: str, user_uuid: str | None, session_id: str) -> None:
        stores = await self._bundle.stores()
        key, principal = key_of(tenant, user_uuid, session_id)
        async with sdk_errors(stores, key, principal):
            await stores.state.delete(key, principal)


__all__ = ["AgentStoresStateStore"]
