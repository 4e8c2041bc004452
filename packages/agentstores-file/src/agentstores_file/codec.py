"""The JSON encodings of the file backend's files: key headers, record files, message bodies."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from .transcript import corrupt

_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def _make_encode() -> Callable[[Any], str]:
    """``_ENCODER.encode`` without building its C encoder anew on every call (a header is
    encoded on every write, and building it cost as much as the encoding). No cycle
    check: what is encoded here is built by the backend from decoded JSON and checked
    arguments, never cyclic."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return _ENCODER.encode
    chunks = make(
        None, _ENCODER.default, json.encoder.encode_basestring, None, ":", ",", False, False, True
    )

    def encode(value: Any) -> str:
        return "".join(chunks(value, 0))

    return encode


_encode = _make_encode()


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON of a header or record metadata the backend itself built."""
    return _encode(value).encode()


def reencode(value: Any) -> bytes:
    """Canonical JSON of a caller's value read back from a file (NaN refused)."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


def loads(raw: bytes, what: str) -> Any:
    """The value a file holds; a file that does not parse is corrupt, never a bug."""
    try:
        return json.loads(raw.decode())
    except ValueError:
        raise corrupt(f"{what} does not parse") from None


def record(meta: dict[str, Any], body: bytes) -> bytes:
    """A record file (state is raw; recording and tokens use this): one JSON line of
    metadata, then the opaque JSON body."""
    return dumps(meta) + b"\n" + body


def split_record(raw: bytes, what: str) -> tuple[dict[str, Any], bytes]:
    """The ``(metadata, body)`` of a record file :func:`record` wrote."""
    line, sep, body = raw.partition(b"\n")
    if not sep:
        raise corrupt(f"{what} has no body")
    meta = loads(line, what)
    if not isinstance(meta, dict):
        raise corrupt(f"{what} metadata is not an object")
    return meta, body


__all__ = ["dumps", "loads", "record", "reencode", "split_record"]
