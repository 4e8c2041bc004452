"""The installed agentstores-pydantic-ai wheel, used through Pydantic AI's own API over
memory:// (run in a clean venv: core's wheel, the bridge's wheel and Pydantic AI only).

Two runs of an agent continue one stored history through ``message_history=``; a run
that started from a stale history is refused; a retried store is a no-op. Exits 0."""

from __future__ import annotations

import asyncio
import sys
import warnings
from pathlib import Path

# This script is named pydantic_ai.py: its own folder, first on sys.path, would shadow
# the framework it uses.
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]

from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.messages import ModelMessagesTypeAdapter  # noqa: E402
from pydantic_ai.models.test import TestModel  # noqa: E402

from agentstores import StaleWriteError, open_stores  # noqa: E402
from agentstores_pydantic_ai import AgentStoresHistory  # noqa: E402

warnings.filterwarnings("ignore", message=".*IN-MEMORY.*")


async def main() -> None:
    agent = Agent(TestModel(custom_output_text="ok"), system_prompt="Be brief.")

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        return a + b

    async with open_stores("memory://wheel-pydantic-ai") as stores:
        history = AgentStoresHistory(stores, tenant="acme", principal="alice")
        await history.run(agent, "s", "one")
        second = await history.run(agent, "s", "two")
        loaded = await history.load("s")
        dump = ModelMessagesTypeAdapter.dump_json
        assert dump(loaded) == dump(second.all_messages()), "the history did not round-trip"
        a, b = await history.load("s"), await history.load("s")
        run_a = await agent.run("a", message_history=a)
        run_b = await agent.run("b", message_history=b)
        await history.append("s", run_a.new_messages(), after=a)
        await history.append("s", run_a.new_messages(), after=a)
        try:
            await history.append("s", run_b.new_messages(), after=b)
        except StaleWriteError:
            pass
        else:
            raise AssertionError("a run from a stale history was stored")
        assert dump(await history.load("s")) == dump(run_a.all_messages())
        print("agentstores-pydantic-ai: ok")


asyncio.run(main())
