"""The whole contract suite against moto served single-threaded (with ``If-Match``
deletes, and again with conditional tombstones for the sections that delete; the
conversation sections again with ``concurrent_requests=false``), and against
``AGENTSTORES_TEST_S3_URL`` when set. The variants run the ``quick`` profile: what they
change is which requests a call sends, which every example takes; the generated depth is
the main class's."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from agentstores_contract import BackendUnderTest, ContractSuite
from agentstores_contract.concurrency import ConcurrencyContract
from agentstores_contract.conversations import ConversationContract
from agentstores_contract.fencing import FencingContract
from agentstores_contract.lifetimes import LifetimeContract
from agentstores_contract.oauth import OAuthContract
from agentstores_contract.profiles import PROFILES, Profile
from tests.servers.moto import MotoServer

from .conftest import BUCKET, S3_URL_ENV, purge, with_prefix


def fresh_backend(base: str, options: str) -> Iterator[BackendUnderTest]:
    """The backend at a fresh prefix of ``base`` with ``options`` (``&name=value...``),
    purged after the class."""
    url = with_prefix(base) + options
    yield BackendUnderTest.from_url(url)
    purge(url)


class OnMoto:
    """Sections run against the single-threaded moto server, with :attr:`options`."""

    options = ""

    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls, moto_server: MotoServer) -> Iterator[BackendUnderTest]:
        yield from fresh_backend(moto_server.url(BUCKET), cls.options)


class TestMoto(OnMoto, ContractSuite):
    pass


if os.environ.get(S3_URL_ENV):  # collected only when named: no skipped copy otherwise

    class TestRealS3(ContractSuite):
        @pytest.fixture(scope="class")
        @classmethod
        def backend(cls, real_s3_base: str) -> Iterator[BackendUnderTest]:
            yield from fresh_backend(real_s3_base, "")


class Variant(OnMoto):
    """A configuration variant: the ``quick`` profile (see the module's docstring)."""

    @property
    def profile(self) -> Profile:
        return PROFILES["quick"]


class TestMotoTombstoneDeletes(Variant, OAuthContract, LifetimeContract):
    """``conditional_delete=false`` (for stores that ignore ``If-Match`` on delete, such
    as MinIO and Ceph RGW): the sections whose calls take the guarded-delete path, OAuth
    deletes and the reuse of a key after its tombstone lapses, written as conditional
    tombstones."""

    options = "&conditional_delete=false"


class TestMotoBareIfMatch(Variant, ConcurrencyContract, FencingContract):
    """``quoted_if_match=false`` (for stores that compare ``If-Match`` to the bare ETag,
    such as Ceph RGW 16): compare-and-swap races and fencing with every conditional write
    carrying its ETag unquoted (moto takes both forms; ``test_s3_if_match.py`` shows what
    is sent)."""

    options = "&quoted_if_match=false"


class TestMotoOneRequestAtATime(Variant, ConversationContract):
    """``concurrent_requests=false``: the transcript's calls with every request sent
    after the one before (the default sends an append's id checks and copy-out, and a
    read's message GET, with the header's read)."""

    options = "&concurrent_requests=false"
