"""The agentstores contract suite against this backend: ``pytest`` in this folder.

Until the stores are written every promise fails, each naming the method it reached
("not implemented: TemplateStores.now"); ``agentstores check template://`` gives the
same as a table. Point ``URL`` at a server your tests start (or one named in the
environment) once the backend has one.
"""

from __future__ import annotations

import pytest

from agentstores_contract import BackendUnderTest, ContractSuite

URL = "template://"


class TestTemplateContract(ContractSuite):
    """Every area of the contract. To adopt it area by area, subclass the areas instead
    (``SupervisionContract``, ``ConversationContract``, ... from ``agentstores_contract``);
    to ship without a promise, waive it with the reason:
    ``BackendUnderTest.from_url(URL, waive={"supervision.linearizable": "why"})``."""

    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls) -> BackendUnderTest:
        return BackendUnderTest.from_url(URL)
