"""The agent project the perf servers load (``ZAV_PROJECT_DIR``), as ``za`` projects are laid out."""

from zav.agents_sdk import ChatAgentClassRegistry

from . import counting_agent

__all__ = ["ChatAgentClassRegistry", "counting_agent"]
