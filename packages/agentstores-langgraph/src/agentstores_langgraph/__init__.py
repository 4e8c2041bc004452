"""agentstores for LangGraph: a fenced checkpointer over any agentstores backend, and the
thread's transcript read from checkpoints or mirrored into the conversation store."""

from .chat import ThreadChat
from .publisher import TurnPublisher
from .saver import EPOCH, PRINCIPAL, TENANT, AgentStoresSaver
from .transcript import CheckpointMessage, CheckpointTranscript, RehydratedTurn

__all__ = [
    "EPOCH",
    "PRINCIPAL",
    "TENANT",
    "AgentStoresSaver",
    "CheckpointMessage",
    "CheckpointTranscript",
    "RehydratedTurn",
    "ThreadChat",
    "TurnPublisher",
]
