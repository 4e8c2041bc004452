"""agentstores for LangGraph: a fenced checkpointer over any agentstores backend, and the
thread's transcript read from checkpoints or mirrored into the conversation store."""

from .saver import EPOCH, PRINCIPAL, TENANT, AgentStoresSaver

__all__ = ["EPOCH", "PRINCIPAL", "TENANT", "AgentStoresSaver"]
