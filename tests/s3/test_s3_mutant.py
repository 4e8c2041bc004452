"""The suite kills the S3 backend's own broken variant (tests/catalogue/s3_mutants.py):
the header committed by a plain PUT, without ``If-Match``, on the correct
(single-threaded) moto server. The suite's CAS race must see several winners."""

from __future__ import annotations

import pytest

from agentstores_contract import BackendUnderTest
from agentstores_contract.concurrency import ConcurrencyContract
from tests.catalogue.s3_mutants import BlindPutStores
from tests.servers.moto import MotoServer

from .conftest import BUCKET, purge, with_prefix


def test_the_suite_kills_a_cas_without_if_match(moto_server: MotoServer) -> None:
    url = with_prefix(moto_server.url(BUCKET))
    backend = BackendUnderTest(
        open=lambda: BlindPutStores(url),
        open_with=lambda **options: BlindPutStores(url, **options),
        name="s3 blind_put mutant",
    )
    try:
        with pytest.raises(AssertionError, match=r"CAS calls expecting|not the winner's"):
            ConcurrencyContract().test_cas_has_one_winner(backend)
    finally:
        purge(url)
