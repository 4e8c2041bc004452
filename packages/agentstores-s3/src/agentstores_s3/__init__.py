"""agentstores on S3-compatible object storage (``s3://bucket/prefix``), boto3 only.

Names load lazily so that plugin discovery (``agentstores_s3.plugin``) imports nothing
but core's plugin module (never boto3).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .client import RequestStats
    from .stores import S3Stores

__all__ = ["RequestStats", "S3Stores"]


def __getattr__(name: str) -> Any:
    if name == "S3Stores":
        from .stores import S3Stores

        return S3Stores
    if name == "RequestStats":
        from .client import RequestStats

        return RequestStats
    raise AttributeError(name)
