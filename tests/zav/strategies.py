"""Hypothesis strategies for the SDK's ChatMessage and MCP OAuth records."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import strategies as st
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from zav.agents_sdk.adapters.mcp import (
    MCPOAuthClientInfoRecord,
    MCPOAuthPendingAuthorization,
    MCPUserIntegrationRecord,
)
from zav.agents_sdk.domain.chat_message import (
    ChatMessage,
    ChatMessageEvidence,
    ChatMessageSender,
    ContentPart,
    ContentPartTable,
    ContentPartTool,
    ConversationContext,
    DocumentContext,
    FunctionCallRequest,
    FunctionCallResponse,
    FunctionSpec,
    TagContext,
)

text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
ids = st.text("abcdefXYZ0123-_:", min_size=1, max_size=12)
scalars = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | text
json_values = st.recursive(
    scalars | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)
json_objects = st.dictionaries(text, json_values, max_size=3)


def optional(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.none() | strategy


@st.composite
def models(
    draw: st.DrawFn,
    cls: type,
    fixed: dict[str, st.SearchStrategy[Any]] | None = None,
    **fields: st.SearchStrategy[Any],
) -> Any:
    """``cls`` with ``fixed`` and a random subset of ``fields`` set (the rest unset)."""
    chosen = {name: draw(s) for name, s in (fixed or {}).items()}
    chosen.update({name: draw(s) for name, s in fields.items() if draw(st.booleans())})
    return cls(**chosen)


contexts = st.one_of(
    models(
        ConversationContext,
        document_context=optional(
            st.builds(DocumentContext, document_ids=st.lists(ids, max_size=3), retrieval_unit=ids)
        ),
    ),
    models(
        ConversationContext,
        tag_context=optional(st.builds(TagContext, tag_ids=st.lists(ids, max_size=3))),
    ),
)
tools = st.builds(
    ContentPartTool,
    tool_call_id=ids,
    name=ids,
    params=optional(json_objects),
    response=optional(json_objects),
    display_text=optional(text),
    status=optional(st.sampled_from(["running", "completed", "error"])),
)
tables = st.one_of(
    st.builds(ContentPartTable, rows=st.lists(st.dictionaries(ids, text, max_size=2), max_size=2)),
    st.builds(
        ContentPartTable,
        format=st.just("columnar"),
        columns=st.dictionaries(ids, st.lists(text, max_size=2), max_size=2),
    ),
)
parts = st.one_of(
    st.builds(ContentPart, type=st.just("text"), text=text),
    st.builds(ContentPart, type=st.just("tool"), tool=tools),
    st.builds(ContentPart, type=st.just("table"), table=tables),
    st.builds(ContentPart, type=st.just("context"), context=contexts),
)
full_messages = models(
    ChatMessage,
    {"sender": st.sampled_from(list(ChatMessageSender)), "content": text},
    message_id=optional(ids),
    session_id=optional(ids),
    content_parts=optional(st.lists(parts, max_size=3)),
    image_uri=optional(text),
    function_call_request=optional(
        st.builds(FunctionCallRequest, name=ids, params=optional(json_objects))
    ),
    function_call_response=optional(
        st.builds(FunctionCallResponse, name=ids, result=optional(text))
    ),
    evidences=optional(
        st.lists(
            st.builds(
                ChatMessageEvidence,
                document_hit_url=text,
                text_extract=optional(text),
                anchor_text=optional(text),
            ),
            max_size=2,
        )
    ),
    function_specs=optional(
        st.builds(FunctionSpec, name=ids, description=text, parameters=json_objects)
    ),
    reasoning_summary=optional(text),
)


TENANT = "acme"
secrets = st.text("abcdefghijklmnopqrstuvwxyz0123456789", min_size=24, max_size=40)
future = st.integers(120, 10**6).map(lambda s: datetime.now(UTC) + timedelta(seconds=s))


@st.composite
def user_records(draw: st.DrawFn, user: str, server: str) -> MCPUserIntegrationRecord:
    """A record with a live pending authorization and/or tokens (relative expiry)."""
    pending = None
    if draw(st.booleans()):
        pending = MCPOAuthPendingAuthorization(
            state=f"{user}-{server}-{draw(secrets)}",  # unique per flow, as the SDK mints it
            tenant=TENANT,
            server_name=server,
            user_uuid=user,
            auth_url=draw(text),
            code_verifier=draw(secrets),
            token_endpoint=draw(text),
            redirect_uri=draw(text),
            expires_at=draw(future),
            resource=draw(optional(text)),
        )
    tokens = None
    if pending is None or draw(st.booleans()):
        extra = {}
        for name, strategy in (
            ("expires_in", optional(st.integers(60, 10**7))),
            ("scope", optional(text)),
            ("refresh_token", optional(secrets)),
        ):
            if draw(st.booleans()):
                extra[name] = draw(strategy)
        tokens = OAuthToken(access_token=draw(secrets), **extra)
    return MCPUserIntegrationRecord(TENANT, user, server, pending=pending, tokens=tokens)


client_infos = st.builds(
    lambda cid, secret, uris: MCPOAuthClientInfoRecord(
        TENANT,
        "srv",
        OAuthClientInformationFull(client_id=cid, client_secret=secret, redirect_uris=uris),
    ),
    ids,
    secrets,
    st.lists(
        st.sampled_from(["https://a.example/cb", "http://127.0.0.1:9/cb"]), min_size=1, max_size=2
    ),
)
