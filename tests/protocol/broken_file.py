"""A deliberately broken file backend for the drill: state saves ignore their epoch.

Everything else is the real file backend, so the drill must fail it only for the
promise it breaks (a fenced producer's checkpoint lands).
"""

from __future__ import annotations

from agentstores.keys import ConversationKey
from agentstores_file.stores import FileAgentStateStore, FileStores


class UnfencedState(FileAgentStateStore):
    async def _save(
        self, key: ConversationKey, principal: str, blob: bytes, epoch: int | None
    ) -> None:
        await super()._save(key, principal, blob, None)


def unfenced_state(url: str) -> FileStores:
    stores = FileStores(url)
    stores.state.__class__ = UnfencedState
    return stores
