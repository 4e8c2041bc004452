"""The store ABCs adapters subclass. Each writes only storage code; these hold the rest."""

from ..capabilities import Capability
from ._base import UNSET, StoreBase, Unset
from .bundle import Stores
from .conversation_metadata import (
    MAX_CONVERSATION_METADATA_BYTES,
    MetadataUpdate,
    decode_metadata,
    merge_metadata,
    metadata_size,
)
from .conversations import (
    AppendRequest,
    ConversationStore,
    Cut,
    EncodedMessage,
    Expired,
    IdleFor,
    OverCap,
    SweepRule,
    TranscriptQuery,
    cut_position,
)
from .oauth import OAuthStore
from .pause_tokens import PauseTokenStore
from .recording import RecordingStore
from .state import AgentStateStore
from .supervision import SupervisionStore

__all__ = [
    "MAX_CONVERSATION_METADATA_BYTES",
    "UNSET",
    "AgentStateStore",
    "AppendRequest",
    "Capability",
    "ConversationStore",
    "Cut",
    "EncodedMessage",
    "Expired",
    "IdleFor",
    "MetadataUpdate",
    "OAuthStore",
    "OverCap",
    "PauseTokenStore",
    "RecordingStore",
    "StoreBase",
    "Stores",
    "SupervisionStore",
    "SweepRule",
    "TranscriptQuery",
    "Unset",
    "cut_position",
    "decode_metadata",
    "merge_metadata",
    "metadata_size",
]
