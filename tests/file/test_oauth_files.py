"""OAuth records on files: what a delete leaves on disk, and a record found at another
tenant's or user's path (a name digest collision, or a tampered store) is refused, never
returned to the wrong principal."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agentstores.errors import ConflictError
from agentstores.models import ClientInfo, PendingAuthorization, UserIntegration
from agentstores_file.stores import FileStores


def _files(root: Path) -> list[str]:
    """The files under ``root`` (folders and the folders' lock files aside)."""
    return sorted(
        str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and p.name != "lock"
    )


def _entries(root: Path) -> list[str]:
    """Every file and folder under ``root``."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def _swap_record(folder: str, server: str, other: str) -> None:
    """Move ``server``'s record to where ``other``'s belongs."""
    from agentstores_file.oauth import _record_name

    Path(folder, _record_name(server)).rename(Path(folder, _record_name(other)))


def _copy_records(source: str, target: str) -> None:
    for record in Path(source).glob("*.rec"):
        shutil.copy(record, Path(target) / record.name)


def _pending(state: str) -> PendingAuthorization:
    return PendingAuthorization(
        state, "https://a", "v", "https://t", "https://r", datetime(2031, 1, 1, tzinfo=UTC)
    )


async def test_a_deleted_integration_leaves_nothing_behind(tmp_path: Path) -> None:
    """Its record and its pending-state index entry go; deleting what was never saved
    creates nothing (not even the user's folder)."""
    async with FileStores(f"file://{tmp_path / 'store'}", fsync=False) as stores:
        oauth = stores.oauth
        root = Path(stores.root.oauth_root)
        await oauth.save_client_info(ClientInfo("t", "keep", {"id": "c"}))
        before = _entries(root)
        assert not await oauth.delete_user_integration("t", "nobody", "srv")
        assert _entries(root) == before, "a delete of nothing made files or folders"
        before = _files(root)

        await oauth.save_user_integration(UserIntegration("t", "u", "srv", _pending("s1")))
        assert await oauth.find_by_pending_state("s1") is not None
        assert await oauth.delete_user_integration("t", "u", "srv")
        assert await oauth.find_by_pending_state("s1") is None
        assert _files(root) == before, "the deleted integration left files behind"


async def test_a_record_at_another_principals_path_is_refused(tmp_path: Path) -> None:
    """Records live at digests of their names; one found where another tenant's or user's
    record belongs is refused (ConflictError), never served as theirs."""
    async with FileStores(f"file://{tmp_path / 'store'}", fsync=False) as stores:
        oauth = stores.oauth
        await oauth.save_client_info(ClientInfo("a", "srv", {"secret": "a's"}))
        await oauth.save_client_info(ClientInfo("b", "other", {"id": "b's"}))
        _copy_records(stores.oauth._client_dir("a"), stores.oauth._client_dir("b"))
        with pytest.raises(ConflictError):
            await oauth.get_client_info("b", "srv")
        with pytest.raises(ConflictError):
            await oauth.list_client_info("b")

        await oauth.save_user_integration(UserIntegration("a", "u", "srv", tokens={"t": "a's"}))
        await oauth.save_user_integration(UserIntegration("a", "v", "x", tokens={"t": "v's"}))
        _copy_records(stores.oauth._user_dir("a", "u")[1], stores.oauth._user_dir("a", "v")[1])
        with pytest.raises(ConflictError):
            await oauth.get_user_integration("a", "v", "srv")
        with pytest.raises(ConflictError):
            await oauth.list_user_integrations("a", "v")

        # The same principal, another server's record at this server's path.
        await oauth.save_client_info(ClientInfo("c", "one", {"id": "one"}))
        await oauth.save_user_integration(UserIntegration("c", "w", "one", tokens={"t": "one"}))
        _swap_record(stores.oauth._client_dir("c"), "one", "two")
        _swap_record(stores.oauth._user_dir("c", "w")[1], "one", "two")
        with pytest.raises(ConflictError):
            await oauth.get_client_info("c", "two")
        with pytest.raises(ConflictError):
            await oauth.list_client_info("c", ["two"])
        with pytest.raises(ConflictError):
            await oauth.get_user_integration("c", "w", "two")
        with pytest.raises(ConflictError):
            await oauth.list_user_integrations("c", "w", ["two"])
        with pytest.raises(ConflictError):  # nor deleted as the other server's
            await oauth.delete_user_integration("c", "w", "two")


async def test_a_resaved_integration_is_indexed_by_its_current_state_alone(
    tmp_path: Path,
) -> None:
    """Saving an integration again moves its pending-state index entry with it: the old
    state finds nothing and leaves no entry, the same state keeps finding it."""
    async with FileStores(f"file://{tmp_path / 'store'}", fsync=False) as stores:
        oauth = stores.oauth
        pending = Path(stores.root.oauth_root) / "pending"
        await oauth.save_user_integration(UserIntegration("t", "u", "srv", _pending("x")))
        await oauth.save_user_integration(UserIntegration("t", "u", "srv", _pending("x")))
        assert await oauth.find_by_pending_state("x") is not None, "the same state lost it"
        await oauth.save_user_integration(UserIntegration("t", "u", "srv", _pending("y")))
        assert await oauth.find_by_pending_state("x") is None
        assert await oauth.find_by_pending_state("y") is not None
        assert len(_files(pending)) == 1, "the old state's index entry was left behind"
        await oauth.save_user_integration(UserIntegration("t", "u", "srv", tokens={"a": 1}))
        assert await oauth.find_by_pending_state("y") is None
        assert _files(pending) == []
