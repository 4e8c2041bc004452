"""Conversation-level metadata: its limits, the edge check and the one merge rule.

The metadata is a flat map from a name to any JSON value; a write shallow-merges an
update into it, and a name mapped to ``None`` is removed (so ``null`` is never stored).
Adapters keep each value as its canonical JSON encoding (bytes), so every backend
round-trips exactly what ``json.exact`` asks of messages, and measure the map the same
way (:func:`metadata_size`), so the limit cuts at the same byte on every backend.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from ..errors import UsageError
from ..models import JSON
from ._base import encode_json

MAX_CONVERSATION_METADATA_BYTES = 256 * 1024
"""Largest conversation metadata: the sum over its names of the name's UTF-8 length plus
its value's canonical JSON length (see :func:`metadata_size`)."""
MAX_METADATA_NAME_CHARS = 256
"""Longest name in the conversation metadata."""

MetadataUpdate = Mapping[str, bytes | None]
"""A validated update as adapters receive it: name -> canonical JSON bytes, or None to
remove the name."""


def check_metadata_update(updates: object, what: str = "metadata") -> dict[str, bytes | None]:
    """``updates`` (a mapping of names to JSON values, None removing a name) encoded for
    adapters; ``UsageError`` for a non-mapping, a bad name, a value JSON cannot hold, or
    an update bigger than :data:`MAX_CONVERSATION_METADATA_BYTES` on its own."""
    if not isinstance(updates, Mapping):
        raise UsageError(f"{what} must be a mapping of str to JSON, got {type(updates).__name__}")
    encoded: dict[str, bytes | None] = {}
    for name, value in updates.items():
        if (
            not isinstance(name, str)
            or not name
            or "\x00" in name
            or len(name) > MAX_METADATA_NAME_CHARS
        ):
            raise UsageError(
                f"{what} names must be non-empty str without NUL, at most "
                f"{MAX_METADATA_NAME_CHARS} chars, got {name!r}"
            )
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            raise UsageError(f"{what} name {name!r} is not valid Unicode text") from None
        if value is None:
            encoded[name] = None
            continue
        encoded[name] = encode_json(value, f"{what}[{name!r}]", MAX_CONVERSATION_METADATA_BYTES)
    size = sum(len(n.encode("utf-8")) + len(v) for n, v in encoded.items() if v is not None)
    if size > MAX_CONVERSATION_METADATA_BYTES:
        raise UsageError(
            f"{what} is {size} bytes; conversation metadata is limited to "
            f"{MAX_CONVERSATION_METADATA_BYTES}"
        )
    return encoded


def metadata_size(metadata: Mapping[str, bytes]) -> int:
    """The measure the limit applies to: each name's UTF-8 length plus its encoded value's."""
    return sum(len(name.encode("utf-8")) + len(value) for name, value in metadata.items())


def merge_metadata(current: Mapping[str, bytes], updates: MetadataUpdate) -> dict[str, bytes]:
    """``current`` with ``updates`` shallow-merged in (None removes a name).

    Raises:
        UsageError: the merged metadata would be over the limit (nothing is written).
    """
    merged = dict(current)
    for name, value in updates.items():
        if value is None:
            merged.pop(name, None)
        else:
            merged[name] = value
    size = metadata_size(merged)
    if size > MAX_CONVERSATION_METADATA_BYTES:
        raise over_limit(size)
    return merged


def over_limit(size: int | None = None) -> UsageError:
    """The refusal of a write that would grow the metadata past the limit."""
    measured = "" if size is None else f" ({size} bytes)"
    return UsageError(
        f"the conversation metadata would be over {MAX_CONVERSATION_METADATA_BYTES} "
        f"bytes{measured}; remove names (map them to None) to make room"
    )


def decode_metadata(metadata: Mapping[str, bytes | str]) -> dict[str, JSON]:
    """The values a stored metadata map holds, decoded from their canonical JSON."""
    return {name: json.loads(value) for name, value in metadata.items()}


__all__ = [
    "MAX_CONVERSATION_METADATA_BYTES",
    "MAX_METADATA_NAME_CHARS",
    "MetadataUpdate",
    "check_metadata_update",
    "decode_metadata",
    "merge_metadata",
    "metadata_size",
    "over_limit",
]
