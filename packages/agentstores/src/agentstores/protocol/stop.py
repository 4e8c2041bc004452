"""Stopping the in-flight turn from any replica: fence its producer and keep what it said.

A stop is a claim like a takeover's: the new epoch fences the producer wherever it runs
(its next write is refused and it stops), so no message of the stopped turn can land
after the stop decided what the answer is. The partial answer kept is the latest
recorded snapshot: exactly what every follower could have seen, never more.
"""

from __future__ import annotations

from ..errors import BusyError
from ..keys import ConversationKey, validate_id
from ..models import Message, StoredMessage
from ..stores import Stores
from .follow import snapshot_text
from .lease import DEFAULT_LEASE_CONFIG, Lease, LeaseConfig, claim


async def stop_turn(
    stores: Stores,
    key: ConversationKey,
    principal: str,
    message_id: str | None = None,
    *,
    lease_config: LeaseConfig = DEFAULT_LEASE_CONFIG,
) -> StoredMessage | None:
    """Stop the running turn (``message_id``, or whichever runs): keep its partial answer.

    Claims the turn with a new epoch (fencing the producer, live or dead), appends the
    latest recorded snapshot's text as the assistant message with the turn's id, records
    last-turn status ``cancelled``, seals the turn ``done`` (a follower ends with that
    message) and drops the recording. A turn whose producer already appended its answer
    keeps that answer as it is (status left ``complete``).

    Returns:
        The assistant message the turn ends with; None when no turn (or not
        ``message_id``) is in flight, or it ended before the stop took it.

    Raises:
        NotOwnedError: ``principal`` does not own the conversation.
        BusyError: another turn kept starting while the stop tried to take one
            (``lease_config.claim_attempts`` times).
        UsageError: a malformed ``message_id``.
    """
    if message_id is not None:
        validate_id(message_id, "message_id")
    for attempt in range(lease_config.claim_attempts):
        row = (await stores.supervision.read(key, principal)).row
        if row is None or row.status != "running":
            return None
        if message_id is not None and row.message_id != message_id:
            return None
        try:
            lease = await claim(
                stores, key, principal, row.message_id, lease_config=lease_config, resume_live=True
            )
        except BusyError:  # the turn ended and another began between the read and the claim
            if attempt + 1 == lease_config.claim_attempts:
                raise
            continue
        return await _keep_partial(lease)
    return None  # pragma: no cover - the loop returns or raises


async def _keep_partial(lease: Lease) -> StoredMessage | None:
    """Under the stop's lease: append the partial answer, mark cancelled, seal, clean up."""
    stores, key, principal, mid = lease.stores, lease.key, lease.principal, lease.message_id
    previous = lease.previous
    if previous is None or previous.status != "running" or previous.message_id != mid:
        # It ended between the read and the claim: put a verdict back, keep nothing new.
        if previous is None:
            await lease.release()
        else:
            await lease.seal("errored" if previous.status == "errored" else "done")
        return None
    tail = await stores.conversations.tail(key, principal, 1)
    if tail is not None and tail.messages and tail.messages[-1].id == mid:
        # The producer appended its whole answer before the stop took the turn: keep it.
        await lease.seal("done")
        await lease.drop_recording()
        return tail.messages[-1]
    record = await stores.recording.read(key, principal)
    text = ""
    if record is not None and record.message_id == mid:
        text = snapshot_text(record.message) or ""
    stored = await lease.append(
        [Message.assistant(text, id=mid)], create_if_absent=True, last_turn_status="cancelled"
    )
    await lease.seal("done")
    await lease.drop_recording()
    return stored[0] if stored else None


__all__ = ["stop_turn"]
