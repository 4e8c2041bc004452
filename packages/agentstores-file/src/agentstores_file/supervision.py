"""SupervisionStore on files: the row's base lives in the key header and its heartbeats
in the key's heartbeat file (``beat.py``). A compare-and-swap that changes the epoch is
one locked header replace; a heartbeat (same epoch, same owner, same fence) is one
locked in-place overwrite of a heartbeat slot. A batch of either is one group commit."""

from __future__ import annotations

import asyncio
import os
import random
from typing import Any

from agentstores.errors import (
    AgentStoresError,
    BackendUnavailableError,
    Refusal,
    UnknownOutcomeError,
    refusal_error,
)
from agentstores.keys import ConversationKey
from agentstores.models import SupervisionRow, SupervisionView, Swap, SwapOutcome
from agentstores.stores import SupervisionStore, kit

from . import beat
from ._base import FileStoreBase, Runner, off_loop
from .codec import dumps
from .header import LIVE, FileRoot, Head

GROUP_MAX = 128
"""Most keys one group commit holds locked at once (each holds a lock fd and a temp fd
until its group is durable); a bigger batch is split into groups run side by side."""

HEADS_KEPT = 4096
"""Headers kept parsed, by key directory, with the bytes they were parsed from: a header
read back byte for byte as this process last read or wrote it is not parsed again (a
heartbeat leaves the header as it was, and a compare-and-swap reads what the previous
one wrote)."""

_generations = random.Random()
"""Where a new row's generation comes from: seeded from the OS once per process (again
in a forked child), so generations are as unlikely to repeat as with ``secrets``, with
no system call on every claim and takeover."""
os.register_at_fork(after_in_child=_generations.seed)

_READ_TRIES = 2
"""Lock-free tries of a read before it takes the key's shared lock (a try fails only
when the header changed while the heartbeat file was read)."""


class Beat:
    """A heartbeat to write in place: what its slot in the key's heartbeat file holds."""

    __slots__ = ("gen", "hb", "message_id", "status")

    def __init__(self, gen: int, hb: int, status: str, message_id: str) -> None:
        self.gen, self.hb, self.status, self.message_id = gen, hb, status, message_id

    def slot(self, seq: int) -> bytes:
        return beat.encode(seq, self.gen, self.hb, self.status, self.message_id)


def beat_path(kdir: str) -> str:
    return kdir + "/" + beat.NAME


def current_row(root: FileRoot, kdir: str, h: Head) -> dict[str, Any] | None:
    """The live row of a header: its base ``sup``, with the newest heartbeat slot of the
    same generation over it (status, message id, heartbeat time)."""
    sup: dict[str, Any] | None = h["sup"]
    if sup is None or "g" not in sup:  # no row, or a row format 1 wrote: no slots
        return sup
    raw = root.io.read_file(beat_path(kdir))
    if raw is None:
        return sup
    slot = beat.newest(raw, sup["g"], f"heartbeat file of {kdir}")
    if slot is None:
        return sup
    return {"s": slot.status, "m": slot.message_id, "e": sup["e"], "hb": slot.hb, "g": sup["g"]}


class FileSupervisionStore(FileStoreBase, SupervisionStore):
    # A batch is a group commit: a few in flight let one group's fsyncs overlap the next
    # group's reads and writes, and beats arriving meanwhile make the next batch.
    max_batches_in_flight = 4

    def __init__(self, root: FileRoot, runner: Runner) -> None:
        super().__init__(root, runner)
        self._heads: dict[str, tuple[bytes, Head, ConversationKey]] = {}
        self._paths: dict[ConversationKey, tuple[str, str, str]] = {}

    def _key_paths(self, key: ConversationKey) -> tuple[str, str, str]:
        """The key's directory, lock file and header file, built once per key (kept as
        many as the headers): on every call, and each a few string operations."""
        paths = self._paths.get(key)
        if paths is None:
            root = self.root
            kdir = root.key_dir(key)
            paths = (kdir, root.lock_path(kdir), root.head_path(kdir))
            if len(self._paths) >= HEADS_KEPT:
                self._paths.clear()
            self._paths[key] = paths
        return paths

    def _parsed(self, raw: bytes | None, kdir: str, key: ConversationKey) -> Head | None:
        """The header ``raw`` holds, checked against ``key``: a fresh top-level copy that
        the caller may change (values nested in it are shared and never changed)."""
        if raw is None:
            return None
        kept = self._heads.get(kdir)
        if kept is not None and kept[0] == raw:
            if kept[2] is key:  # these very bytes were checked against this key
                return dict(kept[1])
            return self.root.checked_head(dict(kept[1]), key)
        h = self.root.checked_head(self.root.parse_head(raw, kdir), key)
        if h is not None:
            self._keep(kdir, raw, h, key)
            h = dict(h)
        return h

    def _keep(self, kdir: str, raw: bytes, h: Head, key: ConversationKey) -> None:
        """Keep ``h``, the header of ``key`` that ``raw`` holds (checked, or written for
        ``key`` by this process)."""
        heads = self._heads
        if len(heads) >= HEADS_KEPT:
            heads.clear()
        heads[kdir] = (raw, h, key)

    def _put_head(
        self, kdir: str, key: ConversationKey, h: Head, blank_beat: bool, path: str | None = None
    ) -> None:
        """Replace the key's header (at ``path``, when known) with ``h`` (which is then
        never changed) and keep it; with ``blank_beat``, create a heartbeat file with no
        slot written first (one directory sync for both; a crash between leaves a blank
        file, read as none)."""
        raw = dumps(h)
        io = self.root.io
        if blank_beat:
            io.replace_file(beat_path(kdir), beat.BLANK, sync_dir=False)
        io.replace_file(self.root.head_path(kdir) if path is None else path, raw)
        self._keep(kdir, raw, h, key)

    def _decide(
        self,
        kdir: str,
        key: ConversationKey,
        principal: str,
        expected_epoch: int | None,
        row: SupervisionRow,
        head_path: str | None = None,
    ) -> tuple[Head, bool] | Beat | None:
        """What one compare-and-swap writes: a heartbeat slot; a new header, and whether a
        blank heartbeat file goes with it (a claim of a key that has none, so that its
        heartbeats go in place from the first); or None when it loses (the caller holds
        the key's exclusive lock; nothing is written here but an expired key's purge).

        A swap that keeps the epoch of a live row it owns changes neither the owner nor
        the fence, so it is a heartbeat, written in place when the row has a generation
        (a row format 1 wrote gets one here, through the header: migrated on write).
        Anything else replaces the header, with a fresh generation for the row so the
        heartbeats of the row it replaces are never read again.
        """
        root = self.root
        now = root.now_us()
        raw = root.io.read_file(root.head_path(kdir) if head_path is None else head_path)
        h, status = root.head_status(self._parsed(raw, kdir, key), now)
        refusal = root.judge_write(h, status, principal, row.epoch)
        if refusal is Refusal.NOT_OWNED:
            raise refusal_error(refusal, key=key)
        if refusal is not None:  # erased, or fenced: the swap just loses
            return None
        current = h["sup"] if status == LIVE and h is not None else None
        if expected_epoch is None:
            if current is not None:
                return None
        elif current is None or current["e"] != expected_epoch:
            return None
        elif (
            row.epoch == expected_epoch
            and "g" in current
            and h is not None
            and h["fence"] == kit.raised_fence(h["fence"], row.epoch)
        ):
            return Beat(current["g"], now, row.status, row.message_id)
        new = root.claim(kdir, key, h, status, principal)
        new["fence"] = kit.raised_fence(new["fence"], row.epoch)
        new["sup"] = {
            "s": row.status,
            "m": row.message_id,
            "e": row.epoch,
            "hb": now,
            "g": _generations.getrandbits(63),
        }
        return new, current is None and not os.path.exists(beat_path(kdir))

    def _put_beat(self, kdir: str, b: Beat) -> int | None:
        """Overwrite the older slot of the key's heartbeat file with ``b``, not synced:
        the fd to sync and close, or None when the key has no heartbeat file yet (it is
        then written whole: :meth:`first_beat`)."""
        io = self.root.io
        fd = io.open_rw(beat_path(kdir))
        if fd is None:
            return None
        try:
            offset, seq = beat.next_write(io.pread(fd, beat.SIZE, 0), f"heartbeat file of {kdir}")
            io.overwrite(fd, b.slot(seq), offset)
        except BaseException:
            os.close(fd)
            raise
        return fd

    @staticmethod
    def first_beat(b: Beat) -> bytes:
        """A new heartbeat file holding ``b``, replaced into place like any file."""
        return beat.first_file(b.slot(1))

    def _swap(
        self, key: ConversationKey, principal: str, expected_epoch: int | None, row: SupervisionRow
    ) -> bool:
        """One compare-and-swap: one locked header replace, or one locked in-place
        heartbeat (blocking)."""
        root = self.root
        io = root.io
        kdir, lock, head = self._key_paths(key)
        fd = io.open_lock(lock)
        if fd is None:  # a new key: the general lock makes its directory
            if expected_epoch is not None:  # no directory, no row: refused, nothing made
                return False
            with root.locked(kdir, exclusive=True, create=True):
                return self._swap_locked(kdir, head, key, principal, expected_epoch, row)
        # FileRoot.locked spelled out, as this is every lease's heartbeat and takeover.
        try:
            io.lock(fd, exclusive=True)
            before = io.commits
            try:
                return self._swap_locked(kdir, head, key, principal, expected_epoch, row)
            except OSError as exc:
                if io.commits != before:
                    raise UnknownOutcomeError(
                        f"the write may or may not have taken effect: {exc}"
                    ) from exc
                raise
        finally:
            os.close(fd)

    def _swap_locked(
        self,
        kdir: str,
        head: str,
        key: ConversationKey,
        principal: str,
        expected_epoch: int | None,
        row: SupervisionRow,
    ) -> bool:
        """:meth:`_swap` under the key's exclusive lock."""
        new = self._decide(kdir, key, principal, expected_epoch, row, head)
        if new is None:
            return False
        if not isinstance(new, Beat):
            self._put_head(kdir, key, *new, path=head)
            return True
        fd = self._put_beat(kdir, new)
        io = self.root.io
        if fd is None:
            io.replace_file(beat_path(kdir), self.first_beat(new))
            return True
        try:
            io.sync(fd)
        finally:
            os.close(fd)
        return True

    _compare_and_swap = off_loop(_swap)

    async def _compare_and_swap_many(self, swaps: list[Swap]) -> list[SwapOutcome]:
        if len(swaps) == 1:
            return await self.runner(self._swap_rows, swaps)
        groups = [swaps[i : i + GROUP_MAX] for i in range(0, len(swaps), GROUP_MAX)]
        done = await asyncio.gather(*(self.runner(self._swap_group, g) for g in groups))
        return [outcome for outcomes in done for outcome in outcomes]

    def _swap_rows(self, swaps: list[Swap]) -> list[SwapOutcome]:
        """Each swap through the single path in turn (blocking), its error its outcome."""
        out: list[SwapOutcome] = []
        for sw in swaps:
            try:
                out.append(SwapOutcome(self._swap(sw.key, sw.principal, sw.expected_epoch, sw.row)))
            except Exception as exc:
                out.append(SwapOutcome(False, self._row_error(exc, sw)))
        return out

    def _row_error(self, exc: Exception, sw: Swap) -> AgentStoresError:
        """The typed error a row's failure becomes (anything untyped is a bug: raised)."""
        if isinstance(exc, AgentStoresError):
            return exc
        err = self.translated(exc, "supervision.compare_and_swap_many", sw.key)
        if err is None:
            raise exc
        err.__cause__ = exc
        return err

    def _unknown(self, exc: Exception, sw: Swap) -> AgentStoresError:
        """A row whose write may have landed: renamed (or purged) but not known durable."""
        err = UnknownOutcomeError(f"the write may or may not have taken effect: {exc}")
        err.context.setdefault("operation", "supervision.compare_and_swap_many")
        err.context.setdefault("key", sw.key)
        err.__cause__ = exc
        return err

    def _swap_group(self, swaps: list[Swap]) -> list[SwapOutcome]:
        """Every swap of ``swaps`` as one group commit (blocking).

        Each row is still its own compare-and-swap: its key's exclusive lock is taken,
        its header read and judged, and the lock held until its write is durable. What
        the rows share is the durability barriers: the heartbeats written in place are
        made durable together (:meth:`FileIO.sync_all`: one syncfs on Linux), and the
        files replaced (:meth:`FileIO.replace_many`) share one round of fsyncs for every
        temp file and one for every directory.
        Locks are only tried, never waited for while others are held (so groups cannot
        deadlock with each other or with multi-key writers); a row whose key is busy
        runs through the single path once the group is done.
        """
        root, io = self.root, self.root.io
        out: list[SwapOutcome | None] = [None] * len(swaps)
        busy: list[int] = []
        held: list[int] = []
        beats: list[tuple[int, int]] = []  # row, heartbeat file fd (written, not synced)
        writes: list[tuple[int, str, bytes, bool]] = []  # row, path, content, purged
        heads: dict[int, tuple[str, Head]] = {}  # row -> the header it writes
        try:
            for i, sw in enumerate(swaps):
                kdir = root.key_dir(sw.key)
                before = io.commits
                try:
                    fd = io.open_lock(root.lock_path(kdir))
                    if fd is None:  # a new key: make its directory, as the single path does
                        io.ensure_dir(kdir)
                        fd = io.open_lock(root.lock_path(kdir))
                        if fd is None:
                            raise BackendUnavailableError(f"cannot create the key directory {kdir}")
                    if not io.try_lock(fd):
                        os.close(fd)
                        busy.append(i)
                        continue
                    held.append(fd)
                    new = self._decide(kdir, sw.key, sw.principal, sw.expected_epoch, sw.row)
                    if new is None:
                        out[i] = SwapOutcome(False)
                    elif not isinstance(new, Beat):
                        head, blank_beat = new
                        if blank_beat:  # renamed before the header, its outcome no row's
                            writes.append((-1, beat_path(kdir), beat.BLANK, False))
                        heads[i] = (kdir, head)
                        writes.append((i, root.head_path(kdir), dumps(head), io.commits != before))
                    elif (beat_fd := self._put_beat(kdir, new)) is not None:
                        beats.append((i, beat_fd))
                    else:
                        writes.append((i, beat_path(kdir), self.first_beat(new), False))
                except Exception as exc:
                    typed = self._unknown if io.commits != before else self._row_error
                    out[i] = SwapOutcome(False, typed(exc, sw))
            synced = io.sync_all([fd for _, fd in beats])
            for (i, _), failure in zip(beats, synced, strict=True):
                failed = None if failure is None else self._unknown(failure, swaps[i])
                out[i] = SwapOutcome(failure is None, failed)
            results = io.replace_many([(path, data) for _, path, data, _ in writes])
            for (i, _, data, purged), (renamed, failure) in zip(writes, results, strict=True):
                if i < 0:
                    continue
                sw = swaps[i]
                if failure is None:
                    out[i] = SwapOutcome(True)
                    if i in heads:
                        self._keep(heads[i][0], data, heads[i][1], sw.key)
                elif renamed or purged:
                    out[i] = SwapOutcome(False, self._unknown(failure, sw))
                else:
                    out[i] = SwapOutcome(False, self._row_error(failure, sw))
        finally:
            for _, fd in beats:
                os.close(fd)
            for fd in held:
                os.close(fd)
        if busy:
            for i, outcome in zip(busy, self._swap_rows([swaps[i] for i in busy]), strict=True):
                out[i] = outcome
        return [o if o is not None else SwapOutcome(False) for o in out]

    def _look(
        self, kdir: str, key: ConversationKey, principal: str, now: int
    ) -> tuple[Head | None, dict[str, Any] | None, bool]:
        """One lock-free look at the row: the header (None when ``principal`` may not
        see the key), its row with the heartbeats over it, and whether the header was
        the same after the heartbeat file was read (then the two belong together)."""
        root, io = self.root, self.root.io
        path = root.head_path(kdir)
        raw = io.read_file(path)
        h, status = root.head_status(self._parsed(raw, kdir, key), now)
        if not root.can_read(h, status, principal) or h is None:
            return None, None, True
        sup = h["sup"]
        if sup is None or "g" not in sup:
            return h, sup, True
        return h, current_row(root, kdir, h), io.read_file(path) == raw

    @off_loop
    def _read(self, key: ConversationKey, principal: str) -> SupervisionView:
        """The row as of one instant, without a lock; when the header moved while the
        heartbeat file was read, again, and at last under the key's shared lock (which
        every writer excludes)."""
        root = self.root
        kdir = root.key_dir(key)
        now = root.now_us()
        for _ in range(_READ_TRIES):
            h, sup, same = self._look(kdir, key, principal, now)
            if same:
                break
        else:
            with root.locked(kdir, exclusive=False, create=False):
                h, sup, _ = self._look(kdir, key, principal, now)
        if h is None:
            return SupervisionView(None, kit.from_micros(now), 0)
        row = None
        if sup is not None:
            row = SupervisionRow(
                status=sup["s"],
                message_id=sup["m"],
                epoch=sup["e"],
                heartbeat_at=kit.from_micros(sup["hb"]),
                owner=h["owner"],
            )
        return SupervisionView(row, kit.from_micros(now), int(h["fence"]))

    @off_loop
    def _delete(self, key: ConversationKey, principal: str, message_id: str, epoch: int) -> bool:
        root = self.root
        kdir = root.key_dir(key)
        with root.locked(kdir, exclusive=True, create=False) as exists:
            if not exists:
                return False
            h, status = root.head(kdir, key, root.now_us())
            if status != LIVE or h is None:
                return False
            root.check_write(key, h, status, principal, None)
            sup = current_row(root, kdir, h)
            if sup is None or sup["m"] != message_id or sup["e"] != epoch:
                return False
            h["sup"] = None
            root.put_head(kdir, h)
            return True


__all__ = ["FileSupervisionStore"]
