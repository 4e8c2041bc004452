"""PauseTokenStore: single-use continuation tokens."""

from __future__ import annotations

from datetime import timedelta

from agentstores.errors import AlreadyClaimedError, ConflictError, NotFoundError
from agentstores.stores import Stores

from .backend import BackendUnderTest
from .base import ContractBase
from .machines import PauseTokenMachine, run_machine
from .promises import promise
from .scenarios import raises


class PauseTokenContract(ContractBase):
    @promise("pause_tokens.model")
    def test_pause_token_model(self, backend: BackendUnderTest) -> None:
        run_machine(backend, PauseTokenMachine, self.profile.hypothesis())

    @promise("pause_tokens.scoping")
    def test_tokens_are_scoped_and_single_use(self, backend: BackendUnderTest) -> None:
        key, other = self.key("a:b"), self.key("a")

        async def body(stores: Stores) -> None:
            tokens = stores.pause_tokens
            later = await stores.now() + timedelta(hours=1)
            await tokens.put("tok", key, "p", {"resume": [1, 2]}, later)
            await raises(
                ConflictError, tokens.put("tok", key, "p", 1, later), "a duplicate token id"
            )
            await tokens.put("tok", other, "p", "other key", later)
            await raises(NotFoundError, tokens.claim("nope", key, "p"), "an unknown token")
            await raises(NotFoundError, tokens.claim("tok", key, "q"), "another principal's token")
            await raises(
                NotFoundError, tokens.claim("tok", self.key("a:b"), "p"), "the same id, another key"
            )
            assert await tokens.claim("tok", key, "p") == {"resume": [1, 2]}
            await raises(AlreadyClaimedError, tokens.claim("tok", key, "p"), "a second claim")
            assert await tokens.claim("tok", other, "p") == "other key", "tokens are per key"
            await tokens.put("dropped", key, "p", None, later)
            await tokens.abandon("dropped", key, "p")
            await raises(
                AlreadyClaimedError, tokens.claim("dropped", key, "p"), "an abandoned token"
            )
            await tokens.abandon("tok", key, "p")
            await raises(AlreadyClaimedError, tokens.claim("tok", key, "p"), "abandon after claim")
            await raises(
                NotFoundError, tokens.abandon("nope", key, "p"), "abandoning an unknown token"
            )
            await raises(NotFoundError, tokens.abandon("dropped", key, "q"), "another principal")

        self.run(backend, body)
