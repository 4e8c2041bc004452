"""The SDK's MCPOAuthRepository on agentstores' OAuth repository, encrypted at rest.

Records go through :class:`agentstores.oauth.OAuthVault`, so tokens, the
PKCE verifier and client info are sealed with the configured Fernet keys (``state``
stays in clear: the callback looks records up by it). The SDK's tokens carry a
*relative* expiry (``expires_in`` seconds); it is stored as an absolute instant on the
store's clock and read back as the seconds left on that clock (rounded up, never
below 0), so a token read straight after saving equals the one saved and one read
later says how long it really has left.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any

from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from zav.agents_sdk.adapters.mcp import (
    MCPOAuthClientInfoRecord,
    MCPOAuthPendingAuthorization,
    MCPOAuthRepository,
    MCPUserIntegrationRecord,
)

from agentstores import ClientInfo, PendingAuthorization, UsageError, UserIntegration
from agentstores.oauth import OAuthVault

from .bundle import Bundle

TOKEN = "token"
EXPIRES_AT = "expires_at"


def tokens_to_json(tokens: OAuthToken, now: datetime) -> dict[str, Any]:
    """``tokens`` with its relative expiry fixed to an instant on the store's clock."""
    data: dict[str, Any] = {TOKEN: tokens.model_dump(mode="json", exclude_unset=True)}
    if tokens.expires_in is not None:
        data[EXPIRES_AT] = (now + timedelta(seconds=tokens.expires_in)).isoformat()
    return data


def tokens_from_json(data: Any, now: datetime) -> OAuthToken:
    """Inverse of :func:`tokens_to_json`: ``expires_in`` is what is left at ``now``."""
    fields = dict(data[TOKEN])
    if data.get(EXPIRES_AT) is not None:
        left = (datetime.fromisoformat(data[EXPIRES_AT]) - now).total_seconds()
        fields["expires_in"] = max(math.ceil(left), 0)
    return OAuthToken.model_validate(fields)


def pending_to_core(
    record: MCPUserIntegrationRecord, pending: MCPOAuthPendingAuthorization
) -> PendingAuthorization:
    """The pending authorization; its tenant, user and server are the record's."""
    if (pending.tenant, pending.user_uuid, pending.server_name) != (
        record.tenant,
        record.user_uuid,
        record.server_name,
    ):
        raise UsageError("a pending authorization must belong to the record that holds it")
    return PendingAuthorization(
        state=pending.state,
        auth_url=pending.auth_url,
        code_verifier=pending.code_verifier,
        token_endpoint=pending.token_endpoint,
        redirect_uri=pending.redirect_uri,
        expires_at=pending.expires_at,
        resource=pending.resource,
    )


def pending_from_core(record: UserIntegration) -> MCPOAuthPendingAuthorization | None:
    """Inverse of :func:`pending_to_core`."""
    p = record.pending
    if p is None:
        return None
    return MCPOAuthPendingAuthorization(
        state=p.state,
        tenant=record.tenant,
        server_name=record.server_name,
        user_uuid=record.user,
        auth_url=p.auth_url,
        code_verifier=p.code_verifier,
        token_endpoint=p.token_endpoint,
        redirect_uri=p.redirect_uri,
        expires_at=p.expires_at,
        resource=p.resource,
    )


class AgentStoresMCPOAuthRepository(MCPOAuthRepository):
    """Plain CRUD, as the SDK's wrapper (``MCPOAuthIntegrationStore``) expects.

    Pass Fernet ``keys`` (the first encrypts) or ``allow_plaintext=True``; with neither,
    construction fails, as in core.
    """

    def __init__(
        self,
        bundle: Bundle,
        *,
        keys: list[str] | None = None,
        allow_plaintext: bool = False,
    ) -> None:
        self._bundle = bundle
        if not keys and not allow_plaintext:
            raise UsageError("MCP OAuth records need encryption keys or allow_plaintext=True")
        self._keys = list(keys or [])
        self._allow_plaintext = allow_plaintext
        self._store: OAuthVault | None = None

    async def _integrations(self) -> tuple[OAuthVault, datetime]:
        stores = await self._bundle.stores()
        if self._store is None:
            self._store = OAuthVault.from_stores(
                stores, keys=self._keys or None, allow_plaintext=self._allow_plaintext
            )
        return self._store, await stores.now()

    def _to_sdk(self, record: UserIntegration, now: datetime) -> MCPUserIntegrationRecord:
        return MCPUserIntegrationRecord(
            tenant=record.tenant,
            user_uuid=record.user,
            server_name=record.server_name,
            pending=pending_from_core(record),
            tokens=None if record.tokens is None else tokens_from_json(record.tokens, now),
        )

    async def list_user_integrations(
        self, tenant: str, user_uuid: str, server_names: list[str]
    ) -> list[MCPUserIntegrationRecord]:
        store, now = await self._integrations()
        records = await store.list_user_integrations(tenant, user_uuid, list(server_names))
        return [self._to_sdk(r, now) for r in records]

    async def get_user_integration(
        self, tenant: str, user_uuid: str, server_name: str
    ) -> MCPUserIntegrationRecord | None:
        store, now = await self._integrations()
        record = await store.get_user_integration(tenant, user_uuid, server_name)
        return None if record is None else self._to_sdk(record, now)

    async def find_user_integration_by_pending_state(
        self, state: str
    ) -> MCPUserIntegrationRecord | None:
        store, now = await self._integrations()
        record = await store.find_by_pending_state(state)
        return None if record is None else self._to_sdk(record, now)

    async def save_user_integration(self, record: MCPUserIntegrationRecord) -> None:
        store, now = await self._integrations()
        await store.save_user_integration(
            UserIntegration(
                tenant=record.tenant,
                user=record.user_uuid,
                server_name=record.server_name,
                pending=None if record.pending is None else pending_to_core(record, record.pending),
                tokens=None if record.tokens is None else tokens_to_json(record.tokens, now),
            )
        )

    async def delete_user_integration(self, tenant: str, user_uuid: str, server_name: str) -> bool:
        store, _ = await self._integrations()
        return await store.delete_user_integration(tenant, user_uuid, server_name)

    async def list_client_info(
        self, tenant: str, server_names: list[str]
    ) -> list[MCPOAuthClientInfoRecord]:
        store, _ = await self._integrations()
        records = await store.list_client_info(tenant, list(server_names))
        return [_client_to_sdk(r) for r in records]

    async def get_client_info(
        self, tenant: str, server_name: str
    ) -> MCPOAuthClientInfoRecord | None:
        store, _ = await self._integrations()
        record = await store.get_client_info(tenant, server_name)
        return None if record is None else _client_to_sdk(record)

    async def save_client_info(self, record: MCPOAuthClientInfoRecord) -> None:
        store, _ = await self._integrations()
        info = record.client_info.model_dump(mode="json", exclude_unset=True)
        await store.save_client_info(ClientInfo(record.tenant, record.server_name, info))


def _client_to_sdk(record: ClientInfo) -> MCPOAuthClientInfoRecord:
    return MCPOAuthClientInfoRecord(
        tenant=record.tenant,
        server_name=record.server_name,
        client_info=OAuthClientInformationFull.model_validate(dict(record.client_info)),
    )


__all__ = ["AgentStoresMCPOAuthRepository", "tokens_from_json", "tokens_to_json"]
