"""The store's clock: stamps and expiry use it, never the caller's."""

from __future__ import annotations

from datetime import datetime, timedelta

from agentstores.errors import ExpiredError
from agentstores.keys import ConversationKey
from agentstores.models import Message, SupervisionRow
from agentstores.stores import Expired, Stores

from .backend import BackendUnderTest
from .base import ContractBase
from .promises import promise
from .scenarios import raises


def within(stamp: datetime | None, lo: datetime, hi: datetime, what: str) -> None:
    assert stamp is not None and stamp.tzinfo is not None, f"{what} must be timezone-aware"
    assert lo <= stamp <= hi, (
        f"{what} = {stamp.isoformat()} is outside the store clock's readings around the call "
        f"[{lo.isoformat()}, {hi.isoformat()}]: it was not taken from the store clock"
    )


class ClockContract(ContractBase):
    @promise("clock.stamps")
    def test_stamps_come_from_the_store_clock(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            before = await stores.now()
            assert before.tzinfo is not None, "Stores.now() must be timezone-aware"
            assert await stores.supervision.compare_and_swap(
                key, "p", None, SupervisionRow("running", "m", 1)
            )
            view = await stores.supervision.read(key, "p")
            after = await stores.now()
            assert view.row is not None
            within(view.row.heartbeat_at, before, after, "heartbeat_at")
            within(view.now, before, after, "SupervisionStore.read's now")
            before = await stores.now()
            stored = await stores.conversations.append_messages(key, "p", [Message("m", "user", 1)])
            after = await stores.now()
            within(stored[0].created_at, before, after, "created_at")
            info = await stores.conversations.get_conversation(key, "p")
            assert info is not None
            within(info.created_at, before, after, "conversation created_at")
            within(info.updated_at, before, after, "conversation updated_at")
            rows = await stores.conversations.get_transcript(key, "p", index=0)
            assert rows[0].created_at == stored[0].created_at

        self.run(backend, body)

    @promise("clock.expiry")
    def test_expiry_uses_the_store_clock(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            now = await stores.now()
            soon, gone = now + timedelta(minutes=10), now - timedelta(minutes=10)
            tokens = stores.pause_tokens
            await tokens.put("fresh", key, "p", 1, soon)
            await tokens.put("stale", key, "p", 2, gone)
            await raises(ExpiredError, tokens.claim("stale", key, "p"), "a token past expires_at")
            assert await tokens.claim("fresh", key, "p") == 1, (
                "a token expiring in ten minutes on the store clock was refused"
            )
            conv = stores.conversations
            live = ConversationKey(key.tenant, "live")
            dead = ConversationKey(key.tenant, "dead")
            await conv.append_messages(live, "p", [Message("m", "user", 1)], expires_at=soon)
            await conv.append_messages(dead, "p", [Message("m", "user", 1)], expires_at=gone)
            assert not await conv.erase_if(live, Expired()), "erased before its expiry"
            assert await conv.erase_if(dead, Expired()), "not erased after its expiry"

        self.run(backend, body)
