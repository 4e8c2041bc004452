"""``list_sessions``: a principal's sessions, newest first, from the conversation listing."""

from __future__ import annotations

from dataclasses import dataclass

from agentstores import ConversationInfo, Stores
from agentstores.keys import validate_principal

from .rows import SESSION_METADATA

_MARK = next(iter(SESSION_METADATA))


@dataclass(frozen=True, slots=True)
class SessionPage:
    """One page of :func:`list_sessions`: pass ``next_cursor`` back for the next one."""

    sessions: list[ConversationInfo]
    next_cursor: str | None

    @property
    def session_ids(self) -> list[str]:
        return [info.key.session_id for info in self.sessions]


async def list_sessions(
    stores: Stores, *, tenant: str, principal: str, limit: int = 50, cursor: str | None = None
) -> SessionPage:
    """``principal``'s own sessions in ``tenant`` (conversations an ``AgentStoresSession``
    created), newest activity first, in keyset pages of the conversation listing (a page
    can hold fewer than ``limit`` when other conversations share the listing).

    Raises:
        UsageError: a malformed tenant or principal, a limit outside 1..1000, or a
            cursor the store did not produce.
    """
    page = await stores.conversations.list_conversations(
        tenant, validate_principal(principal), limit=limit, cursor=cursor
    )
    mine = [info for info in page.items if info.metadata.get(_MARK) is True]
    return SessionPage(mine, page.next_cursor)


__all__ = ["SessionPage", "list_sessions"]
