"""The suite fails a real server that breaks atomicity, not only our mutants: moto's own
threaded server checks ``If-Match`` and writes without holding one lock, so racing
conditional PUTs can both succeed. The suite's CAS race, run against the S3 backend on
that server, must see two winners of one round. The threaded server switches threads
every microsecond and holds each write 3 ms after moto's precondition check
(tests/servers/moto.py), as a loaded host's scheduler may: left to chance, 60 runs of the
race once missed the window on a busy CI machine."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agentstores_contract import BackendUnderTest, profiles
from agentstores_contract.concurrency import ConcurrencyContract
from tests.servers.moto import MotoServer

from .conftest import BUCKET, make_bucket, purge, with_prefix

PROFILE = "ci"
"""The suite's CI profile: 16 racers, 6 rounds per run."""
ATTEMPTS = 20
"""Runs of the suite's CAS race before giving up (with the write pause: caught on the first)."""


@pytest.fixture(scope="module")
def threaded_moto() -> Iterator[MotoServer]:
    with MotoServer(threaded=True) as server:
        make_bucket(server.url(BUCKET))
        yield server


def test_the_suite_catches_double_winners_on_threaded_moto(threaded_moto: MotoServer) -> None:
    url = with_prefix(threaded_moto.url(BUCKET))
    backend = BackendUnderTest.from_url(url)
    contract = ConcurrencyContract()
    caught: AssertionError | None = None
    before = profiles.active().name
    profiles.set_active(PROFILE)
    try:
        for _ in range(ATTEMPTS):
            try:
                contract.test_cas_has_one_winner(backend)
            except AssertionError as exc:
                caught = exc
                break
    finally:
        profiles.set_active(before)
        purge(url)
    assert caught is not None, (
        f"the suite's CAS race passed {ATTEMPTS} times on threaded moto, whose conditional "
        "writes are not atomic: it cannot tell this server from a correct one"
    )
    assert "CAS calls expecting" in str(caught) or "not the winner's" in str(caught), caught


def test_the_same_race_passes_on_single_threaded_moto(moto_server: MotoServer) -> None:
    """The control: the same race, the same adapter, served one request at a time."""
    url = with_prefix(moto_server.url(BUCKET))
    try:
        ConcurrencyContract().test_cas_has_one_winner(BackendUnderTest.from_url(url))
    finally:
        purge(url)
