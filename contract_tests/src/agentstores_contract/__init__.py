"""The agentstores contract suite: property-based tests any backend can run.

Subclass :class:`ContractSuite` (every area) or one area's class, such as
:class:`FencingContract`, and override its ``backend`` fixture; run
``pytest --agentstores-url URL``; run ``agentstores check URL``; or call :func:`validate`
from code.

Names are imported lazily so that the pytest plugin can enable assertion rewriting
for the suite's modules before they load. This module has no assertions of its own and
is imported before the plugin can register the package (PYTEST_DONT_REWRITE tells pytest
not to warn about it).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .backend import BackendUnderTest
    from .base import ContractBase
    from .clock import ClockContract
    from .concurrency import ConcurrencyContract
    from .conversation_metadata import ConversationMetadataContract
    from .conversations import ConversationContract
    from .erasure import ErasureContract
    from .fencing import FencingContract
    from .follow import FollowContract
    from .hostile_input import HostileInputContract
    from .isolation import KeyContract
    from .lease_lifecycle import LeaseLifecycleContract
    from .lifetimes import LifetimeContract
    from .linearizability import Operation, check
    from .long_transcripts import LongTranscriptContract
    from .metadata import MetadataContract
    from .multi_record import MultiRecordContract
    from .multiprocess import MultiProcessContract
    from .oauth import OAuthContract
    from .ownership import OwnershipContract
    from .pause_tokens import PauseTokenContract
    from .promises import PROMISES, promise, register_promise
    from .protocol import ProtocolContract
    from .recording import RecordingContract
    from .regions import RegionContract
    from .replicas import ReplicaContract
    from .siblings import SiblingContract
    from .state import StateContract
    from .store_edges import StoreEdgesContract
    from .suite import ContractSuite
    from .supervision import SupervisionContract
    from .supervision_batch import SupervisionBatchContract
    from .sweep_accounting import SweepAccountingContract
    from .turns import TurnContract
    from .urls import UrlContract
    from .validation import PromiseResult, Report, validate

_EXPORTS = {
    "BackendUnderTest": "backend",
    "ContractBase": "base",
    "ClockContract": "clock",
    "ConcurrencyContract": "concurrency",
    "ConversationMetadataContract": "conversation_metadata",
    "ConversationContract": "conversations",
    "ErasureContract": "erasure",
    "FencingContract": "fencing",
    "FollowContract": "follow",
    "HostileInputContract": "hostile_input",
    "KeyContract": "isolation",
    "LeaseLifecycleContract": "lease_lifecycle",
    "LifetimeContract": "lifetimes",
    "LongTranscriptContract": "long_transcripts",
    "Operation": "linearizability",
    "check": "linearizability",
    "MetadataContract": "metadata",
    "MultiRecordContract": "multi_record",
    "MultiProcessContract": "multiprocess",
    "OAuthContract": "oauth",
    "OwnershipContract": "ownership",
    "PauseTokenContract": "pause_tokens",
    "PROMISES": "promises",
    "promise": "promises",
    "register_promise": "promises",
    "ProtocolContract": "protocol",
    "RecordingContract": "recording",
    "RegionContract": "regions",
    "ReplicaContract": "replicas",
    "SiblingContract": "siblings",
    "StateContract": "state",
    "StoreEdgesContract": "store_edges",
    "ContractSuite": "suite",
    "SupervisionContract": "supervision",
    "SupervisionBatchContract": "supervision_batch",
    "SweepAccountingContract": "sweep_accounting",
    "TurnContract": "turns",
    "UrlContract": "urls",
    "PromiseResult": "validation",
    "Report": "validation",
    "validate": "validation",
}

__all__ = [
    "PROMISES",
    "BackendUnderTest",
    "ClockContract",
    "ConcurrencyContract",
    "ContractBase",
    "ContractSuite",
    "ConversationContract",
    "ConversationMetadataContract",
    "ErasureContract",
    "FencingContract",
    "FollowContract",
    "HostileInputContract",
    "KeyContract",
    "LeaseLifecycleContract",
    "LifetimeContract",
    "LongTranscriptContract",
    "MetadataContract",
    "MultiProcessContract",
    "MultiRecordContract",
    "OAuthContract",
    "Operation",
    "OwnershipContract",
    "PauseTokenContract",
    "PromiseResult",
    "ProtocolContract",
    "RecordingContract",
    "RegionContract",
    "ReplicaContract",
    "Report",
    "SiblingContract",
    "StateContract",
    "StoreEdgesContract",
    "SupervisionBatchContract",
    "SupervisionContract",
    "SweepAccountingContract",
    "TurnContract",
    "UrlContract",
    "check",
    "promise",
    "register_promise",
    "validate",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
