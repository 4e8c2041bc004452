"""open_stores, the default URL, and the memory backend's one-time loud warning."""

from __future__ import annotations

import uuid
import warnings

import pytest

from agentstores.api import DEFAULT_URL, URL_ENV, default_url, open_stores
from agentstores.errors import UsageError
from agentstores.keys import ConversationKey
from agentstores.memory.stores import EphemeralStoreWarning, MemoryStores
from agentstores.models import SupervisionRow
from agentstores.stores import Stores
from tests.core._support import run_json, run_python


@pytest.fixture(autouse=True)
def _quiet_memory_warning() -> object:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EphemeralStoreWarning)
        yield


async def test_open_stores_opens_and_closes() -> None:
    url = f"memory://api-{uuid.uuid4().hex}"
    async with open_stores(url) as stores:
        assert isinstance(stores, MemoryStores) and stores._opened
        key = ConversationKey("t", "s")
        assert await stores.supervision.compare_and_swap(
            key, "u", None, SupervisionRow("running", "m", 1)
        )
        now = await stores.now()
        assert now.tzinfo is not None
        view = await stores.supervision.read(key, "u")
        assert view.row is not None and view.row.epoch == 1 and view.row.owner == "u"
    assert not stores._opened


async def test_open_stores_closes_on_error() -> None:
    seen: list[Stores] = []
    with pytest.raises(RuntimeError):
        async with open_stores(f"memory://api-{uuid.uuid4().hex}") as stores:
            seen.append(stores)
            raise RuntimeError("boom")
    assert not seen[0]._opened


async def test_open_stores_uses_the_env_url(monkeypatch: pytest.MonkeyPatch) -> None:
    name = f"api-env-{uuid.uuid4().hex}"
    monkeypatch.setenv(URL_ENV, f"memory://{name}")
    async with open_stores() as stores:
        assert isinstance(stores, MemoryStores) and stores.name == name


def test_default_url_is_the_embedded_file_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(URL_ENV, raising=False)
    assert default_url() == DEFAULT_URL and DEFAULT_URL.startswith("file://")
    monkeypatch.setenv(URL_ENV, "memory://x")
    assert default_url() == "memory://x"


async def test_open_stores_unknown_scheme() -> None:
    with pytest.raises(UsageError, match="nosuch"):
        async with open_stores("nosuch://x"):
            pass


def test_memory_backend_warns_loudly_once_per_process() -> None:
    got = run_json(
        """
        import asyncio, json, warnings
        from agentstores.api import open_stores
        async def main():
            for name in ("a", "b", "a"):
                async with open_stores("memory://" + name):
                    pass
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            asyncio.run(main())
        print(json.dumps({
            "warnings": [str(w.message) for w in seen
                         if w.category.__name__ == "EphemeralStoreWarning"],
            "where": [w.filename for w in seen],
        }))
        """
    )
    assert len(got["warnings"]) == 1
    assert "LOST on restart" in got["warnings"][0]
    assert got["where"] == ["<string>"], "the warning names the caller's line, not ours"


def test_the_memory_warning_prints_once_on_stderr() -> None:
    out = run_python(
        """
        import asyncio, logging
        from agentstores.api import open_stores
        logging.basicConfig()
        async def main():
            for name in ("a", "b", "a"):
                async with open_stores("memory://" + name):
                    pass
        asyncio.run(main())
        """
    )
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("IN-MEMORY") == 1, out.stderr
