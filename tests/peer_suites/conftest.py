"""Fixtures for the frameworks' own tests run against the bridges: ``backend`` is each backend."""

from tests.servers.bridges import *  # noqa: F403  (backend, bridge_servers, pg_admin)
