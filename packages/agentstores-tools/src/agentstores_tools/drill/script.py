"""What the drill's workers agree on: the timings, the conversation and the answer text.

The answer is deterministic so a resumed producer regenerates exactly what its dead
predecessor streamed, and every check can compare against one expected string.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from agentstores.errors import UsageError
from agentstores.keys import ConversationKey


@dataclass(frozen=True, slots=True)
class Timings:
    """Seconds (and characters). Defaults, as agent servers run: beat 1 s, dead after 3 s,
    recording flush 0.5 s, state checkpoint 5 s; the answer is revealed ``chunk``
    characters every ``tick``."""

    heartbeat: float = 1.0
    dead_after: float = 3.0
    flush: float = 0.5
    checkpoint: float = 5.0
    tick: float = 0.1
    chunk: int = 4
    length: int = 600

    def __post_init__(self) -> None:
        if min(self.heartbeat, self.dead_after, self.flush, self.checkpoint, self.tick) <= 0:
            raise UsageError("every drill timing must be positive")
        if self.dead_after <= self.heartbeat:
            raise UsageError("dead_after must be longer than the heartbeat interval")
        if self.chunk < 1 or self.length < 1:
            raise UsageError("chunk and length must be at least 1")
        turn_seconds = self.length / self.chunk * self.tick
        if turn_seconds < 2 * self.checkpoint:
            raise UsageError(
                f"a turn lasts about {turn_seconds:.1f}s; it must last at least two checkpoint "
                f"intervals ({2 * self.checkpoint:.1f}s) so a producer can be stopped mid-turn "
                "after a checkpoint: raise --length or lower --checkpoint"
            )

    @classmethod
    def fast(cls) -> Timings:
        """Roughly four times quicker than the default timings (for tests)."""
        return cls(
            heartbeat=0.25,
            dead_after=1.0,
            flush=0.1,
            checkpoint=0.5,
            tick=0.02,
            chunk=4,
            length=500,
        )

    @property
    def turn_seconds(self) -> float:
        """About how long one turn's answer takes to stream, in seconds."""
        return self.length / self.chunk * self.tick

    def to_json(self) -> str:
        """These timings as JSON, to hand to a worker process on its command line."""
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, raw: str) -> Timings:
        """The timings :meth:`to_json` wrote, validated again."""
        data: dict[str, Any] = json.loads(raw)
        return cls(**data)


_WORDS: tuple[str, ...] = tuple(
    " ".join(
        (
            "the agent reads the question, checks its notes, calls a tool, waits for the",
            "answer and writes a careful reply; a replica may die mid-sentence, another",
            "takes the turn over from the last checkpoint and the reader never sees a",
            "word go missing or come back twice",
        )
    ).split(" ")
)


def expected_text(turn: int, length: int) -> str:
    """The whole answer of turn ``turn``: ``length`` characters, the same in every process."""
    out = [f"[turn {turn}]"]
    size = len(out[0])
    i = 0
    while size < length:
        word = _WORDS[(i * 7 + turn * 3) % len(_WORDS)]
        out.append(word)
        size += len(word) + 1
        i += 1
    return " ".join(out)[:length]


def user_message_id(turn: int) -> str:
    """The id of turn ``turn``'s user message: the tail the turn's answer is appended after."""
    return f"u{turn}"


def answer_message_id(turn: int) -> str:
    """The turn's lease message id, which is also the assistant message's id."""
    return f"a{turn}"


def conversation_key(tenant: str) -> ConversationKey:
    """The one conversation every process of a drill run uses, under the run's ``tenant``."""
    return ConversationKey(tenant, "kill-and-resume")


PRINCIPAL = "drill-user"
