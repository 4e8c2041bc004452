"""The catalogue's MongoDB mutant (a supervision CAS that upserts on the key alone) is
killed by the contract suite, which names the promise it breaks; the real adapter passes
the same promises in the same run."""

from __future__ import annotations

import asyncio

import pytest

from agentstores_contract import BackendUnderTest, validate
from agentstores_mongo.stores import MongoStores
from tests.catalogue.mongo_mutants import UpsertCasStores
from tests.servers.mongo import Installation

PROMISES = ["supervision.cas*"]

pytestmark = pytest.mark.timeout(600)


def _backend(factory: type[MongoStores], url: str) -> BackendUnderTest:
    return BackendUnderTest(
        open=lambda: factory(url),
        url=None,
        open_with=lambda **more: factory(url, **more),
        capabilities=MongoStores.capabilities,
        name="mongo",
    )


async def test_the_upserting_cas_is_killed_and_the_adapter_is_not(
    installed: Installation,
) -> None:
    mutant = await asyncio.to_thread(
        validate, _backend(UpsertCasStores, installed.url), promises=PROMISES
    )
    failed = {r.name for r in mutant.failed}
    assert "supervision.cas.race" in failed, f"the upserting CAS survived: {mutant.failed}"
    control = await asyncio.to_thread(
        validate, _backend(MongoStores, installed.url), promises=PROMISES
    )
    assert control.ok, control.failed
    assert control.passed
