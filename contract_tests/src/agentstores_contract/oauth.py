"""OAuthStore: integrations and client info, lookup by pending state."""

from __future__ import annotations

from datetime import UTC, datetime

from agentstores.models import ClientInfo, PendingAuthorization, UserIntegration
from agentstores.stores import Stores

from .backend import BackendUnderTest
from .base import ContractBase
from .machines import OAuthMachine, run_machine
from .promises import promise
from .strategies import NEAR_COLLISIONS, fresh_tenant


def pending(state: str) -> PendingAuthorization:
    return PendingAuthorization(
        state=state,
        auth_url="https://auth.example/authorize",
        code_verifier="verifier-" + state,
        token_endpoint="https://auth.example/token",
        redirect_uri="http://localhost:8080/callback",
        expires_at=datetime(2099, 1, 1, 12, 30, tzinfo=UTC),
        resource="https://api.example/",
    )


class OAuthContract(ContractBase):
    @promise("oauth.model")
    def test_oauth_model(self, backend: BackendUnderTest) -> None:
        run_machine(backend, OAuthMachine, self.profile.hypothesis())

    @promise("oauth.pending_state")
    def test_find_by_pending_state_across_users(self, backend: BackendUnderTest) -> None:
        tenants = [self.tenant(), self.tenant()]
        states = [fresh_tenant(f"-s{i}") for i in range(4)]

        async def body(stores: Stores) -> None:
            repo = stores.oauth
            records = [
                UserIntegration(tenants[i % 2], f"user{i}", f"srv{i % 3}", pending=pending(s))
                for i, s in enumerate(states)
            ]
            for r in records:
                await repo.save_user_integration(r)
            for r, s in zip(records, states, strict=True):
                assert await repo.find_by_pending_state(s) == r
            assert await repo.find_by_pending_state(fresh_tenant("-unknown")) is None
            done = UserIntegration(
                records[0].tenant,
                records[0].user,
                records[0].server_name,
                tokens={"access_token": "a", "expires_in": 3600},
            )
            await repo.save_user_integration(done)
            assert await repo.find_by_pending_state(states[0]) is None, (
                "a record saved without pending must no longer be found by its old state"
            )
            assert await repo.get_user_integration(done.tenant, done.user, done.server_name) == done
            assert await repo.delete_user_integration(
                records[1].tenant, records[1].user, records[1].server_name
            )
            assert await repo.find_by_pending_state(states[1]) is None
            assert not await repo.delete_user_integration(
                records[1].tenant, records[1].user, records[1].server_name
            )

        self.run(backend, body)

    @promise("oauth.isolation")
    def test_near_colliding_records_stay_apart(self, backend: BackendUnderTest) -> None:
        base = self.tenant()

        async def body(stores: Stores) -> None:
            repo = stores.oauth
            written: list[tuple[UserIntegration, ClientInfo]] = []
            for n, ((t1, s1), (t2, s2)) in enumerate(NEAR_COLLISIONS):
                for i, (suffix, part) in enumerate(((t1, s1), (t2, s2))):
                    tenant = f"{base}-{n}-{suffix}"
                    rec = UserIntegration(tenant, part, part, tokens={"n": n, "i": i})
                    info = ClientInfo(tenant, part, {"n": n, "i": i})
                    await repo.save_user_integration(rec)
                    await repo.save_client_info(info)
                    written.append((rec, info))
            for rec, info in written:
                got = await repo.get_user_integration(rec.tenant, rec.user, rec.server_name)
                assert got == rec, f"{rec} read back as {got}"
                assert await repo.get_client_info(info.tenant, info.server_name) == info
                mine = await repo.list_user_integrations(rec.tenant, rec.user)
                assert mine == [rec], f"listing {rec.tenant!r}/{rec.user!r} gave {mine}"
                same_tenant = sorted(
                    (i for _, i in written if i.tenant == info.tenant), key=lambda i: i.server_name
                )
                assert await repo.list_client_info(info.tenant) == same_tenant

        self.run(backend, body)
