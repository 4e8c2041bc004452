"""agentstores-adk from its wheel: a real ADK Runner turn on memory://, read back, and a
stale writer refused (run in a clean venv: no pytest, no repository on the path)."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import AsyncGenerator

from google.adk.agents import LlmAgent
from google.adk.events.event import Event
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions.base_session_service import GetSessionConfig
from google.genai import types

from agentstores import EphemeralStoreWarning, open_stores
from agentstores_adk import AgentStoresSessionService, EventPage, StaleSessionWriteError

warnings.filterwarnings("ignore", category=EphemeralStoreWarning)


class Echo(BaseLlm):
    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        text = llm_request.contents[-1].parts[0].text
        yield LlmResponse(
            content=types.Content(role="model", parts=[types.Part(text=f"echo: {text}")])
        )


async def main() -> None:
    async with open_stores("memory://wheel-adk") as stores:
        sessions = AgentStoresSessionService(stores, tenant="t", principal="u")
        runner = Runner(
            app_name="app",
            agent=LlmAgent(name="echo", model=Echo(model="echo")),
            session_service=sessions,
        )
        session = await sessions.create_session(app_name="app", user_id="u", state={"k": 1})
        message = types.Content(role="user", parts=[types.Part(text="hi")])
        yielded = [
            e
            async for e in runner.run_async(user_id="u", session_id=session.id, new_message=message)
        ]
        stored = await sessions.get_session(app_name="app", user_id="u", session_id=session.id)
        assert stored is not None and stored.state == {"k": 1}
        assert [e.model_dump() for e in stored.events[1:]] == [e.model_dump() for e in yielded]
        first = await sessions.get_session(
            app_name="app", user_id="u", session_id=session.id, config=EventPage(limit=1)
        )
        assert first is not None and first.events[0].content == message
        last = await sessions.get_session(
            app_name="app",
            user_id="u",
            session_id=session.id,
            config=GetSessionConfig(num_recent_events=1),
        )
        assert last is not None and last.events == stored.events[-1:]
        try:
            await sessions.append_event(session, Event(author="user", invocation_id="late"))
        except StaleSessionWriteError:
            pass
        else:
            raise AssertionError("a stale writer was not refused")


asyncio.run(main())
print("ok")
