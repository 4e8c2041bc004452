"""The store ABCs adapters subclass. Each writes only storage code; these hold the rest."""

from ..capabilities import Capability
from ._base import UNSET, StoreBase, Unset
from .bundle import Stores
from .conversations import (
    AppendRequest,
    ConversationStore,
    EncodedMessage,
    Expired,
    IdleFor,
    OverCap,
    SweepRule,
    TranscriptQuery,
)
from .oauth import OAuthRepository
from .pause_tokens import PauseTokenStore
from .recording import RecordingStore
from .state import AgentStateStore
from .supervision import SupervisionStore

__all__ = [
    "AppendRequest",
    "UNSET",
    "AgentStateStore",
    "Capability",
    "ConversationStore",
    "EncodedMessage",
    "Expired",
    "IdleFor",
    "OAuthRepository",
    "OverCap",
    "PauseTokenStore",
    "RecordingStore",
    "StoreBase",
    "Stores",
    "SupervisionStore",
    "SweepRule",
    "TranscriptQuery",
    "Unset",
]
