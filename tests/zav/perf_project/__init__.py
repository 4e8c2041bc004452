"""The agent project the perf servers load (``ZAV_PROJECT_DIR``), laid out as ``za`` makes one."""

from zav.agents_sdk import ChatAgentClassRegistry

from . import counting_agent

__all__ = ["ChatAgentClassRegistry", "counting_agent"]
