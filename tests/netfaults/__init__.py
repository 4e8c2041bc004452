"""Network faults between the adapters and their servers, with recorded histories.

- tests/servers/netfault.py: the proxy (delay, lost replies, cuts, blackholes,
  partitions and heals, switched at run time).
- ``schedule.py``: a seeded task cycling those faults while a workload runs.
- ``servers.py``: a private server per networked backend and its URL through a proxy.
- ``settle.py``: how every call of a history ended, judged by a read-back.
- ``run.py``: one run (the workload of tests/failover, through the proxy, under the
  schedule), counted by tests/failover/checks.py and ``settle.py``.
- ``python -m tests.netfaults``: every backend, the table in ``docs/netfaults.md`` and
  ``docs/bench/netfaults.json`` (the ``netfaults`` nox session).

The short CI runs live beside each backend's tests (``tests/<backend>/test_*_netfaults.py``).
"""
