"""ContractSuite: every area's contract in one test class to subclass."""

from __future__ import annotations

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
from .long_transcripts import LongTranscriptContract
from .metadata import MetadataContract
from .multi_record import MultiRecordContract
from .multiprocess import MultiProcessContract
from .oauth import OAuthContract
from .ownership import OwnershipContract
from .pause_tokens import PauseTokenContract
from .protocol import ProtocolContract
from .recording import RecordingContract
from .regions import RegionContract
from .replicas import ReplicaContract
from .siblings import SiblingContract
from .state import StateContract
from .store_edges import StoreEdgesContract
from .supervision import SupervisionContract
from .supervision_batch import SupervisionBatchContract
from .sweep_accounting import SweepAccountingContract
from .turns import TurnContract
from .urls import UrlContract


class ContractSuite(
    KeyContract,
    SiblingContract,
    SupervisionContract,
    SupervisionBatchContract,
    RecordingContract,
    StateContract,
    ConversationContract,
    LongTranscriptContract,
    ConversationMetadataContract,
    PauseTokenContract,
    OAuthContract,
    FencingContract,
    OwnershipContract,
    ErasureContract,
    ConcurrencyContract,
    MultiRecordContract,
    MultiProcessContract,
    ClockContract,
    LifetimeContract,
    ProtocolContract,
    TurnContract,
    FollowContract,
    RegionContract,
    MetadataContract,
    LeaseLifecycleContract,
    SweepAccountingContract,
    StoreEdgesContract,
    HostileInputContract,
    UrlContract,
    ReplicaContract,
):
    """The whole contract: every area's class above, in one. Subclass it (or one area's
    class, to adopt the contract area by area) with a name starting with ``Test`` and
    override the ``backend`` fixture, a class-scoped classmethod::

        class TestMyBackend(ContractSuite):
            @pytest.fixture(scope="class")
            @classmethod
            def backend(cls) -> BackendUnderTest:
                return BackendUnderTest.from_url("mine://...")
    """
