"""A key's turn: how a call that keeps losing its header to other writers gets to write.

Writers race for a header with conditional writes, and the race is fair only on average:
with six processes appending to one key, one call could lose for the whole conflict
deadline. A call that has lost for :data:`TURN_AFTER` seconds takes the key's turn, the
object ``k/<d>/turn`` written with ``If-None-Match: *`` (one holder at a time), and
releases it when it ends. A writer that lost a race on the key lately (so is one of its
contenders) reads the turn before each write and lets a holder other than itself write
first. A key nobody contends costs nothing: the turn is read only after a lost race.

The turn is a hint for liveness, never for safety: every write still commits with its
conditional header write, and a turn that cannot be read or written is treated as free.
A holder that dies frees the key when its :data:`TURN_LEASE_US` (store clock) lapse.
"""

from __future__ import annotations

import contextlib
import json
import time
from typing import TYPE_CHECKING

from agentstores.keys import ConversationKey

if TYPE_CHECKING:
    from .header import Root

TURN_AFTER = 1.0
"""Seconds a call keeps losing its header to other writers before it takes the turn."""
TURN_LEASE_US = 5_000_000
"""Microseconds (store clock) a turn holds at the most, unless released."""
CONTENDED_FOR = 5.0
"""Seconds after a bundle lost a race on a key during which its writes to the key read the
turn first. Only a lost race counts: a header another writer moved in between (replicas
taking turns on a conversation, as they do) costs no read of the turn."""


class Turn:
    """One call's part in its key's turn."""

    def __init__(self, root: Root, key: ConversationKey) -> None:
        self.root = root
        self.key = key
        self.name = root.key_dir(key) + "turn"
        self.losing_since: float | None = None
        self.held: str | None = None
        """The ETag of the turn object this call wrote (it holds the turn)."""

    def others(self, now: int) -> bool:
        """Whether another writer holds the turn (read only by a recent contender)."""
        if self.held is not None or not self.root.contended(self.key):
            return False
        try:
            found = self.root.io.get(self.name)
        except Exception:
            return False
        return found is not None and not _lapsed(found[0], now)

    def lost(self) -> None:
        """This call lost a race: it takes the turn once it has lost for long enough."""
        self.root.contend(self.key)
        lost_at = time.monotonic()
        if self.losing_since is None:
            self.losing_since = lost_at
        elif self.held is None and lost_at - self.losing_since >= TURN_AFTER:
            with contextlib.suppress(Exception):
                self.held = self._take()

    def _take(self) -> str | None:
        io = self.root.io
        body = json.dumps({"until": self.root.now_us() + TURN_LEASE_US}).encode()
        held = io.put(self.name, body, if_none_match=True)
        if held is not None:
            return held
        found = io.get(self.name)
        if found is None or not _lapsed(found[0], self.root.now_us()):
            return None  # another writer holds it: this call waits its turn
        if self.root.conditional_delete:
            if not io.delete(self.name, if_match=found[1]):
                return None
        else:
            io.delete(self.name)
        return io.put(self.name, body, if_none_match=True)

    def release(self) -> None:
        """Give the turn back (when this call holds it)."""
        held, self.held = self.held, None
        if held is None:
            return
        guard = held if self.root.conditional_delete else None
        with contextlib.suppress(Exception):
            self.root.io.delete(self.name, if_match=guard)


def _lapsed(body: bytes, now: int) -> bool:
    try:
        return int(json.loads(body)["until"]) <= now
    except (ValueError, TypeError, KeyError):
        return True  # not a turn this code wrote: nobody's


__all__ = ["CONTENDED_FOR", "TURN_AFTER", "TURN_LEASE_US", "Turn"]
