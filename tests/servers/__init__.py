"""Test-server harnesses: each starts a real server from a package on a free loopback port."""
