"""agentstores-zav: the zav agents SDK's five stores on any agentstores backend.

``setup_app(**zav_stores("postgresql://..."), agent_registries_factory=...)`` wires the
agent state, stream recording, stream supervision, conversation and MCP OAuth stores
over one agentstores bundle, opened and closed with the application's lifespan.
"""

from .app import ZavStores, zav_stores
from .bundle import Bundle
from .conversations import AgentStoresConversationStore
from .events import ZavEventHandlers
from .oauth import AgentStoresMCPOAuthRepository
from .recording import AgentStoresRecordingStore
from .state import AgentStoresStateStore
from .supervision import AgentStoresSupervisionStore

__version__ = "0.1.0"

__all__ = [
    "AgentStoresConversationStore",
    "AgentStoresMCPOAuthRepository",
    "AgentStoresRecordingStore",
    "AgentStoresStateStore",
    "AgentStoresSupervisionStore",
    "Bundle",
    "ZavEventHandlers",
    "ZavStores",
    "__version__",
    "zav_stores",
]
