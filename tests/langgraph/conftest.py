"""Fixtures for the LangGraph tests: every test that takes ``backend`` runs on each one."""

from tests.servers.bridges import *  # noqa: F403  (backend, bridge_servers, pg_admin)
