"""Registers the ``s3://`` backend. Imports only core's plugin module: cheap to discover."""

from __future__ import annotations

from agentstores.capabilities import Capability
from agentstores.plugins import BackendInfo, hookimpl

BACKEND = BackendInfo(
    name="s3",
    schemes=("s3",),
    factory="agentstores_s3.stores:S3Stores",
    capabilities=frozenset(
        {Capability.MULTI_PROCESS, Capability.DURABLE, Capability.SETTABLE_CLOCK}
    ),
    distribution="agentstores-s3",
    description=(
        "S3-compatible object storage via boto3 (s3://bucket/prefix?region=...&endpoint_url=...); "
        "conditional writes (If-Match / If-None-Match) on one header object per conversation"
    ),
    durability=(
        "what the object store gives an acknowledged PUT (on AWS S3: durable across "
        "facilities once the response arrives); a write whose reply was lost is read back "
        "by its writer nonce, and reported as UnknownOutcomeError when that cannot be done"
    ),
)
"""The one declaration of this backend; its ``Stores`` class reads its capabilities here."""


@hookimpl
def agentstores_backends() -> list[BackendInfo]:
    return [BACKEND]
