"""Value types refuse bad input with typed errors; the error hierarchy keeps its promises."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta, timezone

import pytest

import agentstores
from agentstores import errors
from agentstores.errors import (
    AgentStoresError,
    BusyError,
    FencedError,
    InvalidKeyError,
    UsageError,
)
from agentstores.models import (
    ClientInfo,
    Message,
    PendingAuthorization,
    RecordedEvent,
    SupervisionRow,
    SupervisionView,
    UserIntegration,
)

NOW = datetime(2030, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize("status", ["running", "done", "errored"])
def test_supervision_row_accepts_known_statuses(status: str) -> None:
    row = SupervisionRow(status, "m1", 0)  # type: ignore[arg-type]
    assert row.status == status and row.heartbeat_at is None and row.owner == ""


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"status": "dead", "message_id": "m", "epoch": 1}, UsageError),
        ({"status": "running", "message_id": "m", "epoch": -1}, UsageError),
        ({"status": "running", "message_id": "m", "epoch": True}, UsageError),
        ({"status": "running", "message_id": "m", "epoch": "1"}, UsageError),
        ({"status": "running", "message_id": "m", "epoch": 1.0}, UsageError),
        ({"status": "running", "message_id": "", "epoch": 1}, InvalidKeyError),
        ({"status": "running", "message_id": "a\x00", "epoch": 1}, InvalidKeyError),
    ],
)
def test_supervision_row_refuses(kwargs: dict[str, object], error: type[Exception]) -> None:
    with pytest.raises(error):
        SupervisionRow(**kwargs)  # type: ignore[arg-type]


def test_supervision_view_unpacks_as_row_and_now() -> None:
    row = SupervisionRow("running", "m", 3)
    got_row, got_now = SupervisionView(row, NOW, fence=3)
    assert (got_row, got_now) == (row, NOW)
    assert SupervisionView(None, NOW).fence == 0


@pytest.mark.parametrize(
    ("index", "epoch", "message_id"),
    [(-1, 0, "m"), (0, -1, "m"), (0, False, "m"), ("0", 0, "m"), (0, 0, "")],
)
def test_recorded_event_refuses(index: object, epoch: object, message_id: str) -> None:
    with pytest.raises(UsageError):
        RecordedEvent(index, {"text": "x"}, message_id, epoch)  # type: ignore[arg-type]


def test_message_validates_id_and_role() -> None:
    assert Message("m1", "tool", {"any": ["json"]}).metadata == {}
    with pytest.raises(UsageError, match="unknown role"):
        Message("m1", "robot", "x")  # type: ignore[arg-type]
    with pytest.raises(InvalidKeyError):
        Message("", "user", "x")


def test_oauth_records_have_one_stored_json_form_that_round_trips() -> None:
    """Every adapter stores this form: pinned, so a change breaks stored records loudly."""
    plus_two = timezone(timedelta(hours=2))
    pending = PendingAuthorization(
        "st", "https://a/auth", "verifier", "https://a/token", "https://me/cb",
        datetime(2030, 1, 2, 3, 4, 5, 678901, tzinfo=plus_two), resource="https://a/r",
    )  # fmt: skip
    record = UserIntegration("t", "u", "srv", pending, {"access_token": "x", "n": [1.5]})
    form = record.to_json()
    assert form == {
        "tenant": "t",
        "user": "u",
        "server": "srv",
        "pending": {
            "state": "st",
            "auth_url": "https://a/auth",
            "code_verifier": "verifier",
            "token_endpoint": "https://a/token",
            "redirect_uri": "https://me/cb",
            "expires_at": "2030-01-02T03:04:05.678901+02:00",
            "resource": "https://a/r",
        },
        "tokens": {"access_token": "x", "n": [1.5]},
    }
    back = UserIntegration.from_json(json.loads(json.dumps(form)))
    assert back == record and back.pending is not None
    assert back.pending.expires_at.utcoffset() == timedelta(hours=2)
    bare = UserIntegration("t", "u", "srv")
    assert UserIntegration.from_json(json.loads(json.dumps(bare.to_json()))) == bare
    assert PendingAuthorization.from_json(pending.to_json()) == pending
    info = ClientInfo("t", "srv", {"client_id": "c"})
    assert info.to_json() == {"tenant": "t", "server": "srv", "info": {"client_id": "c"}}
    assert ClientInfo.from_json(json.loads(json.dumps(info.to_json()))) == info


@pytest.mark.parametrize(
    "kwargs",
    [{"metadata": [("a", 1)]}, {"metadata": "ab"}, {"compaction": "yes"}, {"compaction": 1}],
)
def test_message_refuses_what_backends_would_store_differently(kwargs: dict[str, object]) -> None:
    """A compaction flag that is not a bool came back as the caller's object from some
    backends and as True or an error from others; metadata that is no mapping raised a
    TypeError from deep inside the encoder."""
    with pytest.raises(UsageError):
        Message("m1", "user", "x", **kwargs)  # type: ignore[arg-type]


def test_models_are_frozen() -> None:
    row = SupervisionRow("running", "m", 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.epoch = 2  # type: ignore[misc]


# --- errors ---------------------------------------------------------------------------

STDLIB_BASES = {
    "UsageError": ValueError,
    "InvalidKeyError": ValueError,
    "NotFoundError": LookupError,
    "ErasedError": LookupError,
    "UnsupportedError": NotImplementedError,
}


ERROR_CLASSES = [
    name
    for name in errors.__all__
    if isinstance(getattr(errors, name), type) and issubclass(getattr(errors, name), Exception)
]


@pytest.mark.parametrize("name", errors.__all__)
def test_everything_in_errors_is_exported_at_top_level(name: str) -> None:
    assert getattr(agentstores, name) is getattr(errors, name)


@pytest.mark.parametrize("name", ERROR_CLASSES)
def test_every_error_is_an_agentstores_error(name: str) -> None:
    cls = getattr(errors, name)
    if issubclass(cls, Warning):
        return  # the one warning class shares the module, not the hierarchy
    assert issubclass(cls, AgentStoresError)
    if name in STDLIB_BASES:
        assert issubclass(cls, STDLIB_BASES[name])
    # An adapter's `except OSError` (what drivers and the system raise) must never catch
    # one of ours: NotOwnedError and BackendUnavailableError are not Permission/Connection.
    assert not issubclass(cls, OSError)


def test_specific_relations() -> None:
    assert issubclass(errors.InvalidKeyError, errors.UsageError)
    assert issubclass(errors.ErasedError, errors.NotFoundError)
    assert issubclass(errors.UnknownOutcomeError, errors.BackendUnavailableError)
    # Outcomes a caller must tell apart are not subclasses of one another.
    apart = [errors.BusyError, errors.StaleWriteError, errors.FencedError, errors.ConflictError]
    apart += [errors.AlreadyClaimedError, errors.LeaseLostError]
    for a in apart:
        for b in apart:
            assert issubclass(a, b) == (a is b)
    # Contention refusals share a parent ("re-read and decide again"); a fence does not.
    contention = [errors.BusyError, errors.StaleWriteError, errors.ConflictError]
    contention += [errors.AlreadyClaimedError]
    assert all(issubclass(c, errors.ContentionError) for c in contention)
    assert not issubclass(errors.FencedError, errors.ContentionError)
    assert not issubclass(errors.LeaseLostError, errors.ContentionError)
    # A heartbeat that timed out is a lost lease, told apart by its type.
    assert issubclass(errors.HeartbeatTimeoutError, errors.LeaseLostError)


def test_errors_carry_context() -> None:
    fenced = FencedError("late write", epoch=3, fence=5, key="k")
    assert (fenced.epoch, fenced.fence, fenced.context["key"]) == (3, 5, "k")
    assert str(fenced) == "late write"
    busy = BusyError(occupant="turn-7")
    assert busy.occupant == busy.message_id == "turn-7"
    assert str(busy) == "BusyError"  # a default message, never empty
    assert FencedError().epoch is None
