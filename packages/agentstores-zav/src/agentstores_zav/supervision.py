"""The SDK's ChatStreamSupervisionStore on agentstores' supervision row and fence."""

from __future__ import annotations

import time
from collections.abc import Callable

from zav.agents_sdk.domain.chat_stream_supervision_store import (
    ChatStreamStatus,
    ChatStreamSupervision,
    ChatStreamSupervisionStore,
)

from agentstores import SupervisionRow

from .bundle import Bundle
from .epochs import Claim, claim_of, hold, offset_of
from .errors import sdk_errors
from .keys import key_of


class AgentStoresSupervisionStore(ChatStreamSupervisionStore):
    """Liveness row, send mutex and lease; the store stamps every heartbeat.

    ``heartbeat_at`` is written with the store's clock and read back as this process's
    ``clock()`` minus the heartbeat's age on the store's clock, so the SDK's
    ``clock() - heartbeat_at`` is an age measured on one clock: skew between replicas
    cannot make a live producer look dead. Epochs: see :mod:`agentstores_zav.epochs`.
    """

    def __init__(self, bundle: Bundle, *, clock: Callable[[], float] = time.time) -> None:
        self._bundle = bundle
        self._clock = clock

    async def compare_and_swap(
        self,
        tenant: str,
        requester_uuid: str | None,
        session_id: str,
        expected_epoch: int | None,
        supervision: ChatStreamSupervision,
    ) -> bool:
        stores = await self._bundle.stores()
        key, principal = key_of(tenant, requester_uuid, session_id)
        status = ChatStreamStatus(supervision.status).value
        async with sdk_errors(stores, key, principal):
            if expected_epoch is None:
                # A claim of a free slot: above everything the key has seen, whatever
                # epoch the SDK asks for (it always asks for 0).
                view = await stores.supervision.read(key, principal)
                if view.row is not None:
                    return False
                store_epoch = view.fence + 1
                row = SupervisionRow(status, supervision.message_id, store_epoch)
                if not await stores.supervision.compare_and_swap(key, principal, None, row):
                    return False
                hold(key, Claim(supervision.epoch, store_epoch, supervision.message_id))
                return True
            offset = offset_of(key)
            store_expected = expected_epoch + offset
            store_epoch = supervision.epoch + offset
            row = SupervisionRow(status, supervision.message_id, store_epoch)
            if not await stores.supervision.compare_and_swap(key, principal, store_expected, row):
                return False
            held = claim_of(key)
            if held is None or held.store_epoch != store_epoch:
                # A takeover (or a resume escalating the epoch): this task now holds it.
                hold(key, Claim(supervision.epoch, store_epoch, supervision.message_id))
            return True

    async def read(
        self, tenant: str, requester_uuid: str | None, session_id: str
    ) -> ChatStreamSupervision | None:
        stores = await self._bundle.stores()
        key, principal = key_of(tenant, requester_uuid, session_id)
        view = await stores.supervision.read(key, principal)
        row = view.row
        if row is None:
            return None
        stamped = row.heartbeat_at if row.heartbeat_at is not None else view.now
        age = (view.now - stamped).total_seconds()
        return ChatStreamSupervision(
            status=ChatStreamStatus(row.status),
            heartbeat_at=self._clock() - age,
            message_id=row.message_id,
            epoch=row.epoch - offset_of(key),
        )

    async def delete(
        self,
        tenant: str,
        requester_uuid: str | None,
        session_id: str,
        message_id: str,
        epoch: int,
    ) -> None:
        stores = await self._bundle.stores()
        key, principal = key_of(tenant, requester_uuid, session_id)
        async with sdk_errors(stores, key, principal):
            await stores.supervision.delete(key, principal, message_id, epoch + offset_of(key))


__all__ = ["AgentStoresSupervisionStore"]
