"""The OpenAI Agents SDK's own session tests, run against the bridge.

They ship in the SDK's sdist only. :func:`suite_modules` fetches the sdist at the version
``uv.lock`` pins (its URL and sha256 from there; the hash is checked), keeps it in a
cache directory, extracts the store-generic session test modules and imports them as the
package ``oa_sdk_tests``, changed in two ways only: ``from tests.`` (the SDK repository's
test package) reads ``from oa_sdk_tests.``, and ``SQLiteSession``, the store each module
constructs, is :class:`SuiteSession`: the bridge on the backend the test runs on.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import os
import sys
import tarfile
import tempfile
import time
import tomllib
import urllib.request
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any

from agents.memory.session_settings import SessionSettings

from agentstores import Stores
from agentstores_openai_agents import AgentStoresSession

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "oa_sdk_tests"
MODULES = (
    "memory/test_session.py",
    "memory/test_session_limit.py",
    "extensions/memory/test_encrypt_session.py",
)
"""The SDK's store-generic session test modules: each constructs ``SQLiteSession`` as the
store it runs on (``test_encrypt_session`` wraps it in ``EncryptedSession``)."""
HELPERS = ("test_responses.py",)
"""What they import from the SDK's test package."""
CACHE_ENV = "AGENTSTORES_SDK_CACHE"
"""A directory to keep the sdist in (default: the system's temp directory)."""


def locked_sdist(distribution: str = "openai-agents") -> tuple[str, str, str]:
    """``(version, url, sha256)`` of ``distribution``'s sdist as ``uv.lock`` pins it."""
    lock = tomllib.loads((ROOT / "uv.lock").read_text(encoding="utf-8"))
    for package in lock["package"]:
        if package["name"] == distribution and "sdist" in package:
            sdist = package["sdist"]
            algorithm, _, digest = sdist["hash"].partition(":")
            assert algorithm == "sha256", sdist
            return package["version"], sdist["url"], digest
    raise LookupError(f"uv.lock pins no sdist of {distribution}")


def fetch(url: str, sha256: str, cache: Path) -> Path:
    """The file at ``url`` in ``cache`` (downloaded once, its hash checked each time)."""
    cache.mkdir(parents=True, exist_ok=True)
    target = cache / url.rsplit("/", 1)[-1]
    if target.exists() and _sha256(target) == sha256:
        return target
    for attempt in range(4):
        partial = target.with_name(f"{target.name}.{uuid.uuid4().hex}.part")
        try:
            with urllib.request.urlopen(url, timeout=60) as reply, partial.open("wb") as out:
                while chunk := reply.read(1 << 20):
                    out.write(chunk)
            found = _sha256(partial)
            if found != sha256:
                raise ValueError(f"{url}: sha256 {found}, uv.lock says {sha256}")
            os.replace(partial, target)
            return target
        except OSError:
            if attempt == 3:
                raise
            time.sleep(2**attempt)
        finally:
            with contextlib.suppress(FileNotFoundError):
                partial.unlink()
    raise AssertionError("unreachable")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


SUBSTITUTE = """

# --- agentstores: the store this module constructs is the bridge ---
from tests.openai_agents.sdk_suite import SuiteSession as SQLiteSession  # noqa: E402
"""


def extract(archive: Path, version: str, into: Path) -> Path:
    """The modules and helpers, rewritten, as the package ``oa_sdk_tests`` under ``into``."""
    root = into / f"suite-{version}-{uuid.uuid4().hex[:8]}"
    package = root / PACKAGE
    prefix = f"openai_agents-{version}/tests/"
    with tarfile.open(archive, "r:gz") as tar:
        for name in (*HELPERS, *MODULES):
            member = tar.extractfile(prefix + name)
            assert member is not None, name
            source = member.read().decode("utf-8").replace("from tests.", f"from {PACKAGE}.")
            if name in MODULES:
                source += SUBSTITUTE
            path = package / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(source, encoding="utf-8")
    for directory in (package, *(p for p in package.rglob("*") if p.is_dir())):
        (directory / "__init__.py").touch()
    return root


_MODULES: list[ModuleType] = []


def suite_modules() -> list[ModuleType]:
    """The SDK's session test modules, imported once (see the module docstring)."""
    if not _MODULES:
        _MODULES.extend(_import_suite())
    return _MODULES


def _import_suite() -> list[ModuleType]:
    version, url, sha256 = locked_sdist()
    cache = Path(os.environ.get(CACHE_ENV) or tempfile.gettempdir()) / "agentstores-sdk-sdists"
    archive = fetch(url, sha256, cache)
    root = extract(archive, version, Path(tempfile.mkdtemp(prefix="agentstores-sdk-tests-")))
    sys.path.insert(0, str(root))
    try:
        return [
            importlib.import_module(f"{PACKAGE}.{name[:-3].replace('/', '.')}") for name in MODULES
        ]
    finally:
        sys.path.remove(str(root))


SQLITE_CONNECTIONS = "SQLite's per-thread connections and their cleanup on close"
SQLITE_FILE_LOCK = "the process-wide lock SQLiteSession shares between instances of one file"
SQLITE_CORRUPT_ROWS = (
    "writes malformed JSON into the SQLite table with sqlite3 to test skipping it; the bridge "
    "stores JSON values, never unparsed text"
)
SQLITE_CLOSED = "SQLiteSession.close() makes later calls fail; the bridge holds no resources"
SQLITE_ROLLBACK = (
    "makes SQLite's own transaction fail (a held write lock, a failing rollback or commit) with "
    "sqlite3; a store call's failure is the adapter's, tested by the contract suite"
)
LOOP_BLOCKED = (
    "waits on a thread pool inside the test's coroutine, blocking the event loop that owns "
    "the stores, while ten threads each write through the session from a loop of their own: "
    "the bridge runs such a call on the loop that owns the stores' connections (as any store "
    "whose connections belong to one loop must), which is blocked, so the threads wait forever"
)
NO_STORE = (
    "constructs no store of the module's own (no session, SessionSettings alone, a mock, or "
    "the SDK's SQLAlchemySession or RedisSession): nothing of the bridge runs in it"
)
SQLITE_POP_AUTH = (
    "EncryptedSession authenticates a popped item before removing it only over a native "
    "SQLiteSession (its private _pop_item_with_validation; some of these also read the table "
    "with sqlite3); over any other store, the SDK's own included, it documents that pop removes "
    "an item it cannot read"
)
COMPACTION_SNAPSHOT = (
    "expects the compaction input a store with the private _get_compaction_snapshot gives "
    "(a bounded tail); the bridge has none, so compaction sees the whole history"
)
AWAIT_MUTATION = "tests the SDK's private _await_mutation helper, which no store is involved in"

NOT_APPLICABLE = {
    "test_await_mutation_cancellation_hides_later_failure_without_loop_error": AWAIT_MUTATION,
    "test_sqlite_session_close_closes_worker_thread_connections": SQLITE_CONNECTIONS,
    "test_sqlite_session_reaps_connections_from_exited_worker_threads": SQLITE_CONNECTIONS,
    "test_sqlite_session_closes_retired_connections_before_the_next_allocation": SQLITE_CONNECTIONS,
    "test_sqlite_session_keeps_connections_of_live_worker_threads": SQLITE_CONNECTIONS,
    "test_sqlite_session_closed_rejects_empty_add_items": SQLITE_CLOSED,
    "test_sqlite_session_pop_item_skips_corrupt_most_recent": SQLITE_CORRUPT_ROWS,
    "test_sqlite_session_pop_item_returns_none_after_dropping_only_corrupt_rows": (
        SQLITE_CORRUPT_ROWS
    ),
    "test_sqlite_session_get_items_limit_skips_corrupt_newest_rows": SQLITE_CORRUPT_ROWS,
    "test_sqlite_session_get_items_session_settings_limit_skips_corrupt_rows": SQLITE_CORRUPT_ROWS,
    "test_sqlite_session_file_lock_is_shared_across_instances": SQLITE_FILE_LOCK,
    "test_sqlite_session_concurrent_access": LOOP_BLOCKED,
    "test_session_memory_disabled_parametrized": NO_STORE,
    "test_session_settings_resolve": NO_STORE,
    "test_encrypt_session__session_settings_resolve": NO_STORE,
    "test_encrypt_session__encrypted_session_delegation": NO_STORE,
    "test_encrypt_session__encrypted_session_forwards_wrapper_to_all_underlying_operations": (
        NO_STORE
    ),
    "test_encrypt_session__encrypted_pop_preserves_sqlalchemy_history": NO_STORE,
    "test_encrypt_session__encrypted_session_scan_budget_does_not_turn_redis_negative_limit_into_history": NO_STORE,  # noqa: E501
    "test_encrypt_session__encrypted_pop_wrong_key_preserves_recoverable_history": SQLITE_POP_AUTH,
    "test_encrypt_session__encrypted_pop_rechecks_authentication_after_expired_tail": (
        SQLITE_POP_AUTH
    ),
    "test_encrypt_session__encrypted_pop_authentication_is_atomic_with_concurrent_mutations": (
        SQLITE_POP_AUTH
    ),
    "test_encrypt_session__encrypted_pop_wrong_key_preserves_row_identity": SQLITE_POP_AUTH,
    "test_encrypt_session__encrypted_pop_cancellation_waits_for_authentication_rollback": (
        SQLITE_POP_AUTH
    ),
    "test_encrypt_session__encrypted_compaction_skips_unencrypted_stored_history": (
        COMPACTION_SNAPSHOT
    ),
    "test_sqlite_session_failed_add_items_releases_write_lock": SQLITE_ROLLBACK,
    "test_sqlite_session_failed_clear_session_rolls_back": SQLITE_ROLLBACK,
    "test_sqlite_session_failed_pop_item_releases_write_lock": SQLITE_ROLLBACK,
    "test_sqlite_session_rollback_failure_evicts_connection": SQLITE_ROLLBACK,
    "test_sqlite_session_close_retries_quarantined_connection": SQLITE_ROLLBACK,
    "test_sqlite_session_post_commit_cancellation_propagates_after_known_outcome": SQLITE_ROLLBACK,
}
"""The SDK tests that examine SQLite itself, by name, and why they cannot apply."""


def _tests() -> dict[str, Any]:
    """Every test of the modules, by the name it runs under: its own, except in
    ``test_encrypt_session`` (whose names repeat some of ``test_session``'s), where it is
    prefixed ``test_encrypt_session__``."""
    found: dict[str, Any] = {}
    for module in suite_modules():
        prefix = "test_encrypt_session__" if module.__name__.endswith("encrypt_session") else ""
        for name, test in vars(module).items():
            if name.startswith("test_") and callable(test):
                exposed = f"{prefix}{name[5:]}" if prefix else name
                assert exposed not in found, f"two SDK tests named {exposed}"
                found[exposed] = test
    return found


def applicable_tests() -> dict[str, Any]:
    """The SDK's tests to run, by name (every test of the modules not in NOT_APPLICABLE)."""
    return {name: test for name, test in _tests().items() if name not in NOT_APPLICABLE}


def all_test_names() -> set[str]:
    return set(_tests())


def fixtures() -> dict[str, Any]:
    """The fixtures the modules define, by name (the tests' module namespace holds them)."""
    from _pytest.fixtures import FixtureFunctionDefinition

    found: dict[str, Any] = {}
    for module in suite_modules():
        for name, value in vars(module).items():
            if isinstance(value, FixtureFunctionDefinition):
                assert found.get(name, value) is value, f"two SDK fixtures named {name}"
                found[name] = value
    return found


class Backend:
    """The stores the current test runs on (set by the suite's fixture)."""

    stores: Stores | None = None
    tenant = "suite"


class SuiteSession(AgentStoresSession):
    """``SQLiteSession``'s constructor, building the bridge on the test's backend.

    A database file is a tenant of its own (sessions of one file share it, as they share
    the file); each ``:memory:`` session gets a fresh one, as each gets a fresh database.
    """

    def __init__(
        self,
        session_id: str,
        db_path: str | Path = ":memory:",
        sessions_table: str = "agent_sessions",
        messages_table: str = "agent_messages",
        session_settings: SessionSettings | dict[str, Any] | None = None,
    ) -> None:
        assert Backend.stores is not None, "the suite's fixture sets the backend"
        if str(db_path) == ":memory:":
            place = uuid.uuid4().hex
        else:
            place = f"{Path(db_path).resolve()}|{sessions_table}|{messages_table}"
        tenant = f"{Backend.tenant}-{hashlib.sha256(place.encode()).hexdigest()[:16]}"
        super().__init__(
            session_id,
            Backend.stores,
            tenant=tenant,
            principal="sdk-suite",
            session_settings=session_settings,
        )

    def close(self) -> None:
        """``SQLiteSession.close``: nothing to release (the stores belong to the test)."""


__all__ = [
    "NOT_APPLICABLE",
    "Backend",
    "SuiteSession",
    "all_test_names",
    "applicable_tests",
    "extract",
    "fetch",
    "fixtures",
    "locked_sdist",
    "suite_modules",
]
