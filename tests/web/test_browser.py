"""The demo in a real browser: Debian's Chromium, headless, driven by Playwright's Python
API. Tab 1 starts a long answer through replica 1; tab 2 opens the same conversation
through replica 2; replica 1 is SIGKILLed mid-answer. Replica 2 takes the turn over and
finishes it: both tabs end with the same complete answer, with no duplicated or missing
text, equal to the stored transcript, and the page shows the takeover.

Screenshots (tab 1 mid-answer, tab 2 at the takeover, tab 1 at the end) go to the test's
directory, and also to ``$AGENTSTORES_SCREENSHOTS`` when set (``docs/web`` keeps the ones
the docs show).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from tests.servers import chromium
from tests.servers.backends import Servers
from tests.web.conftest import USER_HEADER, expected, start_cluster

SCREENSHOTS_ENV = "AGENTSTORES_SCREENSHOTS"
WORDS = 400
"""An 8 s answer: long enough that the kill lands mid-answer on a loaded machine."""
TIMEOUT_MS = 60_000
"""A failure timeout for each wait (never a measured time)."""


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=chromium.executable(), args=list(chromium.FLAGS), headless=True
        )
        try:
            yield launched
        finally:
            launched.close()


def answer_length(page: Page) -> int:
    text = page.text_content(".message[data-role=assistant]:last-child .text") or ""
    return len(text)


def notes(page: Page) -> list[str]:
    return [n.strip() for n in page.locator("#notes .note").all_text_contents()]


def served_by(page: Page) -> list[str]:
    return page.locator("#log li").all_text_contents()


def test_two_tabs_survive_the_producing_replica_being_killed(
    browser: Browser, servers: Servers, tmp_path: Path
) -> None:
    cluster = start_cluster(servers.url("file"), tmp_path / "logs", words=WORDS)
    shots = tmp_path / "shots"
    shots.mkdir()
    try:
        producer, survivor = cluster.replicas
        context = browser.new_context(viewport={"width": 1280, "height": 720})
        context.set_default_timeout(TIMEOUT_MS)
        tab1 = context.new_page()
        tab1.goto(f"{cluster.proxy_url}/?via=0&user=alice")
        tab1.wait_for_selector("body[data-status=idle]")
        tab1.click("#send")
        tab1.wait_for_function(
            "() => (document.querySelector('.message[data-role=assistant] .text') || {})"
            ".textContent?.length > 200"
        )
        tab1.screenshot(path=shots / "tab1-mid-answer.png")
        chat_id = tab1.text_content("#chat-id")
        assert chat_id

        tab2 = context.new_page()
        tab2.goto(f"{cluster.proxy_url}/?c={chat_id}&via=1&user=alice")
        tab2.wait_for_selector("body[data-status=streaming]")
        streamed_before_kill = answer_length(tab2)
        statuses_at_kill = [tab.text_content("#status") for tab in (tab1, tab2)]

        producer.kill()  # SIGKILL mid-answer: no goodbye, its lease simply stops beating
        tab2.wait_for_selector("#notes .note.takeover")
        tab2.screenshot(path=shots / "tab2-at-takeover.png")
        for tab in (tab1, tab2):
            tab.wait_for_selector("body[data-status=done]")
        tab1.screenshot(path=shots / "tab1-after-takeover.png")

        with httpx.Client(base_url=survivor.url, timeout=30) as client:
            stored = client.get(
                f"/conversations/{chat_id}/messages",
                params={"format": "ui"},
                headers={USER_HEADER: "alice"},
            )
        streamed = [tab.text_content("#streamed") or "" for tab in (tab1, tab2)]
        all_notes = [notes(tab) for tab in (tab1, tab2)]
        logs = [served_by(tab) for tab in (tab1, tab2)]
    finally:
        cluster.close()
    _publish(shots)

    context_info = f"notes: {all_notes}\nrequests: {logs}"
    assert statuses_at_kill == ["streaming", "streaming"], context_info
    assert stored.status_code == 200, stored.text
    body = stored.json()
    messages = body["messages"] if isinstance(body, dict) else body
    answers = [m for m in messages if m["role"] == "assistant"]
    assert len(answers) == 1, messages
    stored_text = "".join(p["text"] for p in answers[0]["parts"] if p["type"] == "text")
    # Both tabs assembled the whole answer, each exactly the stored one.
    assert streamed[0] == streamed[1] == stored_text == expected(WORDS), context_info
    assert len(stored_text) > streamed_before_kill
    for tab_notes in all_notes:
        assert not [n for n in tab_notes if "differs" in n or "mismatch" in n], context_info
        assert any("equals the stored one" in n for n in tab_notes), context_info
    # The takeover is on the page, by the surviving replica, and tab 1's stream moved there.
    assert any("takeover" in n for tab_notes in all_notes for n in tab_notes), context_info
    assert any("POST chat -> 200 replica-1" in line for line in logs[0]), context_info
    assert any("stream -> 200 replica-2" in line for line in logs[0]), context_info


def _publish(shots: Path) -> None:
    """Copy the screenshots where ``$AGENTSTORES_SCREENSHOTS`` says (the docs' folder)."""
    target = os.environ.get(SCREENSHOTS_ENV)
    if not target:
        return
    Path(target).mkdir(parents=True, exist_ok=True)
    for shot in shots.glob("*.png"):
        shutil.copyfile(shot, Path(target) / shot.name)
