"""Failover drills: the same recorded workload against each backend configuration
while a fault moves the service to another server, then counted.

- ``workload.py``: the clients (asyncio tasks over several bundles, plus worker
  processes) claiming, heartbeating, appending and saving fenced state on a few
  conversations, every call recorded with its invoke and completion times and outcome.
- ``checks.py``: read back through a fresh bundle and count acknowledged writes lost,
  double winners, fenced writes accepted and unknown outcomes; the supervision history
  goes through the contract suite's linearizability checker.
- ``drills.py``: the registry (:data:`~tests.failover.drills.DRILLS`) and one run.
- ``postgres.py``: PostgreSQL primary + streaming standby, async and sync.
- ``python -m tests.failover``: run drills N times, write the table into
  ``docs/failover.md`` and ``docs/bench/failover.json`` (the ``failover`` nox session).

Adding a backend: write a module here with a function per configuration that returns
an async context manager; it starts the servers and yields a
:class:`~tests.failover.drills.Target` (the URL the clients open, the async ``fault``
that forces the failover and returns ``{"failovers": n, ...}``, a description for the
table), and stops everything on exit. Register each function in ``DRILLS`` as
``"name": "tests.failover.module:function"``, add the backend's groups to the
``failover`` session in noxfile.py, and run ``python -m tests.failover --drills name``.
"""
