"""Deliberately broken variants of the S3 backend, each breaking one promise.

``BlindPutStores`` commits the key header with a plain PUT: it reads the header and its
ETag like the real backend, decides the same way, but writes without ``If-Match`` /
``If-None-Match``. Two writers that read the same version both "win": a compare-and-swap
raced by many clients has several winners, and one of two appends can vanish.
"""

from __future__ import annotations

from agentstores.keys import ConversationKey
from agentstores.stores import kit
from agentstores_s3.header import Head, Root, dumps
from agentstores_s3.stores import S3Stores


class BlindPutRoot(Root):
    """Writes the header unconditionally: the read-decide-write is no longer atomic."""

    def commit(self, key: ConversationKey, head: Head, etag: str | None) -> bool:
        head["w"] = kit.writer_nonce_hex()
        self.io.put(self.key_dir(key) + "h", dumps(head))
        return True


class BlindPutStores(S3Stores):
    """BROKEN: the S3 backend writing its commit point without a precondition."""

    root_class = BlindPutRoot


MUTANTS = {"blind_put": "tests.catalogue.s3_mutants:BlindPutStores"}
"""Broken promise -> factory spec (``module:callable`` taking a URL)."""
