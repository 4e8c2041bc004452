"""OAuthVault: the OAuth flow rules and encryption at rest, over any backend's OAuth store.

Adapters implement :class:`~agentstores.stores.OAuthStore` as plain last-write-wins
CRUD. This wrapper adds what every deployment needs on top:

- **Pending authorizations expire on read.** A pending authorization whose
  ``expires_at`` has passed on the *store's* clock (the ``now`` callable, e.g.
  ``Stores.now``) is treated as gone: reads never return it, and it is cleaned up (the
  record is saved without it, or deleted when it holds no tokens either).
- **Tokens landing clear the pending entry** (:meth:`save_tokens`).
- **Secrets are encrypted at rest** when keys are configured: ``tokens``,
  ``pending.code_verifier`` and ``client_info`` go through ``cryptography``'s
  ``MultiFernet`` (the first key encrypts, every key decrypts, so keys rotate by
  prepending a new one and re-saving). The ciphertext is bound to its record
  (tenant, user, server, field), so a value copied into another record does not decrypt.
  Encrypted values are JSON-safe strings, so any store keeps them as it stores
  plaintext, and ``state`` stays in clear so lookup by state keeps working. Values
  written before keys were configured are read as they are and encrypted when next saved.
- **Plaintext needs an explicit opt-in** (``allow_plaintext=True``) and warns once per
  process.

``cryptography`` is the optional extra ``agentstores[crypto]``, imported only when keys
are given.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import warnings
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .errors import ExpiredError, NotFoundError, OAuthSecretError, UsageError
from .models import JSON, ClientInfo, PendingAuthorization, UserIntegration
from .stores.oauth import OAuthStore, check_client_info, check_user_integration

if TYPE_CHECKING:
    from .stores import Stores

log = logging.getLogger(__name__)

KEYS_ENV = "AGENTSTORES_OAUTH_KEYS"
"""Comma-separated Fernet keys for :func:`keys_from_env`, newest (encrypting) first."""

ENVELOPE = "agentstores:fernet:v1"
"""Marks an encrypted value: the key of a one-entry mapping, or a ``<ENVELOPE>:`` prefix."""

Now = Callable[[], Awaitable[datetime]]


class PlaintextSecretsWarning(UserWarning):
    """OAuth secrets are being stored unencrypted (explicitly allowed)."""


_plaintext_warned = False


def _warn_plaintext() -> None:
    global _plaintext_warned
    if _plaintext_warned:
        return
    _plaintext_warned = True
    text = (
        "agentstores OAuthVault stores OAuth tokens, PKCE verifiers and client "
        "secrets in PLAINTEXT (allow_plaintext=True). Configure encryption keys "
        "(agentstores[crypto]) for anything real."
    )
    log.warning(text)
    warnings.warn(text, PlaintextSecretsWarning, stacklevel=3)


def generate_key() -> str:
    """A fresh Fernet key (needs ``agentstores[crypto]``)."""
    fernet = _import_fernet()
    key: bytes = fernet.Fernet.generate_key()
    return key.decode("ascii")


def keys_from_env(environ: Mapping[str, str] | None = None) -> list[str]:
    """The keys in ``$AGENTSTORES_OAUTH_KEYS`` (empty when unset)."""
    raw = (environ if environ is not None else os.environ).get(KEYS_ENV, "")
    return [part.strip() for part in raw.split(",") if part.strip()]


def _import_fernet() -> Any:
    try:
        import cryptography.fernet as fernet
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise UsageError(
            "encrypting OAuth secrets needs the 'cryptography' package: "
            "pip install 'agentstores[crypto]'"
        ) from exc
    return fernet


class _Cipher:
    """MultiFernet over the configured keys; plaintext is JSON bound to its record."""

    def __init__(self, keys: Sequence[str | bytes]) -> None:
        fernet = _import_fernet()
        try:
            self._multi = fernet.MultiFernet([fernet.Fernet(k) for k in keys])
        except (ValueError, TypeError) as exc:
            raise UsageError(f"invalid Fernet key: {exc}") from exc
        self._invalid: type[Exception] = fernet.InvalidToken

    def seal(self, value: JSON, context: list[str]) -> str:
        plain = json.dumps({"c": context, "v": value}, separators=(",", ":"))
        token: bytes = self._multi.encrypt(plain.encode("utf-8"))
        return token.decode("ascii")

    def open(self, token: str, context: list[str]) -> JSON:
        try:
            plain = self._multi.decrypt(token.encode("ascii"))
        except (self._invalid, UnicodeEncodeError) as exc:
            raise OAuthSecretError(
                "cannot decrypt an OAuth secret (no configured key matches)", record=context
            ) from exc
        data = json.loads(plain)
        if data.get("c") != context:
            raise OAuthSecretError("an OAuth secret belongs to another record", record=context)
        return data["v"]


def _is_sealed_mapping(value: object) -> bool:
    return isinstance(value, Mapping) and len(value) == 1 and isinstance(value.get(ENVELOPE), str)


class OAuthVault:
    """Flow rules and encryption over an :class:`OAuthStore` (see the module doc).

    ``now`` is the store's clock (e.g. ``stores.now``). Pass ``keys`` (Fernet keys,
    encrypting key first) or ``allow_plaintext=True``; with neither, construction fails.
    """

    def __init__(
        self,
        store: OAuthStore,
        *,
        now: Now,
        keys: Sequence[str | bytes] | None = None,
        allow_plaintext: bool = False,
    ) -> None:
        if not isinstance(store, OAuthStore):
            raise UsageError("store must be an OAuthStore")
        self.store = store
        self._now = now
        if keys:
            if isinstance(keys, (str, bytes)):
                raise UsageError("keys must be a sequence of keys, not one key")
            self._cipher: _Cipher | None = _Cipher(keys)
        elif allow_plaintext:
            self._cipher = None
            _warn_plaintext()
        else:
            raise UsageError(
                "OAuthVault needs encryption keys (agentstores[crypto]) or an "
                "explicit allow_plaintext=True"
            )

    @classmethod
    def from_stores(
        cls,
        stores: Stores,
        *,
        keys: Sequence[str | bytes] | None = None,
        allow_plaintext: bool = False,
    ) -> OAuthVault:
        """Wrap ``stores.oauth`` with ``stores.now`` as the clock."""
        return cls(stores.oauth, now=stores.now, keys=keys, allow_plaintext=allow_plaintext)

    @property
    def encrypted(self) -> bool:
        """True when secrets are encrypted at rest (keys were given)."""
        return self._cipher is not None

    # --- user integrations --------------------------------------------------------

    async def get_user_integration(
        self, tenant: str, user: str, server_name: str
    ) -> UserIntegration | None:
        """The record, with an expired pending authorization removed (and cleaned up).

        Raises:
            OAuthSecretError: a stored secret does not decrypt with the configured keys.
        """
        record = await self.store.get_user_integration(tenant, user, server_name)
        return await self._live(record, await self._now())

    async def list_user_integrations(
        self, tenant: str, user: str, server_names: Sequence[str] | None = None
    ) -> list[UserIntegration]:
        """The user's records (only ``server_names`` when given), each without an expired pending
        authorization (which is cleaned up).

        Raises:
            OAuthSecretError: a stored secret does not decrypt with the configured keys.
        """
        records = await self.store.list_user_integrations(tenant, user, server_names)
        now = await self._now()
        out = []
        for record in records:
            live = await self._live(record, now)
            if live is not None:
                out.append(live)
        return out

    async def find_by_pending_state(self, state: str) -> UserIntegration | None:
        """The record whose live pending authorization has ``state`` (the callback's lookup).

        Raises:
            OAuthSecretError: a stored secret does not decrypt with the configured keys.
        """
        record = await self.store.find_by_pending_state(state)
        live = await self._live(record, await self._now())
        if live is None or live.pending is None or live.pending.state != state:
            return None
        return live

    async def start_authorization(
        self, tenant: str, user: str, server_name: str, pending: PendingAuthorization
    ) -> UserIntegration:
        """Record an authorization in flight; tokens already granted are kept."""
        if not isinstance(pending, PendingAuthorization):
            raise UsageError("pending must be a PendingAuthorization")
        current = await self.get_user_integration(tenant, user, server_name)
        tokens = current.tokens if current is not None else None
        record = UserIntegration(tenant, user, server_name, pending=pending, tokens=tokens)
        await self.save_user_integration(record)
        return record

    async def complete_authorization(self, state: str) -> UserIntegration:
        """The record for a callback's ``state``, decrypted.

        Raises:
            NotFoundError: no pending authorization has that ``state``.
            ExpiredError: its pending authorization has expired (it is cleaned up).
            OAuthSecretError: a stored secret does not decrypt with the configured keys.
        """
        raw = await self.store.find_by_pending_state(state)
        if raw is None or raw.pending is None or raw.pending.state != state:
            raise NotFoundError("no pending authorization with that state")
        if raw.pending.expires_at <= await self._now():
            await self._expire(raw)
            raise ExpiredError(
                "the pending authorization has expired",
                server_name=raw.server_name,
                expires_at=raw.pending.expires_at,
            )
        return self._decrypt(raw)

    async def save_tokens(
        self, tenant: str, user: str, server_name: str, tokens: Mapping[str, JSON]
    ) -> UserIntegration:
        """Store granted (or refreshed) tokens and clear any pending authorization."""
        if not isinstance(tokens, Mapping):
            raise UsageError("tokens must be a mapping")
        record = UserIntegration(tenant, user, server_name, pending=None, tokens=dict(tokens))
        await self.save_user_integration(record)
        return record

    async def save_user_integration(self, record: UserIntegration) -> None:
        """Plain save (encrypting secrets); the flow methods above are usually what you want."""
        # Checked before encryption: sealed, a bad value would pass the store's check.
        check_user_integration(record)
        await self.store.save_user_integration(self._encrypt(record))

    async def delete_user_integration(self, tenant: str, user: str, server_name: str) -> bool:
        """Delete the record; True if there was one."""
        return await self.store.delete_user_integration(tenant, user, server_name)

    async def rotate_user_integrations(self, tenant: str, user: str) -> int:
        """Re-save every integration of ``user`` under the current encrypting key.

        Raises:
            OAuthSecretError: a stored secret does not decrypt with the configured keys.
        """
        records = await self.store.list_user_integrations(tenant, user)
        for raw in records:
            await self.save_user_integration(self._decrypt(raw))
        return len(records)

    # --- client info --------------------------------------------------------------

    async def get_client_info(self, tenant: str, server_name: str) -> ClientInfo | None:
        """The client registration for ``server_name``, decrypted; None when there is none.

        Raises:
            OAuthSecretError: a stored secret does not decrypt with the configured keys.
        """
        record = await self.store.get_client_info(tenant, server_name)
        return None if record is None else self._decrypt_client(record)

    async def list_client_info(
        self, tenant: str, server_names: Sequence[str] | None = None
    ) -> list[ClientInfo]:
        """The tenant's client registrations (only ``server_names`` when given), decrypted.

        Raises:
            OAuthSecretError: a stored secret does not decrypt with the configured keys.
        """
        records = await self.store.list_client_info(tenant, server_names)
        return [self._decrypt_client(r) for r in records]

    async def save_client_info(self, record: ClientInfo) -> None:
        """Save a client registration (last write wins), encrypting its secrets."""
        check_client_info(record)
        await self.store.save_client_info(self._encrypt_client(record))

    async def rotate_client_info(self, tenant: str) -> int:
        """Re-save every client-info record of ``tenant`` under the current encrypting key.

        Raises:
            OAuthSecretError: a stored secret does not decrypt with the configured keys.
        """
        records = await self.store.list_client_info(tenant)
        for raw in records:
            await self.save_client_info(self._decrypt_client(raw))
        return len(records)

    # --- expiry -------------------------------------------------------------------

    async def _live(self, raw: UserIntegration | None, now: datetime) -> UserIntegration | None:
        """``raw`` decrypted, without an expired pending (cleaned up in the store)."""
        if raw is None:
            return None
        if raw.pending is not None and raw.pending.expires_at <= now:
            await self._expire(raw)
            if raw.tokens is None:
                return None
            raw = dataclasses.replace(raw, pending=None)
        return self._decrypt(raw)

    async def _expire(self, raw: UserIntegration) -> None:
        """Drop ``raw``'s expired pending, unless the record changed since it was read.

        The store is last-write-wins, so this re-reads first to avoid wiping a
        pending authorization or tokens saved in between; a write landing in the short
        window between that re-read and this write can still be lost (the user retries
        the authorization).
        """
        assert raw.pending is not None
        current = await self.store.get_user_integration(raw.tenant, raw.user, raw.server_name)
        if current is None or current.pending is None:
            return
        if current.pending.state != raw.pending.state or current.tokens != raw.tokens:
            return
        if current.tokens is None:
            await self.store.delete_user_integration(raw.tenant, raw.user, raw.server_name)
        else:
            await self.store.save_user_integration(dataclasses.replace(current, pending=None))

    # --- encryption ---------------------------------------------------------------

    @staticmethod
    def _context(record: UserIntegration, field: str) -> list[str]:
        return ["user", record.tenant, record.user, record.server_name, field]

    def _encrypt(self, record: UserIntegration) -> UserIntegration:
        if self._cipher is None:
            return record
        tokens = record.tokens
        if tokens is not None:
            tokens = {ENVELOPE: self._cipher.seal(dict(tokens), self._context(record, "tokens"))}
        pending = record.pending
        if pending is not None:
            sealed = self._cipher.seal(pending.code_verifier, self._context(record, "verifier"))
            pending = dataclasses.replace(pending, code_verifier=f"{ENVELOPE}:{sealed}")
        return dataclasses.replace(record, tokens=tokens, pending=pending)

    def _decrypt(self, record: UserIntegration) -> UserIntegration:
        tokens = record.tokens
        if tokens is not None and _is_sealed_mapping(tokens):
            value = self._cipher_for(record).open(tokens[ENVELOPE], self._context(record, "tokens"))
            tokens = value
        pending = record.pending
        prefix = f"{ENVELOPE}:"
        if pending is not None and pending.code_verifier.startswith(prefix):
            verifier = self._cipher_for(record).open(
                pending.code_verifier[len(prefix) :], self._context(record, "verifier")
            )
            pending = dataclasses.replace(pending, code_verifier=verifier)
        return dataclasses.replace(record, tokens=tokens, pending=pending)

    def _encrypt_client(self, record: ClientInfo) -> ClientInfo:
        if self._cipher is None:
            return record
        context = ["client", record.tenant, record.server_name, "client_info"]
        sealed = self._cipher.seal(dict(record.client_info), context)
        return dataclasses.replace(record, client_info={ENVELOPE: sealed})

    def _decrypt_client(self, record: ClientInfo) -> ClientInfo:
        if not _is_sealed_mapping(record.client_info):
            return record
        context = ["client", record.tenant, record.server_name, "client_info"]
        value = self._cipher_for(record).open(record.client_info[ENVELOPE], context)
        return dataclasses.replace(record, client_info=value)

    def _cipher_for(self, record: UserIntegration | ClientInfo) -> _Cipher:
        if self._cipher is None:
            raise OAuthSecretError(
                "an OAuth secret is stored encrypted but no key is configured",
                tenant=record.tenant,
                server_name=record.server_name,
            )
        return self._cipher


__all__ = [
    "ENVELOPE",
    "KEYS_ENV",
    "OAuthSecretError",
    "OAuthVault",
    "PlaintextSecretsWarning",
    "generate_key",
    "keys_from_env",
]
