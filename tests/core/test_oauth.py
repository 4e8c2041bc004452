"""OAuthVault against the in-memory repository: expiry, flow rules, encryption."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
import warnings
from collections.abc import AsyncIterator
from dataclasses import asdict, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agentstores import oauth as oauth_mod
from agentstores.errors import ExpiredError, NotFoundError, UsageError
from agentstores.memory.stores import EphemeralStoreWarning, MemoryStores
from agentstores.models import ClientInfo, PendingAuthorization, UserIntegration
from agentstores.oauth import (
    ENVELOPE,
    OAuthSecretError,
    OAuthVault,
    PlaintextSecretsWarning,
    generate_key,
    keys_from_env,
)

TOKENS = {"access_token": "at-SECRET-1", "refresh_token": "rt-SECRET-2", "expires_in": 3600}
VERIFIER = "verifier-SECRET-3"
CLIENT = {"client_id": "cid", "client_secret": "cs-SECRET-4"}


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2030, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def stores(clock: Clock) -> AsyncIterator[MemoryStores]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EphemeralStoreWarning)
        s = MemoryStores(f"memory://oauth-{uuid.uuid4().hex}", clock=clock)
        async with s:
            yield s


@pytest.fixture
def key() -> str:
    return generate_key()


@pytest.fixture
def store(stores: MemoryStores, key: str) -> OAuthVault:
    return OAuthVault.from_stores(stores, keys=[key])


def pending(clock: Clock, state: str = "state-1", ttl: float = 600) -> PendingAuthorization:
    return PendingAuthorization(
        state=state,
        auth_url="https://auth.example/authorize?state=" + state,
        code_verifier=VERIFIER,
        token_endpoint="https://auth.example/token",
        redirect_uri="https://app.example/mcp/oauth/callback",
        expires_at=clock.now + timedelta(seconds=ttl),
    )


def raw_text(record: Any) -> str:
    return json.dumps(asdict(record), default=str)


async def test_flow_round_trip_and_state_lookup(store: OAuthVault, clock: Clock) -> None:
    await store.start_authorization("t", "alice", "github", pending(clock))
    found = await store.find_by_pending_state("state-1")
    assert found is not None and found.user == "alice" and found.server_name == "github"
    assert found.pending is not None and found.pending.code_verifier == VERIFIER
    done = await store.complete_authorization("state-1")
    assert done.pending is not None and done.pending.code_verifier == VERIFIER
    await store.save_tokens("t", "alice", "github", TOKENS)
    got = await store.get_user_integration("t", "alice", "github")
    assert got is not None and got.pending is None and dict(got.tokens or {}) == TOKENS
    assert await store.find_by_pending_state("state-1") is None
    with pytest.raises(NotFoundError):
        await store.complete_authorization("state-1")


async def test_secrets_are_encrypted_at_rest(
    store: OAuthVault, stores: MemoryStores, clock: Clock
) -> None:
    await store.start_authorization("t", "alice", "github", pending(clock))
    raw = await stores.oauth.get_user_integration("t", "alice", "github")
    assert raw is not None and raw.pending is not None
    assert VERIFIER not in raw_text(raw)
    assert raw.pending.code_verifier.startswith(ENVELOPE + ":")
    assert raw.pending.state == "state-1"  # lookup by state needs it in clear
    await store.save_tokens("t", "alice", "github", TOKENS)
    raw = await stores.oauth.get_user_integration("t", "alice", "github")
    assert raw is not None and raw.tokens is not None
    assert "SECRET" not in raw_text(raw)
    assert list(raw.tokens) == [ENVELOPE] and isinstance(raw.tokens[ENVELOPE], str)
    json.dumps(dict(raw.tokens))  # JSON-safe for any repository
    await store.save_client_info(ClientInfo("t", "github", CLIENT))
    raw_client = await stores.oauth.get_client_info("t", "github")
    assert raw_client is not None and "SECRET" not in raw_text(raw_client)
    client = await store.get_client_info("t", "github")
    assert client is not None and dict(client.client_info) == CLIENT
    assert [dict(c.client_info) for c in await store.list_client_info("t")] == [CLIENT]


async def test_pending_expires_on_store_clock_and_is_cleaned_up(
    store: OAuthVault, stores: MemoryStores, clock: Clock
) -> None:
    await store.start_authorization("t", "alice", "github", pending(clock, ttl=60))
    clock.now += timedelta(seconds=59)
    assert await store.find_by_pending_state("state-1") is not None
    clock.now += timedelta(seconds=1)  # expires_at <= now: expired
    assert await store.get_user_integration("t", "alice", "github") is None
    assert await stores.oauth.get_user_integration("t", "alice", "github") is None
    assert await store.find_by_pending_state("state-1") is None


async def test_expired_pending_keeps_existing_tokens(
    store: OAuthVault, stores: MemoryStores, clock: Clock
) -> None:
    await store.save_tokens("t", "alice", "github", TOKENS)
    await store.start_authorization("t", "alice", "github", pending(clock, ttl=10))
    during = await store.get_user_integration("t", "alice", "github")
    assert during is not None and during.pending is not None
    assert dict(during.tokens or {}) == TOKENS  # re-authorizing keeps working tokens
    clock.now += timedelta(seconds=11)
    with pytest.raises(ExpiredError):
        await store.complete_authorization("state-1")
    raw = await stores.oauth.get_user_integration("t", "alice", "github")
    assert raw is not None and raw.pending is None and raw.tokens is not None
    listed = await store.list_user_integrations("t", "alice")
    assert [(r.server_name, r.pending, dict(r.tokens or {})) for r in listed] == [
        ("github", None, TOKENS)
    ]


async def test_expiry_cleanup_does_not_wipe_a_newer_pending(
    store: OAuthVault, stores: MemoryStores, clock: Clock
) -> None:
    old = await stores.oauth.get_user_integration("t", "alice", "github")
    assert old is None
    await store.start_authorization("t", "alice", "github", pending(clock, "old", ttl=1))
    stale = await stores.oauth.get_user_integration("t", "alice", "github")
    assert stale is not None
    await store.start_authorization("t", "alice", "github", pending(clock, "new", ttl=600))
    clock.now += timedelta(seconds=5)
    await store._expire(stale)  # a reader that saw the old pending cleans up late
    assert await store.find_by_pending_state("new") is not None


async def test_list_hides_expired_and_keeps_live(store: OAuthVault, clock: Clock) -> None:
    await store.start_authorization("t", "alice", "a", pending(clock, "s-a", ttl=5))
    await store.start_authorization("t", "alice", "b", pending(clock, "s-b", ttl=500))
    await store.save_tokens("t", "alice", "c", TOKENS)
    clock.now += timedelta(seconds=6)
    names = [r.server_name for r in await store.list_user_integrations("t", "alice")]
    assert names == ["b", "c"]


async def test_key_rotation(stores: MemoryStores, clock: Clock) -> None:
    old, new = generate_key(), generate_key()
    await OAuthVault.from_stores(stores, keys=[old]).save_tokens("t", "alice", "github", TOKENS)
    await OAuthVault.from_stores(stores, keys=[old]).save_client_info(
        ClientInfo("t", "github", CLIENT)
    )
    rotated = OAuthVault.from_stores(stores, keys=[new, old])
    got = await rotated.get_user_integration("t", "alice", "github")
    assert got is not None and dict(got.tokens or {}) == TOKENS
    assert await rotated.rotate_user_integrations("t", "alice") == 1
    assert await rotated.rotate_client_info("t") == 1
    only_new = OAuthVault.from_stores(stores, keys=[new])
    got = await only_new.get_user_integration("t", "alice", "github")
    assert got is not None and dict(got.tokens or {}) == TOKENS
    client = await only_new.get_client_info("t", "github")
    assert client is not None and dict(client.client_info) == CLIENT
    with pytest.raises(OAuthSecretError):
        await OAuthVault.from_stores(stores, keys=[old]).get_user_integration(
            "t", "alice", "github"
        )


async def test_wrong_key_and_moved_ciphertext_are_refused(
    store: OAuthVault, stores: MemoryStores
) -> None:
    await store.save_tokens("t", "alice", "github", TOKENS)
    raw = await stores.oauth.get_user_integration("t", "alice", "github")
    assert raw is not None
    await stores.oauth.save_user_integration(replace(raw, user="mallory"))
    with pytest.raises(OAuthSecretError):
        await store.get_user_integration("t", "mallory", "github")
    other = OAuthVault.from_stores(stores, keys=[generate_key()])
    with pytest.raises(OAuthSecretError):
        await other.get_user_integration("t", "alice", "github")


async def test_plaintext_reader_refuses_encrypted_records(
    store: OAuthVault, stores: MemoryStores
) -> None:
    await store.save_tokens("t", "alice", "github", TOKENS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PlaintextSecretsWarning)
        plain = OAuthVault.from_stores(stores, allow_plaintext=True)
    with pytest.raises(OAuthSecretError):
        await plain.get_user_integration("t", "alice", "github")


async def test_plaintext_written_before_keys_is_read_then_encrypted_on_save(
    store: OAuthVault, stores: MemoryStores
) -> None:
    await stores.oauth.save_user_integration(UserIntegration("t", "bob", "s", tokens=TOKENS))
    got = await store.get_user_integration("t", "bob", "s")
    assert got is not None and dict(got.tokens or {}) == TOKENS
    assert await store.rotate_user_integrations("t", "bob") == 1
    raw = await stores.oauth.get_user_integration("t", "bob", "s")
    assert raw is not None and "SECRET" not in raw_text(raw)


def test_construction_needs_keys_or_explicit_plaintext(stores: MemoryStores) -> None:
    with pytest.raises(UsageError):
        OAuthVault.from_stores(stores)
    with pytest.raises(UsageError):
        OAuthVault.from_stores(stores, keys=["not a fernet key"])
    with pytest.raises(UsageError):
        OAuthVault.from_stores(stores, keys=generate_key())


async def test_plaintext_opt_in_stores_clear_values(
    stores: MemoryStores, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(oauth_mod, "_plaintext_warned", False)
    with pytest.warns(PlaintextSecretsWarning):
        plain = OAuthVault.from_stores(stores, allow_plaintext=True)
    assert not plain.encrypted
    await plain.start_authorization("t", "alice", "github", pending(clock))
    raw = await stores.oauth.get_user_integration("t", "alice", "github")
    assert raw is not None and raw.pending is not None
    assert raw.pending.code_verifier == VERIFIER
    found = await plain.find_by_pending_state("state-1")
    assert found is not None and found.pending == raw.pending


def test_plaintext_warning_is_once_per_process() -> None:
    code = """
import warnings
from agentstores.memory.stores import MemoryStores
from agentstores.oauth import OAuthVault, PlaintextSecretsWarning
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    for _ in range(3):
        OAuthVault.from_stores(MemoryStores("memory://w"), allow_plaintext=True)
print(sum(issubclass(w.category, PlaintextSecretsWarning) for w in seen))
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "1"
    assert out.stderr.count("PLAINTEXT") == 1  # the log line, also only once


async def test_naive_expiry_is_refused(store: OAuthVault, clock: Clock) -> None:
    naive = replace(pending(clock), expires_at=datetime(2030, 1, 1))
    with pytest.raises(UsageError):
        await store.start_authorization("t", "alice", "github", naive)


def test_keys_from_env() -> None:
    assert keys_from_env({}) == []
    assert keys_from_env({oauth_mod.KEYS_ENV: " k1, k2 ,"}) == ["k1", "k2"]
