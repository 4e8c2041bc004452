"""The two-replica demo: replicas of agentstores-asgi's demo app over one store, a
round-robin proxy in front of them and a chat page (plain HTML and JavaScript) that
speaks the AI SDK's UI message stream. ``python -m agentstores_tools.demo`` runs it."""

from .cluster import DemoCluster, Replica
from .proxy import PIN_HEADER, REPLICA_HEADER, create_proxy

__all__ = ["PIN_HEADER", "REPLICA_HEADER", "DemoCluster", "Replica", "create_proxy"]
