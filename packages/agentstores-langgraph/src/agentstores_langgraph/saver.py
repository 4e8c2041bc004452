"""AgentStoresSaver: a LangGraph checkpointer over any agentstores backend, fenced.

A thread is the conversation ``ConversationKey(tenant, thread_id)`` and its checkpoints
are rows of that conversation's transcript log (see :mod:`.rows`), so the conversation's
owner, sharing, fencing and erasure are the thread's: ``conv.delete()`` erases the
checkpoints with the messages, another principal sees no thread unless it is shared,
and a write carrying an epoch below the conversation's fence raises ``FencedError`` and
lands nothing. The epoch is the lease's (the ambient epoch of
``agentstores.stores.ambient`` inside a turn) or ``configurable["agentstores_epoch"]``.
The tenant and principal a run acts as come from the application, never from the run's
config (see :mod:`.identity`).

Costs: a put appends the new checkpoint and the channel values it changed, nothing
else, in one conditional append on the tail this saver last saw (no read first; a
stale tail is refused by the store and read again); the latest checkpoint is one read
of the rows from that tail on, and a list with a limit walks back only as far as it
needs, whatever the thread's length.
"""

from __future__ import annotations

import asyncio
import random
from collections import defaultdict
from collections.abc import AsyncIterator, Coroutine, Iterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from agentstores import (
    ConflictError,
    ConversationKey,
    Message,
    StaleWriteError,
    StoredMessage,
    Stores,
    UsageError,
    open_stores,
)

from .identity import Identities, IdentityResolver
from .log import Tail, TailCache, ThreadLog, retrying
from .rows import (
    OWN_ROWS,
    CheckpointRow,
    WriteRow,
    as_checkpoint,
    as_write,
    checkpoint_message,
    kind_of,
    pack,
    unpack,
    values_in,
    write_message,
)

EPOCH = "agentstores_epoch"
"""``configurable`` key carrying the lease epoch, for callers without an ambient lease.
An API client that sets it fences only threads its own principal may write."""
_OWN_KEYS = frozenset({EPOCH})
COPY_BATCH = 500
MISSING = -1
"""The ``seq`` in ``locs`` of a channel whose value at that version was never written."""

T = TypeVar("T")


class AgentStoresSaver(BaseCheckpointSaver[str]):
    """LangGraph's ``BaseCheckpointSaver`` over an open :class:`agentstores.Stores`.

    It acts as one fixed ``tenant`` and ``principal``, or as what the application's
    ``identity`` resolver returns for each run (see :mod:`.identity`): never as a
    tenant or principal named in the run's ``configurable``, which is refused.

    Create it inside the event loop that owns ``stores``; the sync methods (``get_tuple``,
    ``list``, ``put``, ``put_writes``, ``delete_thread``, ``copy_thread``) may then be
    called from other threads, as with LangGraph's async PostgreSQL saver.
    """

    def __init__(
        self,
        stores: Stores,
        *,
        tenant: str | None = None,
        principal: str = "",
        identity: IdentityResolver | None = None,
        serde: SerializerProtocol | None = None,
    ) -> None:
        super().__init__(serde=serde)
        self.identities = Identities(tenant, principal, identity)
        self.stores = stores
        self.tenant = tenant
        """The fixed tenant (None with a resolver)."""
        self.principal = principal
        self._tails = TailCache()
        try:
            self.loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self.loop = None

    @classmethod
    @asynccontextmanager
    async def from_url(
        cls,
        url: str | None = None,
        *,
        tenant: str | None = None,
        principal: str = "",
        identity: IdentityResolver | None = None,
        **options: Any,
    ) -> AsyncIterator[AgentStoresSaver]:
        """Open the backend ``url`` names (as ``open_stores``) and yield a saver on it."""
        Identities(tenant, principal, identity)  # refused before connecting
        async with open_stores(url, **options) as stores:
            yield cls(stores, tenant=tenant, principal=principal, identity=identity)

    # --- addressing -----------------------------------------------------------------

    def _log(self, config: RunnableConfig) -> tuple[ThreadLog, str, str, int | None]:
        """The thread's log, its thread id, namespace and the write's epoch."""
        configurable = config.get("configurable") or {}
        if "thread_id" not in configurable:
            raise UsageError("config['configurable'] must name a thread_id")
        thread_id = str(configurable["thread_id"])
        tenant, principal = self.identities(config)
        epoch = configurable.get(EPOCH)
        key = ConversationKey(tenant, thread_id)
        log = ThreadLog(self.stores, key, principal, self._tails)
        return log, thread_id, str(configurable.get("checkpoint_ns") or ""), epoch

    def _thread_log(self, thread_id: str) -> ThreadLog:
        tenant, principal = self.identities.of_thread(str(thread_id))
        key = ConversationKey(tenant, str(thread_id))
        return ThreadLog(self.stores, key, principal, self._tails)

    # --- reads ----------------------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names, or the namespace's latest; None if absent."""
        log, thread_id, ns, _ = self._log(config)
        checkpoint_id = get_checkpoint_id(config)
        tail = await log.tail()
        if tail is None:
            return None
        if checkpoint_id is None:
            head = tail.heads.get(ns)
            if head is None:
                return None
            rows = tail.cached(head[1], tail.count) or await log.read(head[1], tail.count - head[1])
            found = as_checkpoint(rows[0]) if rows else None
            if found is None:
                return None
            writes = [
                w for w in map(as_write, rows[1:]) if w is not None and _writes_of(w, ns, found.id)
            ]
            return await self._tuple(log, tail, thread_id, found, writes)
        located = await self._find(log, tail, ns, checkpoint_id)
        if located is None:
            return None
        return await self._tuple(log, tail, thread_id, *located)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """One thread's checkpoints, newest id first (all namespaces unless ``config``
        names one), filtered by metadata, before ``before``'s id, at most ``limit``."""
        if config is None:
            raise UsageError("this saver lists one thread at a time: pass a thread_id")
        log, thread_id, _, _ = self._log(config)
        configurable = config.get("configurable") or {}
        ns_filter = configurable.get("checkpoint_ns")
        id_filter = get_checkpoint_id(config)
        before_id = get_checkpoint_id(before) if before else None
        if limit is not None and limit <= 0:
            return
        tail = await log.tail()
        if tail is None:
            return
        writes: dict[tuple[str, str], list[WriteRow]] = defaultdict(list)
        chosen: list[tuple[CheckpointRow, list[WriteRow]]] = []
        async for message in log.newest_first(tail):
            write = as_write(message)
            if write is not None:
                writes[(write.ns, write.checkpoint_id)].append(write)
                continue
            row = as_checkpoint(message)
            if row is None:
                continue
            if (
                (ns_filter is None or row.ns == ns_filter)
                and (id_filter is None or row.id == id_filter)
                and (before_id is None or row.id < before_id)
                and self._metadata_matches(row, filter)
            ):
                chosen.append((row, writes.pop((row.ns, row.id), [])))
                chosen.sort(key=lambda pair: pair[0].id, reverse=True)
            if row.prev_max is None:
                break  # no checkpoint before this one
            if (
                limit is not None
                and len(chosen) >= limit
                and chosen[limit - 1][0].id > row.prev_max
            ):
                break  # every earlier checkpoint is older than the limit-th chosen
        for row, row_writes in chosen[:limit]:
            yield await self._tuple(log, tail, thread_id, row, row_writes)

    def _metadata_matches(self, row: CheckpointRow, filter: dict[str, Any] | None) -> bool:
        if not filter:
            return True
        metadata = self.serde.loads_typed(unpack(row.metadata))
        return all(metadata.get(k) == v for k, v in filter.items())

    async def _find(
        self, log: ThreadLog, tail: Tail, ns: str, checkpoint_id: str
    ) -> tuple[CheckpointRow, list[WriteRow]] | None:
        """Checkpoint ``checkpoint_id`` of ``ns`` and its writes, walking back from the
        tail; stops as soon as no earlier row can hold it."""
        writes: list[WriteRow] = []
        async for message in log.newest_first(tail):
            write = as_write(message)
            if write is not None:
                if _writes_of(write, ns, checkpoint_id):
                    writes.append(write)
                continue
            row = as_checkpoint(message)
            if row is None:
                continue
            if row.ns == ns and row.id == checkpoint_id:
                return row, writes
            if row.prev_max is None or row.prev_max < checkpoint_id:
                return None
        return None

    async def _tuple(
        self,
        log: ThreadLog,
        tail: Tail,
        thread_id: str,
        row: CheckpointRow,
        writes: Sequence[WriteRow],
    ) -> CheckpointTuple:
        checkpoint: Checkpoint = self.serde.loads_typed(unpack(row.checkpoint))
        checkpoint["channel_values"] = await self._channel_values(log, tail, row)
        ordered = sorted(writes, key=lambda w: (w.task_path, w.task_id, w.idx))
        return CheckpointTuple(
            config=_config(thread_id, row.ns, row.id),
            checkpoint=checkpoint,
            metadata=self.serde.loads_typed(unpack(row.metadata)),
            parent_config=_config(thread_id, row.ns, row.parent) if row.parent else None,
            pending_writes=[
                (w.task_id, w.channel, self.serde.loads_typed(unpack(w.value))) for w in ordered
            ],
        )

    async def _channel_values(
        self, log: ThreadLog, tail: Tail, row: CheckpointRow
    ) -> dict[str, Any]:
        """The values ``row.locs`` points at: the row's own, then those of the rows the
        tail already holds or knows, the rest read in contiguous runs."""
        by_seq = await log.rows_at(
            tail,
            [int(loc[1]) for loc in row.locs.values() if int(loc[1]) not in (MISSING, row.seq)],
        )
        values: dict[str, Any] = {}
        for channel, (version, seq) in row.locs.items():
            seq = int(seq)
            if seq == MISSING:
                continue  # no value was ever written at this version (as InMemorySaver)
            if seq == row.seq:
                held: tuple[str, dict[str, list[Any]]] | None = (row.ns, row.values)
            else:
                stored = by_seq.get(seq)
                held = values_in(stored) if stored is not None else None
            entry = None if held is None else held[1].get(channel)
            if entry is None or entry[0] != version:
                raise ConflictError(
                    f"checkpoint {row.id!r}: the value of channel {channel!r} is missing; "
                    "the thread's log was altered outside this saver"
                )
            typed = unpack(entry[1])
            if typed[0] != "empty":
                values[channel] = self.serde.loads_typed(typed)
        return values

    # --- writes ---------------------------------------------------------------------

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Append the checkpoint with the values of ``new_versions``' channels (one
        row), fenced.

        Raises:
            FencedError: the epoch is below the conversation's fence (nothing lands).
            ErasedError: the conversation was erased.
            NotOwnedError: another principal owns the conversation.
        """
        log, thread_id, ns, epoch = self._log(config)
        parent_id = get_checkpoint_id(config)
        body: dict[str, Any] = dict(checkpoint)
        values: dict[str, Any] = body.pop("channel_values", None) or {}
        checkpoint_id = str(checkpoint["id"])
        changed = [
            (
                channel,
                str(version),
                pack(self.serde.dumps_typed(values[channel]))
                if channel in values
                else pack(("empty", b"")),
            )
            for channel, version in new_versions.items()
        ]
        packed_checkpoint = pack(self.serde.dumps_typed(body))
        own = {k: v for k, v in (config.get("configurable") or {}).items() if k not in _OWN_KEYS}
        packed_metadata = pack(
            self.serde.dumps_typed(
                get_checkpoint_metadata({**config, "configurable": own}, metadata)
            )
        )
        unchanged = {
            channel: str(version)
            for channel, version in checkpoint["channel_versions"].items()
            if channel not in new_versions
        }
        tries = [0]

        async def attempt() -> list[StoredMessage]:
            # the first attempt is conditioned on the tail this saver last saw (no read);
            # a stale one is refused by the store, and every retry reads the tail
            tail = log.cached_tail() if tries[0] == 0 else None
            tries[0] += 1
            if tail is None:
                tail = await log.tail()
            kept: dict[str, list[Any]] = {}
            if unchanged and tail is not None:
                kept = await self._locate(log, tail, ns, parent_id, unchanged)
            seq = 0 if tail is None else tail.count
            heads = {} if tail is None else dict(tail.heads)
            prev_max = max((h[0] for h in heads.values()), default=None)
            locs = dict(kept)
            for channel, version, _ in changed:
                locs[channel] = [version, seq]
            own = (0 if tail is None else tail.own) + 1
            if ns not in heads or checkpoint_id > heads[ns][0]:
                heads[ns] = [checkpoint_id, seq]
            message = checkpoint_message(
                ns,
                checkpoint_id,
                parent_id,
                packed_checkpoint,
                packed_metadata,
                locs,
                prev_max,
                heads,
                own,
                {channel: [version, value] for channel, version, value in changed},
            )
            stored = await log.append([message], tail, epoch, own)
            log.landed(tail, stored)
            if stored and stored[-1].seq != seq:
                raise ConflictError(
                    f"checkpoint {checkpoint_id!r} landed at an unexpected position"
                )
            return stored

        await retrying(attempt)
        return _config(thread_id, ns, checkpoint_id)

    async def _locate(
        self,
        log: ThreadLog,
        tail: Tail,
        ns: str,
        parent_id: str | None,
        unchanged: dict[str, str],
    ) -> dict[str, list[Any]]:
        """Where the unchanged channels' values live: the parent's ``locs`` (one lookup,
        normally the head), else the newest row holding that channel's value at that
        version (a walk back, needed only when the parent never held that version),
        else :data:`MISSING`."""
        kept: dict[str, list[Any]] = {}
        if parent_id is not None:
            parent = _head_row(tail, ns, parent_id)
            if parent is None:
                found = await self._find(log, tail, ns, parent_id)
                parent = None if found is None else found[0]
            if parent is not None:
                for channel, version in unchanged.items():
                    loc = parent.locs.get(channel)
                    if loc is not None and loc[0] == version:
                        kept[channel] = list(loc)
        missing = {c: v for c, v in unchanged.items() if c not in kept}
        if missing:
            async for message in log.newest_first(tail):
                held = values_in(message)
                if held is None or held[0] != ns:
                    continue
                for channel, (version, _) in held[1].items():
                    if missing.get(channel) == version:
                        kept[channel] = [version, message.seq]
                        del missing[channel]
                if not missing:
                    break
        for channel, version in missing.items():
            kept[channel] = [version, MISSING]  # recorded, so descendants never search again
        return kept

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Append the task's writes; a (checkpoint, task, index) already written is
        skipped, so a retried call is a no-op. Fenced like :meth:`aput`."""
        log, _, ns, epoch = self._log(config)
        checkpoint_id = get_checkpoint_id(config)
        if checkpoint_id is None:
            raise UsageError("put_writes needs the config of a stored checkpoint")
        items = [
            (WRITES_IDX_MAP.get(channel, idx), channel, pack(self.serde.dumps_typed(value)))
            for idx, (channel, value) in enumerate(writes)
        ]
        if not items:
            return

        tries = [0]

        async def attempt() -> list[StoredMessage]:
            # as in aput: the cached tail first, a fresh read on every retry
            tail = log.cached_tail() if tries[0] == 0 else None
            tries[0] += 1
            if tail is None:
                tail = await log.tail()
            heads = {} if tail is None else tail.heads
            own = (0 if tail is None else tail.own) + len(items)
            messages = [
                write_message(
                    ns, checkpoint_id, task_id, idx, channel, value, task_path, heads, own
                )
                for idx, channel, value in items
            ]
            stored = await log.append(messages, tail, epoch, own)
            log.landed(tail, stored)
            return stored

        await retrying(attempt)

    async def adelete_thread(self, thread_id: str) -> None:
        """Erase the thread's conversation (checkpoints, messages, every store's data for
        the key) and leave its tombstone: the thread id refuses writes from then on."""
        log = self._thread_log(thread_id)
        self._tails.forget(log.key)
        await self.stores.conversations.delete(log.key, log.principal)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every row of the source thread into a new, empty target thread (same
        positions, so the copy's checkpoints point at its own values).

        Raises:
            ConflictError: the target thread is not empty.
        """
        source = self._thread_log(source_thread_id)
        target = self._thread_log(target_thread_id)
        self._tails.forget(target.key)
        info = await self.stores.conversations.get_conversation(source.key, source.principal)
        if info is None:
            return
        tail_id: str | None = None
        own = 0
        for start in range(0, info.message_count, COPY_BATCH):
            rows = await source.read(start, min(COPY_BATCH, info.message_count - start))
            batch = [Message(m.id, m.role, m.content, m.metadata, m.compaction) for m in rows]
            own += sum(kind_of(m) is not None for m in rows)
            try:
                await self.stores.conversations.append_messages(
                    target.key,
                    target.principal,
                    batch,
                    expected_tail=tail_id,
                    metadata={OWN_ROWS: own},
                )
            except StaleWriteError as exc:
                raise ConflictError(
                    f"thread {target_thread_id!r} is not empty; copy into a new thread"
                ) from exc
            tail_id = batch[-1].id

    def get_next_version(self, current: str | None, channel: None) -> str:
        """``<32-digit counter>.<random>``, as LangGraph's own savers number versions."""
        if current is None:
            current_v = 0
        elif isinstance(current, int):
            current_v = current
        else:
            current_v = int(str(current).split(".")[0])
        return f"{current_v + 1:032}.{random.random():016}"

    # --- the sync API, for graphs run with invoke() from another thread ----------

    def _sync(self, coro: Coroutine[Any, Any, T]) -> T:
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if self.loop is None or running is self.loop:
            coro.close()
            raise asyncio.InvalidStateError(
                "AgentStoresSaver's sync methods run only from a thread other than the event "
                "loop that owns its stores (create the saver in that loop); in the loop, use "
                "the async ones (await saver.aget_tuple(...), graph.ainvoke(...))"
            )
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Sync :meth:`aget_tuple`."""
        return self._sync(self.aget_tuple(config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Sync :meth:`alist` (collected, then yielded)."""

        async def collect() -> list[CheckpointTuple]:
            return [t async for t in self.alist(config, filter=filter, before=before, limit=limit)]

        yield from self._sync(collect())

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Sync :meth:`aput`."""
        return self._sync(self.aput(config, checkpoint, metadata, new_versions))

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Sync :meth:`aput_writes`."""
        self._sync(self.aput_writes(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        """Sync :meth:`adelete_thread`."""
        self._sync(self.adelete_thread(thread_id))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Sync :meth:`acopy_thread`."""
        self._sync(self.acopy_thread(source_thread_id, target_thread_id))


def _head_row(tail: Tail, ns: str, checkpoint_id: str) -> CheckpointRow | None:
    """Checkpoint ``checkpoint_id`` if it is ``ns``'s newest and the tail holds its row
    (a put's parent, normally): no walk back."""
    head = tail.heads.get(ns)
    if head is None or head[0] != checkpoint_id:
        return None
    message = tail.row(int(head[1]))
    row = None if message is None else as_checkpoint(message)
    return row if row is not None and row.ns == ns and row.id == checkpoint_id else None


def _writes_of(write: WriteRow | None, ns: str, checkpoint_id: str) -> bool:
    return write is not None and write.ns == ns and write.checkpoint_id == checkpoint_id


def _config(thread_id: str, ns: str, checkpoint_id: str) -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": ns,
            "checkpoint_id": checkpoint_id,
        }
    }


__all__ = ["EPOCH", "AgentStoresSaver"]
