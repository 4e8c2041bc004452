"""Conversation keys and the one injective codec every backend uses for storage names.

Backends never concatenate raw ids. They use :func:`encode_component` (an escaping
that keeps only ``[A-Za-z0-9_-]`` and writes every other byte as ``%XX``), the
:attr:`ConversationKey.storage_name` built from it, or :attr:`ConversationKey.digest`
(a fixed-length SHA-256 name for places with short length limits, such as file names).
The escape character is itself escaped and the separator never survives encoding, so
distinct keys always give distinct names, and no name can contain ``/``, ``.``, ``{``,
``}`` or ``:``.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from .errors import InvalidKeyError

MAX_ID_BYTES = 256
"""The largest tenant, session, principal, message or token id accepted, in UTF-8 bytes."""

_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_ALL_SAFE = re.compile(r"[A-Za-z0-9_-]*")
"""An id every character of which ``encode_component`` keeps as it is."""


def validate_id(value: object, what: str, *, allow_empty: bool = False) -> str:
    """Return ``value`` if it is an acceptable id, else raise :class:`InvalidKeyError`."""
    if not isinstance(value, str):
        raise InvalidKeyError(f"{what} must be a str, got {type(value).__name__}", field=what)
    if not value and not allow_empty:
        raise InvalidKeyError(f"{what} must not be empty", field=what)
    if "\x00" in value:
        raise InvalidKeyError(f"{what} must not contain NUL", field=what)
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidKeyError(f"{what} is not valid unicode", field=what) from exc
    if size > MAX_ID_BYTES:
        raise InvalidKeyError(f"{what} is {size} bytes; the limit is {MAX_ID_BYTES}", field=what)
    return value


def validate_principal(value: object) -> str:
    """A principal is a user id; ``""`` stands for "no user"."""
    return validate_id(value, "principal", allow_empty=True)


def encode_component(value: str) -> str:
    """Injective, storage-safe encoding of one id (output alphabet ``[A-Za-z0-9_%-]``)."""
    if value.isascii() and _ALL_SAFE.fullmatch(value):
        return value  # nothing to escape (uuids, slugs): the common case, without a loop
    out: list[str] = []
    for byte in value.encode("utf-8"):
        out.append(chr(byte) if byte in _SAFE else f"%{byte:02X}")
    return "".join(out)


def decode_component(encoded: str) -> str:
    """Inverse of :func:`encode_component`."""
    raw = bytearray()
    i = 0
    while i < len(encoded):
        ch = encoded[i]
        if ch == "%":
            raw.append(int(encoded[i + 1 : i + 3], 16))
            i += 3
        else:
            raw.append(ord(ch))
            i += 1
    return raw.decode("utf-8")


@dataclass(frozen=True, slots=True)
class ConversationKey:
    """A conversation's address in every store: ``(tenant, session_id)``."""

    tenant: str
    session_id: str

    def __post_init__(self) -> None:
        validate_id(self.tenant, "tenant")
        validate_id(self.session_id, "session_id")

    @property
    def storage_name(self) -> str:
        """``<tenant>:<session>``, both encoded; unique per key and free of ``/ . { }``."""
        return f"{encode_component(self.tenant)}:{encode_component(self.session_id)}"

    @property
    def digest(self) -> str:
        """64 hex chars of SHA-256 over the storage name: fixed length, same injectivity."""
        return hashlib.sha256(self.storage_name.encode("ascii")).hexdigest()

    @classmethod
    def from_storage_name(cls, name: str) -> ConversationKey:
        """The key whose :attr:`storage_name` is ``name`` (for adapters reading names back)."""
        tenant, _, session = name.partition(":")
        return cls(decode_component(tenant), decode_component(session))


def tenant_prefix(tenant: str) -> str:
    """The storage-name prefix shared by every key of one tenant."""
    return encode_component(validate_id(tenant, "tenant")) + ":"
