"""OAuthStore: plain last-write-wins storage of OAuth integrations and client info.

Flow rules (expiring pending authorizations, clearing them when tokens land) and
encryption at rest live in :class:`agentstores.oauth.OAuthVault`, which wraps
this store; adapters stay storage-only.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence

from ..errors import UsageError
from ..keys import validate_id, validate_principal
from ..models import ClientInfo, PendingAuthorization, UserIntegration
from ._base import StoreBase, check_datetime, check_json, check_text


class OAuthStore(StoreBase, ABC):
    """One ``UserIntegration`` per ``(tenant, user, server_name)``; one ``ClientInfo`` per
    ``(tenant, server_name)``. ``find_by_pending_state`` looks up by ``state`` alone,
    across every tenant, user and server. The record's ``user`` is its owner: a user
    only ever reaches its own integrations through the key."""

    async def list_user_integrations(
        self, tenant: str, user: str, server_names: Sequence[str] | None = None
    ) -> list[UserIntegration]:
        """The user's integrations in ``tenant``, sorted by server name (all servers when
        ``server_names`` is None).

        Raises:
            UsageError: a malformed tenant, user or server name.
        """
        validate_id(tenant, "tenant")
        validate_principal(user)
        names = _check_names(server_names)
        async with self.translating_errors("oauth.list_user_integrations"):
            return await self._list_user_integrations(tenant, user, names)

    async def get_user_integration(
        self, tenant: str, user: str, server_name: str
    ) -> UserIntegration | None:
        """The user's integration with ``server_name``, or None.

        Raises:
            UsageError: a malformed tenant, user or server name.
        """
        validate_id(tenant, "tenant")
        validate_principal(user)
        validate_id(server_name, "server_name")
        async with self.translating_errors("oauth.get_user_integration"):
            return await self._get_user_integration(tenant, user, server_name)

    async def find_by_pending_state(self, state: str) -> UserIntegration | None:
        """The integration whose pending authorization has this OAuth ``state``, or None.

        Raises:
            UsageError: a malformed state.
        """
        validate_id(state, "state")
        async with self.translating_errors("oauth.find_by_pending_state"):
            return await self._find_by_pending_state(state)

    async def save_user_integration(self, record: UserIntegration) -> None:
        """Store ``record`` (last write wins).

        Raises:
            UsageError: not a UserIntegration, or a malformed field in it (see
                :func:`check_user_integration`).
        """
        check_user_integration(record)
        async with self.translating_errors("oauth.save_user_integration"):
            await self._save_user_integration(record)

    async def delete_user_integration(self, tenant: str, user: str, server_name: str) -> bool:
        """Remove the user's integration; True if one was removed.

        Raises:
            UsageError: a malformed tenant, user or server name.
        """
        validate_id(tenant, "tenant")
        validate_principal(user)
        validate_id(server_name, "server_name")
        async with self.translating_errors("oauth.delete_user_integration"):
            return await self._delete_user_integration(tenant, user, server_name)

    async def list_client_info(
        self, tenant: str, server_names: Sequence[str] | None = None
    ) -> list[ClientInfo]:
        """The tenant's OAuth client registrations, sorted by server name.

        Raises:
            UsageError: a malformed tenant or server name.
        """
        validate_id(tenant, "tenant")
        names = _check_names(server_names)
        async with self.translating_errors("oauth.list_client_info"):
            return await self._list_client_info(tenant, names)

    async def get_client_info(self, tenant: str, server_name: str) -> ClientInfo | None:
        """The tenant's OAuth client registration for ``server_name``, or None.

        Raises:
            UsageError: a malformed tenant or server name.
        """
        validate_id(tenant, "tenant")
        validate_id(server_name, "server_name")
        async with self.translating_errors("oauth.get_client_info"):
            return await self._get_client_info(tenant, server_name)

    async def save_client_info(self, record: ClientInfo) -> None:
        """Store ``record`` (last write wins).

        Raises:
            UsageError: not a ClientInfo, or a malformed field in it (see
                :func:`check_client_info`).
        """
        check_client_info(record)
        async with self.translating_errors("oauth.save_client_info"):
            await self._save_client_info(record)

    @abstractmethod
    async def _list_user_integrations(
        self, tenant: str, user: str, server_names: list[str] | None
    ) -> list[UserIntegration]:
        """Sorted by ``server_name``; ``None`` means every server."""

    @abstractmethod
    async def _get_user_integration(
        self, tenant: str, user: str, server_name: str
    ) -> UserIntegration | None: ...

    @abstractmethod
    async def _find_by_pending_state(self, state: str) -> UserIntegration | None: ...

    @abstractmethod
    async def _save_user_integration(self, record: UserIntegration) -> None: ...

    @abstractmethod
    async def _delete_user_integration(self, tenant: str, user: str, server_name: str) -> bool: ...

    @abstractmethod
    async def _list_client_info(
        self, tenant: str, server_names: list[str] | None
    ) -> list[ClientInfo]:
        """Sorted by ``server_name``; ``None`` means every server."""

    @abstractmethod
    async def _get_client_info(self, tenant: str, server_name: str) -> ClientInfo | None: ...

    @abstractmethod
    async def _save_client_info(self, record: ClientInfo) -> None: ...


def check_user_integration(record: object) -> UserIntegration:
    """``record`` if every backend can store it as it is; ``UsageError`` otherwise: valid
    ids, text that is valid Unicode, an aware expiry, tokens a JSON mapping (see
    ``encode_json``)."""
    if not isinstance(record, UserIntegration):
        raise UsageError("record must be a UserIntegration")
    validate_id(record.tenant, "tenant")
    validate_principal(record.user)
    validate_id(record.server_name, "server_name")
    pending = record.pending
    if pending is not None:
        if not isinstance(pending, PendingAuthorization):
            raise UsageError("pending must be a PendingAuthorization or None")
        validate_id(pending.state, "state")
        check_text(pending.auth_url, "pending.auth_url")
        check_text(pending.code_verifier, "pending.code_verifier")
        check_text(pending.token_endpoint, "pending.token_endpoint")
        check_text(pending.redirect_uri, "pending.redirect_uri")
        if pending.resource is not None:
            check_text(pending.resource, "pending.resource")
        check_datetime(pending.expires_at, "pending.expires_at")
    if record.tokens is not None:
        if not isinstance(record.tokens, Mapping):
            raise UsageError("tokens must be a mapping or None")
        check_json(dict(record.tokens), "tokens")
    return record


def check_client_info(record: object) -> ClientInfo:
    """``record`` if every backend can store it as it is (valid ids, ``client_info`` a
    JSON mapping); ``UsageError`` otherwise."""
    if not isinstance(record, ClientInfo):
        raise UsageError("record must be a ClientInfo")
    validate_id(record.tenant, "tenant")
    validate_id(record.server_name, "server_name")
    if not isinstance(record.client_info, Mapping):
        raise UsageError("client_info must be a mapping")
    check_json(dict(record.client_info), "client_info")
    return record


def _check_names(server_names: Sequence[str] | None) -> list[str] | None:
    if server_names is None:
        return None
    if isinstance(server_names, str):
        raise UsageError("server_names must be a sequence of str, not a str")
    return [validate_id(n, "server_name") for n in server_names]
