"""Run inside a clean venv holding core's wheel, agentstores-openai-agents' wheel and the
OpenAI Agents SDK (no pytest, nothing from the repo): a ``Runner`` turn through the
bridge over memory://, under the turn lease and without it; exits 0 when all holds."""

from __future__ import annotations

import asyncio
import warnings

from agents import Agent, Runner, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message

from agentstores import BusyError, EphemeralStoreWarning, open_stores
from agentstores_openai_agents import AgentStoresSession, list_sessions, run_turn

warnings.simplefilter("ignore", EphemeralStoreWarning)
set_tracing_disabled(True)


async def main() -> None:
    model = ScriptedModel([[assistant_message("one")], [assistant_message("two")]])
    agent = Agent("wheel", model=model)
    async with open_stores("memory://wheel") as stores:
        session = AgentStoresSession("s", stores, tenant="wheels", principal="user-1")
        assert (await run_turn(session, agent, "first")).final_output == "one"
        assert (await Runner.run(agent, "second", session=session)).final_output == "two"
        items = await session.get_items()
        assert [i.get("role") for i in items] == ["user", "assistant", "user", "assistant"], items
        assert await session.get_items(1) == items[-1:]
        other = AgentStoresSession("s", stores, tenant="wheels", principal="user-2")
        assert await other.get_items() == []
        async with session.turn("t-1"):
            try:
                async with session.turn("t-2"):
                    raise SystemExit("a second turn entered a busy session")
            except BusyError:
                pass
        assert await session.pop_item() == items[-1]
        await session.clear_session()
        assert await session.get_items() == []
        assert (await list_sessions(stores, tenant="wheels", principal="user-1")).session_ids == [
            "s"
        ]
    print("ok")


asyncio.run(main())
