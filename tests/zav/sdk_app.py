"""The SDK's app as ``setup_app`` builds it for a project's agent setups, with every
store from the bridge: what a user of agentstores-zav writes, shared by the tests that
serve it in-process and the perf servers."""

from __future__ import annotations

from typing import Any

from zav.agents_sdk import AgentSetupRetrieverFromFile, setup_app
from zav.agents_sdk.adapters import AgentDependencyRegistry
from zav.agents_sdk.adapters.local_agent_registries_factory import LocalAgentRegistriesFactory
from zav.agents_sdk.domain.chat_agent_registry import ChatAgentClassRegistry

from agentstores_zav import zav_stores


def bridged_app(agent_setups: str, url: str) -> Any:
    """``setup_app`` with local agent registries read from ``agent_setups`` (a JSON file)
    and the five stores on ``url``."""
    retriever = AgentSetupRetrieverFromFile(file_path=agent_setups)
    return setup_app(
        agent_registries_factory=LocalAgentRegistriesFactory(
            agent_setup_retriever=retriever,
            chat_agent_class_registry=ChatAgentClassRegistry,
            agent_dependency_registry=AgentDependencyRegistry,
            llm_configuration_store=retriever.llm_configuration_store,
        ),
        **zav_stores(url),
    )
