"""agentstores for LangGraph: a fenced checkpointer over any agentstores backend, and the
thread's transcript read from checkpoints or mirrored into the conversation store."""

from .chat import ThreadChat
from .identity import CLIENT_IDENTITY_KEYS, IdentityResolver
from .publisher import TurnPublisher
from .saver import EPOCH, AgentStoresSaver
from .transcript import CheckpointMessage, CheckpointTranscript, RehydratedTurn

__all__ = [
    "CLIENT_IDENTITY_KEYS",
    "EPOCH",
    "AgentStoresSaver",
    "CheckpointMessage",
    "CheckpointTranscript",
    "IdentityResolver",
    "RehydratedTurn",
    "ThreadChat",
    "TurnPublisher",
]
