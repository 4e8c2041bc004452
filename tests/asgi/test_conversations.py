"""The conversation routes on one in-memory store: list with a cursor, the transcript by
position, speaker, time and limit (and as UIMessages), title, share, truncate, branch and
delete (a later send on the erased id is 410)."""

from __future__ import annotations

from datetime import datetime, timedelta

from .harness import EXPECTED, Caller, Replica, chat_body, read_stream, streaming, user_message


async def turn(caller: Caller, replica: Replica, chat_id: str, *messages: dict) -> str:
    async with streaming(caller, replica, "POST", "/chat", json=chat_body(chat_id, *messages)) as r:
        assert r.status_code == 200, await r.aread()
        reading = await read_stream(r)
    assert reading.message_id is not None
    return reading.message_id


async def test_list_with_a_cursor(memory_replicas: tuple[Replica, Replica], alice: Caller):
    a, b = memory_replicas
    for chat_id in ("c1", "c2", "c3"):
        await turn(alice, a, chat_id, user_message(f"u-{chat_id}"))
    seen: list[str] = []
    cursor = None
    async with alice.client(b) as client:
        for _ in range(3):
            query = {"limit": 2, **({"cursor": cursor} if cursor else {})}
            page = (await client.get("/conversations", params=query)).json()
            seen += [c["id"] for c in page["conversations"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
    assert seen == ["c3", "c2", "c1"]


async def test_transcript_reads(memory_replicas: tuple[Replica, Replica], alice: Caller):
    a, b = memory_replicas
    first = await turn(alice, a, "c1", user_message("u1", "one"))
    second = await turn(
        alice,
        a,
        "c1",
        user_message("u1", "one"),
        {"id": first, "role": "assistant", "parts": []},
        user_message("u2", "two"),
    )
    async with alice.client(b) as client:
        get = client.get
        every = (await get("/conversations/c1/messages")).json()["messages"]
        assert [m["id"] for m in every] == ["u1", first, "u2", second]
        assert [m["seq"] for m in every] == [0, 1, 2, 3]
        page = (await get("/conversations/c1/messages", params={"start": 1, "limit": 2})).json()
        assert [m["id"] for m in page["messages"]] == [first, "u2"]
        users = (await get("/conversations/c1/messages", params={"speaker": "user"})).json()
        assert [(m["id"], m["index"]) for m in users["messages"]] == [("u1", 0), ("u2", 1)]
        later = (
            await get("/conversations/c1/messages", params={"speaker": "user", "start": 1})
        ).json()
        assert [m["id"] for m in later["messages"]] == ["u2"]
        since = datetime.fromisoformat(every[2]["created_at"])
        recent = (
            await get("/conversations/c1/messages", params={"since": since.isoformat()})
        ).json()
        assert [m["id"] for m in recent["messages"]] == ["u2", second]
        future = (since + timedelta(days=1)).isoformat()
        assert (await get("/conversations/c1/messages", params={"since": future})).json() == {
            "messages": []
        }
        ui = (await get("/conversations/c1/messages", params={"format": "ui"})).json()["messages"]
        assert ui[0] == {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "one"}]}
        assert ui[3] == {
            "id": second,
            "role": "assistant",
            "parts": [{"type": "text", "text": EXPECTED}],
        }


async def test_title_share_truncate_branch_delete(
    memory_replicas: tuple[Replica, Replica], alice: Caller
):
    a, b = memory_replicas
    bob = Caller(alice.tenant, "bob")
    answer = await turn(alice, a, "c1", user_message("u1"))
    async with alice.client(b) as client, bob.client(a) as as_bob:
        titled = await client.patch("/conversations/c1", json={"title": "Plans"})
        assert titled.status_code == 200 and titled.json()["title"] == "Plans"
        assert (await client.get("/conversations/c1")).json()["title"] == "Plans"
        assert (await as_bob.get("/conversations/c1")).status_code == 404
        assert (await client.put("/conversations/c1/shares/bob")).status_code == 204
        shared = await as_bob.get("/conversations/c1")
        assert shared.status_code == 200 and "shared_with" not in shared.json()
        assert (await client.get("/conversations/c1")).json()["shared_with"] == ["bob"]
        assert (await client.delete("/conversations/c1/shares/bob")).status_code == 204
        assert (await as_bob.get("/conversations/c1")).status_code == 404

        branched = await client.post("/conversations/c1/branch", json={"message_id": "u1"})
        assert branched.status_code == 201
        copy = branched.json()["id"]
        copied = (
            await client.get(f"/conversations/{copy}/messages", params={"format": "ui"})
        ).json()
        assert [m["role"] for m in copied["messages"]] == ["user"]

        stale = await client.post(
            "/conversations/c1/truncate", json={"message_id": "u1", "expected_tail": "u1"}
        )
        assert stale.status_code == 409 and stale.json()["error"]["code"] == "stale"
        assert stale.json()["error"]["tail"] == answer
        cut = await client.post(
            "/conversations/c1/truncate",
            json={"message_id": answer, "cut": "before", "expected_tail": answer},
        )
        assert cut.status_code == 200 and cut.json() == {"removed": 1}
        left = (await client.get("/conversations/c1/messages")).json()["messages"]
        assert [m["id"] for m in left] == ["u1"]

        assert (await client.delete("/conversations/c1")).status_code == 204
        assert (await client.get("/conversations/c1")).status_code == 404
        assert (await client.delete("/conversations/c1")).status_code == 404
        again = await client.post("/chat", json=chat_body("c1", user_message("u9")))
        assert again.status_code == 410 and again.json()["error"]["code"] == "erased"
        assert (await client.get(f"/conversations/{copy}")).status_code == 200
