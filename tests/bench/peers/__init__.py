"""agentstores beside the session stores users would pick instead, in one process and run.

Every system is driven through its own public API on the same embedded servers (one
PostgreSQL 18, one Valkey 9), each in a database of its own so its storage can be
measured alone. Run it with ``nox -s bench-peers``; ``python -m tests.bench.peers --help``
lists the options. The peers are installed only in that session's environment.
"""
