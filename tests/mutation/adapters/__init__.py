"""Mutation testing of the real adapters' server-side logic: single-point faults planted in
PostgreSQL's PL/pgSQL, the Redis Lua scripts, MongoDB's update filters and S3's conditional
headers, each run against the adapter's contract suite on a real server (see
docs/mutation-adapters.md)."""
