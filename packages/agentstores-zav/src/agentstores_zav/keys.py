"""The SDK's tenancy triple as an agentstores key and principal."""

from __future__ import annotations

from agentstores import ConversationKey


def key_of(tenant: str, requester_uuid: str | None, session_id: str) -> tuple[ConversationKey, str]:
    """``(tenant, session_id)`` is the conversation; the requester is the principal.

    The SDK keys the transcript by ``(tenant, session_id)`` with the requester as owner,
    and normalises a missing requester to ``""``; the other stores take the same triple,
    so every store of one conversation shares one key (and one fence and one owner).
    """
    return ConversationKey(tenant, session_id), requester_uuid or ""
