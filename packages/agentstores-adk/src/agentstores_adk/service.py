"""``AgentStoresSessionService``: ADK's session service over any agentstores backend.

A session is one conversation (see :mod:`.keys`): a header message, then one message
per event (:mod:`.events`); its state is the conversation's metadata, merged in the same
atomic append as the event that changed it (:mod:`.state`). Every append is conditioned
on the transcript tail the session object last saw, so a second writer is refused
(:class:`.StaleSessionWriteError`) instead of interleaving its events with the first's.
Reads fetch only the events asked for, beside the app and user state (concurrently):
the last ``num_recent_events`` and the metadata are the store's one-snapshot ``tail``
read; ``after_timestamp`` walks back from the tail a page at a time.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Coroutine
from typing import Any

from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.sessions.base_session_service import (
    BaseSessionService,
    GetSessionConfig,
    ListSessionsResponse,
)
from google.adk.sessions.session import Session

from agentstores import (
    ConversationInfo,
    ConversationKey,
    NotFoundError,
    StaleWriteError,
    Stores,
    UsageError,
)
from agentstores.keys import validate_principal
from agentstores.models import StoredMessage
from agentstores.protocol import settled
from agentstores.stores.kit import decode_cursor

from . import keys
from . import state as scopes
from .config import EventPage, SessionPage
from .errors import StaleSessionWriteError
from .events import HEADER_ID, from_message, header, to_message
from .identity import Identities, Identity, IdentityResolver

PAGE = 100
"""Events per read when ``after_timestamp`` walks back from the tail."""
LIST_PAGE = 1000
"""Conversations per read when ``list_sessions`` collects every session."""
SNAPSHOT_TRIES = 5
"""Reads of a session's metadata and events before giving up on a consistent pair (each
retry means another writer appended between the two reads)."""


class AgentStoresSessionService(BaseSessionService):
    """ADK's ``BaseSessionService`` on agentstores' conversation store.

    Give either a fixed identity (``tenant=``, ``principal=``) or ``identity=``, a resolver
    the application supplies (see :mod:`.identity`); every call's ``user_id`` must be the
    principal it acts as. ``app_principal`` owns each app's ``app:`` state (default
    ``""``, "no user": the application itself).
    """

    def __init__(
        self,
        stores: Stores,
        *,
        tenant: str | None = None,
        principal: str | None = None,
        identity: IdentityResolver | None = None,
        app_principal: str = "",
    ) -> None:
        self.stores = stores
        self._identities = Identities(tenant, principal, identity)
        self.app_principal = validate_principal(app_principal)

    # --- identity and keys ----------------------------------------------------------

    def identity(self, app_name: str, user_id: str) -> Identity:
        """``(tenant, principal)`` of a call for ``user_id`` (``UserMismatchError`` when
        ``user_id`` is not the principal the application says the call acts as)."""
        return self._identities(app_name, user_id)

    def session_key(self, *, app_name: str, user_id: str, session_id: str) -> ConversationKey:
        """The conversation holding the session: run a turn under a lease on it (or
        ``fenced_as(key, epoch)``) and every append of the turn carries the lease's epoch."""
        tenant, _ = self.identity(app_name, user_id)
        return keys.session_key(tenant, app_name, user_id, _session_id(session_id))

    # --- sessions -------------------------------------------------------------------

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        tenant, principal = self.identity(app_name, user_id)
        stripped = session_id.strip() if session_id else None
        session_id = stripped or str(uuid.uuid4())
        key = keys.session_key(tenant, app_name, user_id, session_id)
        app, user, own = scopes.split(state or {})
        created = time.time()
        metadata = scopes.to_metadata(own) | {scopes.UPDATED: created}

        async def write() -> None:
            stored = await self.stores.conversations.append_messages(
                key,
                principal,
                [header(app_name, user_id, session_id)],
                expected_tail=None,
                metadata=metadata,
            )
            if not stored:
                raise AlreadyExistsError(f"Session with id {session_id} already exists.")
            await self._merge_shared(tenant, principal, app_name, user_id, app, user)

        try:
            await settled(write())
        except StaleWriteError:
            raise AlreadyExistsError(f"Session with id {session_id} already exists.") from None
        app_state, user_state = await self._shared(tenant, principal, app_name, user_id)
        session = Session(
            id=session_id,
            app_name=app_name,
            user_id=user_id,
            state=scopes.merged(app_state, user_state, own),
            last_update_time=created,
        )
        session._storage_update_marker = HEADER_ID
        return session

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        tenant, principal = self.identity(app_name, user_id)
        session_id = _session_id(session_id)
        key = keys.session_key(tenant, app_name, user_id, session_id)
        # One gather of the three reads (not the app and user reads in a gather of their
        # own): each nesting costs a task and a loop pass.
        snapshot, app_info, user_info = await asyncio.gather(
            self._snapshot(key, principal, config),
            *self._shared_reads(tenant, principal, app_name, user_id),
        )
        if snapshot is None:
            return None
        info, events = snapshot
        app_state, user_state = _shared_state(app_info, user_info)
        session = _session(info, app_name, user_id, session_id, app_state, user_state)
        session.events = events
        session._storage_update_marker = info.tail_message_id
        return session

    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        """Every session of the acting principal in ``app_name``, least recently updated
        first, without events. ``user_id=None`` lists the acting principal's sessions,
        never every user's (another user's sessions are not this principal's to see)."""
        sessions: list[Session] = []
        token: str | None = None
        while True:
            page = await self.list_sessions_page(
                app_name=app_name, user_id=user_id, page_size=LIST_PAGE, page_token=token
            )
            sessions.extend(page.sessions)
            token = page.next_page_token
            if token is None:
                break
        sessions.sort(key=lambda s: (s.last_update_time, s.id))
        return ListSessionsResponse(sessions=sessions)

    async def list_sessions_page(
        self,
        *,
        app_name: str,
        user_id: str | None = None,
        page_size: int = 100,
        page_token: str | None = None,
    ) -> SessionPage:
        """One page of the acting principal's sessions in ``app_name``, most recently
        updated first, without events: one store read of ``page_size`` conversations (a
        page holds fewer sessions when the principal has other conversations in the
        tenant, and may be empty with a next token)."""
        if user_id is None:
            tenant, principal = self._identities.acting(app_name)
            user_id = principal
        else:
            tenant, principal = self.identity(app_name, user_id)
        if page_token is not None:
            try:
                decode_cursor(page_token)
            except UsageError:
                raise UsageError("page_token is not one this service returned") from None
        page = await self.stores.conversations.list_conversations(
            tenant, principal, limit=page_size, cursor=page_token
        )
        prefix = keys.session_prefix(app_name, user_id)
        found = [(info, keys.session_id_of(info.key, prefix)) for info in page.items]
        found = [(info, sid) for info, sid in found if sid is not None]
        sessions: list[Session] = []
        if found:
            app_state, user_state = await self._shared(tenant, principal, app_name, user_id)
            for info, sid in found:
                assert sid is not None
                sessions.append(_session(info, app_name, user_id, sid, app_state, user_state))
        return SessionPage(sessions=sessions, next_page_token=page.next_cursor)

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """Erase the session (its events and state; app and user state stay): the
        conversation store's erasure, which leaves a tombstone, so the id cannot be
        created again."""
        tenant, principal = self.identity(app_name, user_id)
        key = keys.session_key(tenant, app_name, user_id, _session_id(session_id))
        await self.stores.conversations.delete(key, principal)

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        tenant, principal = self.identity(app_name, user_id)
        info = await self.stores.conversations.get_conversation(
            keys.user_state_key(tenant, app_name, user_id), principal
        )
        return {} if info is None else scopes.from_metadata(info.metadata)

    # --- events ---------------------------------------------------------------------

    async def append_event(self, session: Session, event: Event) -> Event:
        """Store ``event`` and the non-temporary part of its state delta, atomically,
        iff the stored session is still the one ``session`` was loaded as.

        Raises:
            StaleSessionWriteError: another writer appended since ``session`` was loaded
                (or last appended to); nothing was written.
            SessionNotFoundError: the session does not exist (or was deleted).
            UserMismatchError: ``session.user_id`` is not the acting principal.
            FencedError: a turn lease on the session was taken over.
        """
        if event.partial:
            return event
        tenant, principal = self.identity(session.app_name, session.user_id)
        key = keys.session_key(tenant, session.app_name, session.user_id, session.id)
        self._apply_temp_state(session, event)
        event = self._trim_temp_delta_state(event)
        if not event.id:
            event.id = Event.new_id()
        delta = event.actions.state_delta if event.actions and event.actions.state_delta else {}
        app, user, own = scopes.split(delta)
        expected = session._storage_update_marker
        if expected is None:
            # A session object this service did not load: the last event it holds is
            # what it saw (header: none).
            expected = session.events[-1].id if session.events else HEADER_ID
        message = to_message(event)
        metadata = scopes.to_metadata(own) | {scopes.UPDATED: event.timestamp}

        async def write() -> None:
            await self.stores.conversations.append_messages(
                key,
                principal,
                [message],
                create_if_absent=False,
                expected_tail=expected,
                metadata=metadata,
            )
            await self._merge_shared(
                tenant, principal, session.app_name, session.user_id, app, user
            )

        try:
            await settled(write())
        except StaleWriteError as exc:
            raise StaleSessionWriteError(
                f"session {session.id!r} was appended to since this session object was "
                f"loaded (it saw {exc.expected!r} last, the session now ends at "
                f"{exc.tail!r}): another writer is running on it; reload it with "
                "get_session to continue",
                expected=exc.expected,
                tail=exc.tail,
            ) from exc
        except NotFoundError as exc:
            raise SessionNotFoundError(f"Session {session.id} not found.") from exc
        session.last_update_time = event.timestamp
        session._storage_update_marker = event.id
        return self._commit_event_to_session(session, event)

    # --- internals ------------------------------------------------------------------

    async def _snapshot(
        self, key: ConversationKey, principal: str, config: GetSessionConfig | None
    ) -> tuple[ConversationInfo, list[Event]] | None:
        """The session's metadata and the events ``config`` asks for, read so that the
        events end where the metadata's tail says.

        The last ``n`` events are the store's ``tail`` read (one snapshot, one request
        where the store answers it in one); a page goes to the store together with the
        metadata read; every event, or those after a time, are read once the metadata
        says where the session ends (again when a writer came between)."""
        conversations = self.stores.conversations
        if isinstance(config, EventPage):
            info, rows = await asyncio.gather(
                conversations.get_conversation(key, principal),
                conversations.read_messages(
                    key, principal, start=1 + config.start, limit=config.limit
                ),
            )
            return None if info is None else (info, _events(rows))
        recent = None if config is None else config.num_recent_events
        after = None if config is None else config.after_timestamp
        if recent is not None and after is None:
            found = await conversations.tail(key, principal, max(0, recent))
            if found is None:
                return None
            return found.info, _events([row for row in found.messages if row.seq > 0])
        for _ in range(SNAPSHOT_TRIES):
            info = await conversations.get_conversation(key, principal)
            if info is None:
                return None
            count = info.message_count
            if recent == 0:
                return info, []
            start = 1 if recent is None else max(1, count - recent)
            if after is None:
                rows = await conversations.read_messages(key, principal, start=start)
                if _ends_at(rows, info, start):
                    return info, _events(rows)
                continue
            events = await self._after(key, principal, info, start, after)
            if events is not None:
                return info, events
        raise StaleWriteError(
            f"{key.session_id!r} kept changing while it was read ({SNAPSHOT_TRIES} tries)"
        )

    async def _after(
        self, key: ConversationKey, principal: str, info: ConversationInfo, floor: int, after: float
    ) -> list[Event] | None:
        """The events after the last one (from position ``floor`` on) older than
        ``after``, as ADK's in-memory service defines them: read back from the tail a page
        at a time, stopping at that event. None if the session grew meanwhile."""
        end = info.message_count
        found: list[Event] = []
        while end > floor:
            start = max(floor, end - PAGE)
            rows = await self.stores.conversations.read_messages(
                key, principal, start=start, limit=end - start
            )
            if end == info.message_count and not _ends_at(rows, info, start):
                return None
            page = _events(rows)
            for index in range(len(page) - 1, -1, -1):
                if page[index].timestamp < after:
                    return page[index + 1 :] + found
            found = page + found
            end = start
        return found

    async def _shared(
        self, tenant: str, principal: str, app_name: str, user_id: str
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """``(app state, user state)`` of ``app_name`` and ``user_id``."""
        app_info, user_info = await asyncio.gather(
            *self._shared_reads(tenant, principal, app_name, user_id)
        )
        return _shared_state(app_info, user_info)

    def _shared_reads(
        self, tenant: str, principal: str, app_name: str, user_id: str
    ) -> tuple[
        Coroutine[Any, Any, ConversationInfo | None], Coroutine[Any, Any, ConversationInfo | None]
    ]:
        """The reads of ``app_name``'s state and ``user_id``'s (not yet awaited)."""
        conversations = self.stores.conversations
        return (
            conversations.get_conversation(
                keys.app_state_key(tenant, app_name), self.app_principal
            ),
            conversations.get_conversation(
                keys.user_state_key(tenant, app_name, user_id), principal
            ),
        )

    async def _merge_shared(
        self,
        tenant: str,
        principal: str,
        app_name: str,
        user_id: str,
        app: dict[str, Any],
        user: dict[str, Any],
    ) -> None:
        """Merge ``app`` and ``user`` state deltas into their conversations (each merge
        atomic; created on first use)."""
        writes: list[Awaitable[object]] = []
        conversations = self.stores.conversations
        if app:
            writes.append(
                conversations.append_messages(
                    keys.app_state_key(tenant, app_name),
                    self.app_principal,
                    [],
                    metadata=scopes.to_metadata(app),
                )
            )
        if user:
            writes.append(
                conversations.append_messages(
                    keys.user_state_key(tenant, app_name, user_id),
                    principal,
                    [],
                    metadata=scopes.to_metadata(user),
                )
            )
        if writes:
            await asyncio.gather(*writes)


def _shared_state(
    app_info: ConversationInfo | None, user_info: ConversationInfo | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(app state, user state)`` from the conversations that hold them."""
    return (
        {} if app_info is None else scopes.from_metadata(app_info.metadata),
        {} if user_info is None else scopes.from_metadata(user_info.metadata),
    )


def _session_id(session_id: str) -> str:
    if not isinstance(session_id, str):
        raise UsageError(f"session_id must be a str, got {type(session_id).__name__}")
    return session_id.strip()


def _events(rows: list[StoredMessage]) -> list[Event]:
    return [from_message(row) for row in rows]


def _ends_at(rows: list[Any], info: ConversationInfo, start: int) -> bool:
    """Whether ``rows`` (read from ``start`` to the end) end at the tail ``info`` saw."""
    if not rows:
        return start >= info.message_count
    return bool(rows[-1].id == info.tail_message_id and rows[-1].seq == info.message_count - 1)


def _session(
    info: ConversationInfo,
    app_name: str,
    user_id: str,
    session_id: str,
    app_state: dict[str, Any],
    user_state: dict[str, Any],
) -> Session:
    updated = info.metadata.get(scopes.UPDATED)
    return Session(
        id=session_id,
        app_name=app_name,
        user_id=user_id,
        state=scopes.merged(app_state, user_state, scopes.from_metadata(info.metadata)),
        last_update_time=float(updated) if updated is not None else info.updated_at.timestamp(),
    )


__all__ = ["AgentStoresSessionService"]
