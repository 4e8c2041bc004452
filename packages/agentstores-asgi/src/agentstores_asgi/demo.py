"""A demo replica: ``python -m agentstores_asgi.demo --port P --url URL``.

The producer is deterministic and slow: it writes a long known text word by word at a
set pace, and a takeover continues it from the recorded text, so a test (or a person)
can compare what every screen shows with the text it must be. The caller's identity is
the ``x-agentstores-user`` header, else the ``agentstores_user`` cookie (tenant
``demo``); without either the request is 401.
"""

from __future__ import annotations

import argparse
import asyncio
import re
from collections.abc import AsyncIterator, Sequence

from starlette.applications import Starlette
from starlette.requests import Request

from agentstores.protocol import LeaseConfig

from .app import create_app
from .context import Identity, ProduceContext

TENANT = "demo"
USER_HEADER = "x-agentstores-user"
USER_COOKIE = "agentstores_user"
WORDS = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliett",
    "kilo",
    "lima",
    "mike",
    "november",
    "oscar",
    "papa",
    "quebec",
    "romeo",
    "sierra",
    "tango",
    "uniform",
    "victor",
    "whiskey",
    "xray",
    "yankee",
    "zulu",
]


def answer_text(question: str, words: int) -> str:
    """The answer to ``question``: ``words`` numbered words, the same on every replica."""
    return " ".join(f"{WORDS[i % len(WORDS)]}-{i}" for i in range(words)) + "."


def word_chunks(text: str) -> list[str]:
    """``text`` cut after each space: the pieces, joined, give it back exactly."""
    return re.findall(r"\S+\s*|\s+", text)


async def demo_identity(request: Request) -> Identity | None:
    """The demo's "auth": a user name from a header or cookie (never for real use)."""
    user = request.headers.get(USER_HEADER) or request.cookies.get(USER_COOKIE)
    return Identity(TENANT, user) if user else None


def slow_producer(words: int, pace: float):  # type: ignore[no-untyped-def]
    """A producer writing :func:`answer_text` one word every ``pace`` seconds, resuming
    after the text a taken-over turn already recorded."""

    async def produce(ctx: ProduceContext) -> AsyncIterator[str]:
        question = ctx.user_message.content if ctx.user_message is not None else ""
        text = answer_text(str(question), words)
        done = ctx.text if text.startswith(ctx.text) else ""
        for chunk in word_chunks(text[len(done) :]):
            await asyncio.sleep(pace)
            yield chunk

    return produce


def build_app(
    url: str,
    *,
    words: int = 400,
    pace: float = 0.05,
    dead_after: float = 3.0,
    heartbeat: float = 1.0,
    stream_every: float = 0.1,
    follow_poll: float = 0.1,
) -> Starlette:
    """The demo app over the stores at ``url``."""
    return create_app(
        url,
        identity=demo_identity,
        producer=slow_producer(words, pace),
        lease_config=LeaseConfig(dead_after=dead_after, heartbeat_interval=heartbeat),
        stream_every=stream_every,
        follow_poll=follow_poll,
    )


def main(argv: Sequence[str] | None = None) -> None:
    """Serve one demo replica with uvicorn."""
    parser = argparse.ArgumentParser(prog="python -m agentstores_asgi.demo")
    parser.add_argument("--url", required=True, help="the stores every replica shares")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--words", type=int, default=400, help="length of the answer")
    parser.add_argument("--pace", type=float, default=0.05, help="seconds per word")
    parser.add_argument("--dead-after", type=float, default=3.0)
    parser.add_argument("--heartbeat", type=float, default=1.0)
    parser.add_argument("--stream-every", type=float, default=0.1)
    parser.add_argument("--follow-poll", type=float, default=0.1)
    args = parser.parse_args(argv)
    import uvicorn

    app = build_app(
        args.url,
        words=args.words,
        pace=args.pace,
        dead_after=args.dead_after,
        heartbeat=args.heartbeat,
        stream_every=args.stream_every,
        follow_poll=args.follow_poll,
    )
    uvicorn.run(
        app, host=args.host, port=args.port, log_level="warning", timeout_graceful_shutdown=2
    )


if __name__ == "__main__":
    main()
