"""The SDK's ``za agents perf server`` app, on agentstores through the bridge.

``za agents perf server`` serves ``zav.agents_sdk.cli.perf_app:app``, which hard-wires the
SDK's file stores; this is the same app (``setup_app`` with the project's agents, the
same ``/perf/info`` and ``/perf/kill`` routes) with ``setup_app(**zav_stores(url))``.
Run it with uvicorn: ``AGENTSTORES_URL=... ZAV_PROJECT_DIR=... uvicorn tests.zav.perf_app:app``.
"""

from __future__ import annotations

import asyncio
import os

from zav.agents_sdk.cli.load_chat_agent_factory import from_string

from tests.zav.sdk_app import bridged_app

project_dir = os.environ["ZAV_PROJECT_DIR"]
label = os.environ.get("ZAV_PERF_LABEL", "server")
from_string(project_dir)
app = bridged_app(os.path.join(project_dir, "agent_setups.json"), os.environ["AGENTSTORES_URL"])


@app.get("/perf/info")
async def perf_info() -> dict[str, object]:
    return {"label": label, "pid": os.getpid()}


@app.post("/perf/kill")
async def perf_kill() -> dict[str, object]:
    """As the SDK's: exit without unwinding, so only the periodic checkpoint survives."""

    async def die() -> None:
        await asyncio.sleep(0.1)
        os._exit(137)

    asyncio.create_task(die())  # noqa: RUF006 - the process ends with it
    return {"status": "killing", "label": label, "pid": os.getpid()}
