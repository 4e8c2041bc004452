"""OAuth integrations and client info: plain last-write-wins records."""

from __future__ import annotations

from agentstores.models import ClientInfo, UserIntegration
from agentstores.stores import OAuthStore

from ._base import TemplateStoreBase


class TemplateOAuthStore(TemplateStoreBase, OAuthStore):
    """Keeps the rules in :class:`OAuthStore`'s docstring (storage only)."""

    async def _list_user_integrations(
        self, tenant: str, user: str, server_names: list[str] | None
    ) -> list[UserIntegration]:
        raise NotImplementedError(
            "OAuthStore rule: (tenant, user)'s integrations sorted by server_name; None = all"
        )

    async def _get_user_integration(
        self, tenant: str, user: str, server_name: str
    ) -> UserIntegration | None:
        raise NotImplementedError("OAuthStore rule: one record per (tenant, user, server)")

    async def _find_by_pending_state(self, state: str) -> UserIntegration | None:
        raise NotImplementedError(
            "OAuthStore rule: look up by pending.state alone, across every tenant and user"
        )

    async def _save_user_integration(self, record: UserIntegration) -> None:
        raise NotImplementedError(
            "OAuthStore rule: last write wins per (tenant, user, server_name); as JSON, "
            "store record.to_json() and read it back with UserIntegration.from_json"
        )

    async def _delete_user_integration(self, tenant: str, user: str, server_name: str) -> bool:
        raise NotImplementedError("OAuthStore rule: True iff a record was removed")

    async def _list_client_info(
        self, tenant: str, server_names: list[str] | None
    ) -> list[ClientInfo]:
        raise NotImplementedError(
            "OAuthStore rule: tenant's client info sorted by server_name; None = all"
        )

    async def _get_client_info(self, tenant: str, server_name: str) -> ClientInfo | None:
        raise NotImplementedError("OAuthStore rule: one record per (tenant, server)")

    async def _save_client_info(self, record: ClientInfo) -> None:
        raise NotImplementedError(
            "OAuthStore rule: last write wins per (tenant, server); as JSON, store "
            "record.to_json() and read it back with ClientInfo.from_json"
        )
