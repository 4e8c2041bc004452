"""The Vercel AI SDK itself (the ``ai`` package pinned in web/package-lock.json), from Node,
against two replicas of the demo app over one store: ``DefaultChatTransport.sendMessages``
starts a turn on one replica, the client aborts mid-answer, ``reconnectToStream`` resumes
on the other replica, and ``readUIMessageStream`` assembles the message. What the client
assembled must be the stored answer exactly: no gap, no repeat, one text part."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.servers import node
from tests.servers.backends import Servers
from tests.web.conftest import EXPECTED, QUESTION, fresh_id, headers, start_cluster

DROP_AFTER = 40
"""The client aborts once it has assembled this many characters of the answer."""


@pytest.mark.parametrize("backend", ["file", "postgres"])
def test_abort_then_resume_on_the_other_replica(
    backend: str, servers: Servers, tmp_path: Path
) -> None:
    user, chat_id = f"user-{fresh_id()[:8]}", fresh_id()
    cluster = start_cluster(servers.url(backend), tmp_path)
    try:
        first, second = cluster.replicas
        seen = node.run_script(
            "ai-sdk-resume.cjs",
            {
                "first": first.url,
                "second": second.url,
                "headers": headers(user),
                "chatId": chat_id,
                "userMessageId": f"u-{fresh_id()}",
                "text": QUESTION,
                "dropAfter": DROP_AFTER,
            },
        )
        with httpx.Client(base_url=second.url, headers=headers(user), timeout=30) as client:
            stored = client.get(f"/conversations/{chat_id}/messages")
            stored_ui = client.get(f"/conversations/{chat_id}/messages", params={"format": "ui"})
    finally:
        cluster.close()

    partial, final = seen["partial"], seen["final"]
    assert isinstance(partial, dict) and isinstance(final, dict), seen
    # The drop came mid-answer, and the resumed message is the same message, in one piece.
    assert len(partial["text"]) >= DROP_AFTER
    assert EXPECTED.startswith(partial["text"]) and len(EXPECTED) > len(partial["text"])
    assert final["text"] == EXPECTED
    assert final["id"] == partial["id"]
    assert final["textParts"] == 1, final
    second_chunks = seen["secondChunks"]
    assert isinstance(second_chunks, list)
    assert second_chunks.count("start") == 1 and second_chunks.count("finish") == 1
    assert seen["idleAfter"] is True  # the turn is over: resuming is a 204

    # The stored transcript holds exactly what the client assembled.
    assert stored.status_code == 200, stored.text
    assert stored_ui.status_code == 200, stored_ui.text
    assistant = [m for m in _messages(stored.json()) if m["role"] == "assistant"]
    assert len(assistant) == 1
    assert assistant[0]["content"] == final["text"]
    ui = [m for m in _messages(stored_ui.json()) if m["role"] == "assistant"]
    assert [m["id"] for m in ui] == [final["id"]]
    assert "".join(p["text"] for p in ui[0]["parts"] if p["type"] == "text") == final["text"]


def _messages(body: object) -> list[dict[str, object]]:
    """The messages of a transcript answer (a list, or ``{"messages": [...]}``)."""
    if isinstance(body, dict):
        body = body["messages"]
    assert isinstance(body, list), body
    return body


def test_use_chat_resumes_after_a_reload_on_the_other_replica(
    servers: Servers, tmp_path: Path
) -> None:
    """``useChat``'s own logic (the SDK's ``AbstractChat``): a tab closes mid-answer, a new
    page on the other replica starts from the stored transcript and ``resumeStream()``s.
    It ends with the user message and one assistant message holding the whole answer
    (a resume that duplicated the assistant message, or lost its start, fails)."""
    user, chat_id = f"user-{fresh_id()[:8]}", fresh_id()
    cluster = start_cluster(servers.url("file"), tmp_path)
    try:
        first, second = cluster.replicas
        seen = node.run_script(
            "ai-sdk-chat.cjs",
            {
                "first": first.url,
                "second": second.url,
                "headers": headers(user),
                "chatId": chat_id,
                "text": QUESTION,
                "dropAfter": DROP_AFTER,
            },
        )
        with httpx.Client(base_url=second.url, headers=headers(user), timeout=30) as client:
            stored = client.get(f"/conversations/{chat_id}/messages", params={"format": "ui"})
    finally:
        cluster.close()

    assert seen["errors"] == [], seen
    assert seen["tab2Status"] == "ready"
    tab1, initial, tab2 = seen["tab1"], seen["initial"], seen["tab2"]
    assert isinstance(tab1, list) and isinstance(initial, list) and isinstance(tab2, list)
    assert [m["role"] for m in initial] == ["user"], initial  # the answer is still running
    assert [m["role"] for m in tab2] == ["user", "assistant"], tab2
    assert tab2[0]["id"] == tab1[0]["id"] == initial[0]["id"]
    assert tab2[1]["id"] == tab1[1]["id"]
    dropped = seen["dropped"]
    assert isinstance(dropped, str) and len(dropped) >= DROP_AFTER
    assert EXPECTED.startswith(dropped) and len(EXPECTED) > len(dropped)
    assert tab2[1]["text"] == EXPECTED
    assert stored.status_code == 200, stored.text
    stored_messages = _messages(stored.json())
    assert [(m["id"], m["role"]) for m in stored_messages] == [(m["id"], m["role"]) for m in tab2]
    parts = stored_messages[1]["parts"]
    assert isinstance(parts, list)
    assert "".join(p["text"] for p in parts if p["type"] == "text") == tab2[1]["text"]
