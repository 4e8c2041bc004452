"""Reconciliation write by write, after a reply lost once the write committed, and the
read retry.

What must hold (the promise of test_faults.py): a call that reports success took effect
exactly once; a write whose reply was lost after it landed is reported as landed, with
the value an answered call returns, never as unknown when its rows prove it, and never
as landed when they do not (the read-back looks at the call's own row: another row
holding the same state proves nothing); when the server process that ran a lost write
cannot be identified (as behind a pooler that hands the client a process id of its own),
only a found nonce counts (a read-back showing the write absent is no proof: that
process may still commit it); a read whose connection breaks, or is found
broken before anything was sent, is answered from a fresh connection.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import pytest

from agentstores.errors import AlreadyClaimedError, UnknownOutcomeError
from agentstores.keys import ConversationKey
from agentstores.models import (
    ClientInfo,
    Message,
    PendingAuthorization,
    SupervisionRow,
    UserIntegration,
)
from tests.servers.relay import CHUNK, Relay

from .conftest import PgServer
from .faultproxy import FaultProxy
from .test_faults import _key, _proxy, _row_locked, _stores, _through, _waiting_backend

P = "owner"

_IDENTIFY = b"WHERE pid = pg_backend_pid()"
"""The condition of the query the adapter runs as each connection opens, to learn when
the server process behind it started (``Database._identify``)."""
_NO_ROW = b"WHERE false".ljust(len(_IDENTIFY))
_TERMINATE = b"X\x00\x00\x00\x04"
"""The protocol's Terminate message: what asyncpg sends as it closes a connection."""
_ANSWERED_BY_A_BYTE = {80877103, 80877104}
"""The codes of SSLRequest and GSSENCRequest: the server answers each with one byte."""
_CANCEL = 80877102
"""The code of CancelRequest, which names the process to interrupt by its id."""
_FAKE_PID = 1_000_000_000
"""Added to a server process id by ``fake_pid``: beyond any process id the system hands
out (at most 2**22 on Linux), so the id sent to the client names no server process."""


class _Handshake:
    """The startup of one relayed connection, read message by message (a message may
    be split across reads, or several share one) until the server's first ReadyForQuery,
    with the process id of its BackendKeyData rewritten, as a pooler in session mode
    does; every byte after passes through untouched."""

    def __init__(self, wire: _Wire) -> None:
        self.wire = wire
        self.from_client = b""
        """Bytes of an untyped startup message the client has not finished sending."""
        self.from_server = b""
        self.client_done = self.server_done = False
        self.answers = 0
        """Negotiation requests the server has still to answer with its one byte."""

    def client(self, data: bytes) -> bytes:
        """``data`` from the client, as it goes on to the server: negotiation requests,
        then a StartupMessage, or a CancelRequest (a faked id it names: mapped back)."""
        if self.client_done:
            return data
        buf, out = self.from_client + data, b""
        while len(buf) >= 8 and len(buf) >= (end := int.from_bytes(buf[:4])):
            msg, buf = buf[:end], buf[end:]
            code = int.from_bytes(msg[4:8])
            if code in _ANSWERED_BY_A_BYTE:
                self.answers += 1
            else:
                self.client_done = True
                if code == _CANCEL:
                    real = self.wire.faked.get(int.from_bytes(msg[8:12]))
                    if real is not None:
                        msg = msg[:8] + real.to_bytes(4) + msg[12:]
                out += msg
                return out + buf
            out += msg
        self.from_client = buf
        return out

    def server(self, data: bytes) -> bytes:
        """``data`` from the server, as it goes on to the client."""
        if self.server_done:
            return data
        buf, out = self.from_server + data, b""
        while buf:
            if self.answers:
                self.answers -= 1
                answer, buf = buf[:1], buf[1:]
                out += answer
                if answer != b"N":  # encrypted from here on: nothing left to read
                    self.server_done = True
                    return out + buf
                continue
            if len(buf) < 5 or len(buf) < (end := 1 + int.from_bytes(buf[1:5])):
                break
            msg, buf = buf[:end], buf[end:]
            if msg[:1] == b"K":
                real = int.from_bytes(msg[5:9])
                self.wire.faked[real + _FAKE_PID] = real
                msg = msg[:5] + (real + _FAKE_PID).to_bytes(4) + msg[9:]
            out += msg
            if msg[:1] == b"Z":
                self.server_done = True
                return out + buf
        self.from_server = buf
        return out


class _Wire(Relay):
    """A relay with faults :class:`FaultProxy` cannot make, each off unless asked for.

    - ``hide_start``: the query above finds no row (rewritten in flight, same length): a
      server that does not tell when the process behind a connection started, so the
      adapter cannot identify that process.
    - ``fake_pid``: the process id the server hands the client as the connection starts
      (BackendKeyData) is replaced by one of the relay's own (:attr:`faked`), as a
      pooler in session mode does; a CancelRequest naming it is mapped back.
    - :meth:`close_late_next`: the next connection the server closes (after its last
      bytes, such as the FATAL error of a terminated backend) stays open towards the
      client until the client writes or closes: asyncpg has read the error but not yet
      the close.
    - :meth:`drop`: every relayed connection closes now, on both sides; a server process
      busy with a request (waiting on a lock) keeps running it.
    """

    def __init__(
        self, host: str, port: int, *, hide_start: bool = False, fake_pid: bool = False
    ) -> None:
        super().__init__(host, port)
        self.hide_start = hide_start
        self.fake_pid = fake_pid
        self.faked: dict[int, int] = {}
        """Each process id handed to a client by ``fake_pid`` -> the server's own."""
        self._late = False
        self.server_closed = asyncio.Event()
        """Set when the connection :meth:`close_late_next` armed for was closed by the
        server."""
        self.sent_after_close = 0
        """Requests (anything but Terminate) a client sent on a connection the server
        had closed."""

    def close_late_next(self) -> None:
        self.server_closed.clear()
        self._late = True

    def drop(self) -> None:
        for handler in list(self._handlers):
            handler.cancel()

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            server_r, server_w = await asyncio.open_connection(*self.target)
        except OSError:
            client_w.close()
            return
        handler = asyncio.current_task()
        assert handler is not None
        self._handlers.add(handler)
        self._writers.update({client_w, server_w})
        closed = False
        handshake = _Handshake(self) if self.fake_pid else None

        async def upstream() -> None:
            while data := await client_r.read(CHUNK):
                if closed:
                    self.sent_after_close += data != _TERMINATE
                    return
                if handshake is not None and not (data := handshake.client(data)):
                    continue
                if self.hide_start:
                    data = data.replace(_IDENTIFY, _NO_ROW)
                server_w.write(data)
                await server_w.drain()

        async def downstream() -> None:
            nonlocal closed
            while data := await server_r.read(CHUNK):
                if handshake is not None and not (data := handshake.server(data)):
                    continue
                client_w.write(data)
                await client_w.drain()
            closed = True
            if self._late:
                self._late = False
                self.server_closed.set()
                await asyncio.get_running_loop().create_future()  # until upstream ends

        pumps = [asyncio.create_task(upstream()), asyncio.create_task(downstream())]
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pump in pumps:
                pump.cancel()
            await asyncio.gather(*pumps, return_exceptions=True)
            for writer in (client_w, server_w):
                self._writers.discard(writer)
                with contextlib.suppress(Exception):
                    writer.close()
            self._handlers.discard(handler)


@contextlib.asynccontextmanager
async def _wire(pg: PgServer, **faults: bool) -> AsyncIterator[_Wire]:
    parts = urlsplit(pg.url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 5432
    wire = await _Wire(host, port, **faults).start()
    try:
        yield wire
    finally:
        await wire.close()


@contextlib.asynccontextmanager
async def _locked(pg: PgServer, table: str, **where: str) -> AsyncIterator[asyncpg.Connection]:
    """Hold the lock of one row of ``table`` (``where``: column = value) from an admin
    session, so an adapter's write of that row waits on it."""
    conn = await asyncpg.connect(pg.admin_url)
    tx = conn.transaction()
    await tx.start()
    try:
        cond = " AND ".join(f"{column} = ${i}" for i, column in enumerate(where, 1))
        locked = await conn.fetchval(
            f'SELECT 1 FROM "{pg.installation.schema}".{table} WHERE {cond} FOR UPDATE',
            *where.values(),
        )
        assert locked == 1
        yield conn
    finally:
        with contextlib.suppress(Exception):
            await tx.rollback()
        await conn.close()


async def _killed_while_waiting(pg: PgServer, lock: Any, call: Awaitable[Any]) -> Any:
    """Run ``call`` while ``lock`` (a :func:`_locked` context) holds the row it writes,
    terminate the backend running it there (so it never committed), release the lock;
    the call's result or error."""
    async with lock as admin:
        task = asyncio.ensure_future(call)
        pid = await _waiting_backend(admin, pg.installation.role)
        assert await admin.fetchval("SELECT pg_terminate_backend($1)", pid)
    return await task


async def _lost_reply(proxy: FaultProxy, call: Awaitable[Any]) -> Any:
    """``call`` with the server's reply to it lost after the write committed (warm its
    statement on the pooled connection first, so the cut hits the execution)."""
    proxy.cut_next_response()
    result = await call
    assert proxy.cut.is_set(), "the reply was not cut"
    return result


def _tokens(n: int) -> dict[str, Any]:
    return {"access_token": f"a{n}", "refresh_token": f"r{n}", "expires_in": 3600}


def _pending(state: str) -> PendingAuthorization:
    return PendingAuthorization(
        state=state,
        auth_url="https://auth.example/authorize",
        code_verifier="v" * 43,
        token_endpoint="https://auth.example/token",
        redirect_uri="https://app.example/callback",
        expires_at=datetime(2030, 1, 1, tzinfo=UTC),
    )


# --- a reply lost after commit: each write is proven landed -------------------------


async def test_lost_reply_of_an_abandon_is_landed_and_the_token_stays_abandoned(
    pg: PgServer,
) -> None:
    key = _key()
    async with _proxy(pg) as proxy, _stores(_through(pg.url, proxy.port), push=False) as stores:
        tokens = stores.pause_tokens
        expires = await stores.now() + timedelta(minutes=5)
        for t in ("t0", "t1"):
            await tokens.put(t, key, P, t, expires)
        await tokens.abandon("t0", key, P)  # warm
        assert await _lost_reply(proxy, tokens.abandon("t1", key, P)) is None
        with pytest.raises(AlreadyClaimedError) as info:
            await tokens.claim("t1", key, P)
        assert info.value.context.get("status") == "abandoned"


async def test_lost_replies_of_title_status_and_metadata_writes_are_landed(
    pg: PgServer,
) -> None:
    """The three writes a conversation row's nonce reconciles (``_conversation_written``)."""
    key = _key()
    async with _proxy(pg) as proxy, _stores(_through(pg.url, proxy.port), push=False) as stores:
        conv = stores.conversations
        await conv.append_messages(key, P, [Message("m0", "user", "hi")])

        await conv.set_title(key, P, "warm")
        assert await _lost_reply(proxy, conv.set_title(key, P, "lost reply")) is None
        await conv.set_last_turn_status(key, P, "running")
        assert await _lost_reply(proxy, conv.set_last_turn_status(key, P, "errored")) is None
        await conv.set_metadata(key, P, {"a": 0})
        assert await _lost_reply(proxy, conv.set_metadata(key, P, {"a": 1})) is None

        info = await conv.get_conversation(key, P)
        assert info is not None
        assert (info.title, info.last_turn_status) == ("lost reply", "errored")
        assert info.metadata == {"a": 1}


async def test_lost_reply_of_a_branch_is_landed_and_the_branch_is_there(pg: PgServer) -> None:
    key = _key()
    async with _proxy(pg) as proxy, _stores(_through(pg.url, proxy.port), push=False) as stores:
        conv = stores.conversations
        await conv.append_messages(key, P, [Message(f"m{i}", "user", i) for i in range(3)])
        await conv.branch(key, P, "m0", new_session_id="warm")
        new = await _lost_reply(proxy, conv.branch(key, P, "m1", new_session_id="branch"))
        assert new == ConversationKey(key.tenant, "branch")
        assert [m.content for m in await conv.read_messages(new, P)] == [0, 1]
        info = await conv.get_conversation(new, P)
        assert info is not None and info.message_count == 2


async def test_lost_reply_of_a_delete_returns_what_an_answered_delete_returns(
    pg: PgServer,
) -> None:
    keys = [ConversationKey(_key().tenant, f"s{i}") for i in range(2)]
    async with _proxy(pg) as proxy, _stores(_through(pg.url, proxy.port), push=False) as stores:
        conv = stores.conversations
        for k in keys:
            await conv.append_messages(k, P, [Message("m0", "user", "hi")])
        answered = await conv.delete(keys[0], P)
        assert answered is True
        lost = await _lost_reply(proxy, conv.delete(keys[1], P))
        assert lost is answered
        assert await conv.get_conversation(keys[1], P) is None
        # erased once: deleting again has nothing to erase
        assert await conv.delete(keys[1], P) is False


async def test_lost_reply_of_a_one_message_append_returns_what_an_answered_append_returns(
    pg: PgServer,
) -> None:
    """One message appended, its reply lost after commit: the call returns the stored
    message with its position and time, as an answered append does, and the message is
    there once."""
    key = _key()
    async with _proxy(pg) as proxy, _stores(_through(pg.url, proxy.port), push=False) as stores:
        conv = stores.conversations
        answered = await conv.append_messages(key, P, [Message("m0", "user", {"q": 0})])  # warm
        lost = await _lost_reply(proxy, conv.append_messages(key, P, [Message("m1", "user", "a")]))
        stored = await conv.read_messages(key, P)
        assert [m.id for m in stored] == ["m0", "m1"]
        assert answered == stored[:1]
        assert lost == stored[1:] and lost[0].seq == 1


async def test_lost_reply_of_a_user_integration_save_is_landed(pg: PgServer) -> None:
    tenant = _key().tenant
    async with _proxy(pg) as proxy, _stores(_through(pg.url, proxy.port), push=False) as stores:
        oauth = stores.oauth
        await oauth.save_user_integration(UserIntegration(tenant, "u", "srv", None, _tokens(0)))
        record = UserIntegration(tenant, "u", "srv", _pending("st-1"), _tokens(1))
        assert await _lost_reply(proxy, oauth.save_user_integration(record)) is None
        assert await oauth.get_user_integration(tenant, "u", "srv") == record


async def test_lost_reply_of_a_client_info_save_is_landed(pg: PgServer) -> None:
    tenant = _key().tenant
    async with _proxy(pg) as proxy, _stores(_through(pg.url, proxy.port), push=False) as stores:
        oauth = stores.oauth
        await oauth.save_client_info(ClientInfo(tenant, "srv", {"client_id": "c0"}))
        record = ClientInfo(tenant, "srv", {"client_id": "c1", "secret": "s"})
        assert await _lost_reply(proxy, oauth.save_client_info(record)) is None
        assert await oauth.get_client_info(tenant, "srv") == record


# --- never landed: another row holding the same state proves nothing ----------------


async def test_an_oauth_save_that_never_landed_is_unknown_though_another_row_matches(
    pg: PgServer,
) -> None:
    """The saves are reconciled by comparing the stored row with the record: the row
    compared is the record's own. Killed before it committed, a save is unknown (its
    row still holds the old value), even when another server's row of the same user, or
    another server's client registration in the tenant, holds exactly the new one."""
    tenant = _key().tenant
    async with _stores(pg.url, push=False) as stores:
        oauth = stores.oauth
        old = UserIntegration(tenant, "u", "srv", None, _tokens(0))
        new = UserIntegration(tenant, "u", "srv", None, _tokens(1))
        await oauth.save_user_integration(old)
        await oauth.save_user_integration(UserIntegration(tenant, "u", "other", None, _tokens(1)))
        lock = _locked(pg, "oauth_integrations", tenant=tenant, user_id="u", server_name="srv")
        with pytest.raises(UnknownOutcomeError):
            await _killed_while_waiting(pg, lock, oauth.save_user_integration(new))
        assert await oauth.get_user_integration(tenant, "u", "srv") == old

        old_client = ClientInfo(tenant, "srv", {"client_id": "c0"})
        await oauth.save_client_info(old_client)
        await oauth.save_client_info(ClientInfo(tenant, "other", {"client_id": "c1"}))
        lock = _locked(pg, "oauth_clients", tenant=tenant, server_name="srv")
        save = oauth.save_client_info(ClientInfo(tenant, "srv", {"client_id": "c1"}))
        with pytest.raises(UnknownOutcomeError):
            await _killed_while_waiting(pg, lock, save)
        assert await oauth.get_client_info(tenant, "srv") == old_client


# --- a server process that cannot be identified -------------------------------------


async def _resent_or_done(admin: asyncpg.Connection, role: str, call: asyncio.Future[Any]) -> None:
    """Wait until ``call`` ended or a second backend of ``role`` waits on a lock (the
    call sent again, queued behind the first)."""
    for _ in range(400):
        if call.done():
            return
        # the list of backends is a snapshot kept until the admin's transaction ends
        await admin.execute("SELECT pg_stat_clear_snapshot()")
        waiting = await admin.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE usename = $1 AND wait_event_type = 'Lock'",
            role,
        )
        if waiting >= 2:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the call neither ended nor was sent again")


async def _takeover_dropped_while_it_waits(
    pg: PgServer, wire: _Wire
) -> tuple[bool | BaseException, SupervisionRow | None, int]:
    """Through ``wire``: a takeover (a CAS from epoch 1 to 2) waits on its supervision
    row's lock, its connection is dropped (its server process keeps waiting), and the
    lock is released once the call has ended or been sent again. The call's result (or
    error), the row once the takeover's process committed (else after a bounded wait),
    and that process's id."""
    key = _key()
    role = pg.installation.role
    async with _stores(_through(pg.url, wire.port), push=False) as stores:
        sup = stores.supervision
        assert await sup.compare_and_swap(key, P, None, SupervisionRow("running", "a", 1))
        async with _row_locked(pg, key, "supervision") as admin:
            call = asyncio.ensure_future(
                sup.compare_and_swap(key, P, 1, SupervisionRow("running", "b", 2))
            )
            pid = await _waiting_backend(admin, role)
            wire.drop()
            await _resent_or_done(admin, role, call)
        outcome = (await asyncio.gather(call, return_exceptions=True))[0]
        for _ in range(400):
            row = (await sup.read(key, P)).row
            if row is not None and row.epoch == 2:
                break
            await asyncio.sleep(0.01)
    return outcome, row, pid


async def test_when_the_process_of_a_lost_write_cannot_be_identified_only_its_nonce_counts(
    pg: PgServer,
) -> None:
    """The connection of a takeover dies while its server process still waits on a row
    lock. The adapter could not learn which process that is, so it cannot wait for it to
    exit: the row still at the expected epoch is no proof that the takeover did not land
    (the process may yet commit it), and the call is unknown, not sent again. (Sent
    again, it would have queued behind the first and lost to it: a takeover reported
    lost that took effect.) The process then commits it."""
    async with _wire(pg, hide_start=True) as wire:
        outcome, row, _ = await _takeover_dropped_while_it_waits(pg, wire)
    assert isinstance(outcome, UnknownOutcomeError), outcome
    assert row is not None and (row.message_id, row.epoch) == ("b", 2)


async def test_behind_a_pooler_that_hides_the_process_id_a_lost_write_is_unknown_not_resent(
    pg: PgServer,
) -> None:
    """As above, behind a pooler in session mode (PgBouncer): the process id it hands the
    client is its own, and names no server process. The start time the adapter reads is
    not filed under that id, or a lost write would wait for a process that never
    existed, find it gone, and take the row still at the expected epoch as proof that
    the takeover did not land: sent again, it loses to the first, which commits."""
    async with _wire(pg, fake_pid=True) as wire:
        outcome, row, pid = await _takeover_dropped_while_it_waits(pg, wire)
        assert pid in wire.faked.values(), "the takeover's process id was not faked"
    assert isinstance(outcome, UnknownOutcomeError), outcome
    assert row is not None and (row.message_id, row.epoch) == ("b", 2)


# --- reads ------------------------------------------------------------------------


async def test_a_read_whose_reply_is_lost_is_answered_from_a_fresh_connection(
    pg: PgServer,
) -> None:
    key = _key()
    async with _proxy(pg) as proxy, _stores(_through(pg.url, proxy.port), push=False) as stores:
        conv = stores.conversations
        await conv.append_messages(key, P, [Message("m0", "user", "hi")])
        await conv.read_messages(key, P)  # warm
        proxy.cut_next_response()
        assert [m.id for m in await conv.read_messages(key, P)] == ["m0"]
        assert proxy.cut.is_set()


async def test_a_read_on_a_connection_found_broken_before_sending_is_retried(
    pg: PgServer,
) -> None:
    """The pooled connection's backend is terminated while idle: asyncpg has read the
    server's FATAL error but not yet the close, so the connection still looks open, and
    the read's first attempt is refused by asyncpg before anything is sent. The read is
    answered from a fresh connection."""
    key = _key()
    async with (
        _wire(pg) as wire,
        _stores(_through(pg.url, wire.port), push=False) as stores,
    ):
        conv = stores.conversations
        await conv.append_messages(key, P, [Message("m0", "user", "hi")])
        wire.close_late_next()
        admin = await asyncpg.connect(pg.admin_url)
        try:
            killed = await admin.fetchval(
                "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) "
                "FROM pg_stat_activity WHERE usename = $1",
                pg.installation.role,
            )
        finally:
            await admin.close()
        assert killed >= 1
        await wire.server_closed.wait()  # the connection of the bundle's pool
        await asyncio.sleep(0.05)  # asyncpg reads the FATAL error (in flight on loopback)
        assert [m.id for m in await conv.read_messages(key, P)] == ["m0"]
        assert wire.sent_after_close == 0, "the first attempt was sent, not refused"
