"""Commands are packed by hiredis's C encoder when it is installed, else in Python; both
must give redis-py's bytes, and what redis-py refuses (a bool) is refused the same way."""

from __future__ import annotations

import pytest
from redis.connection import Encoder
from redis.exceptions import DataError

from agentstores_redis.client import _pack, _pack_python

COMMANDS: list[tuple[object, ...]] = [
    ("EVALSHA", "a" * 40, 2, "as:{t:c}:h", "as:{t:c}:sv", "nonce", "p", "1", "running"),
    ("SET", b"k\x00\xff", "é✓", -3, 0, 10**20, 1.5, 0.1, -2.5e-7, ""),
    ("PING",),
]


def _redis_py(cmd: tuple[object, ...]) -> bytes:
    from redis.connection import PythonRespSerializer

    serializer = PythonRespSerializer(6000, Encoder("utf-8", "strict", False).encode)
    return b"".join(serializer.pack(*cmd))


@pytest.mark.parametrize("pack", [_pack, _pack_python])
def test_packing_matches_redis_py(pack: object) -> None:
    assert callable(pack)
    for cmd in COMMANDS:
        assert pack([cmd]) == _redis_py(cmd), cmd
    assert pack(COMMANDS) == b"".join(_redis_py(c) for c in COMMANDS)
    assert pack([list(COMMANDS[0])]) == _redis_py(COMMANDS[0])


class _Text(str):
    pass


@pytest.mark.parametrize("pack", [_pack, _pack_python])
def test_a_bool_is_refused_and_subclasses_encode(pack: object) -> None:
    assert callable(pack)
    with pytest.raises(DataError):
        pack([("SET", "k", True)])
    assert pack([("SET", _Text("k"), "v")]) == _redis_py(("SET", "k", "v"))


def test_hiredis_is_the_packer_here() -> None:
    from agentstores_redis import client

    assert client._pack_command is not None, "tests-redis installs the hiredis extra"
