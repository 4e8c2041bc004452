"""agentstores on local files: the embedded default backend (``file://``).

Names load lazily so that plugin discovery (``agentstores_file.plugin``) imports nothing
but core's plugin module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .fsio import FileIO, IOStats
    from .stores import FileStores

__all__ = ["FileIO", "FileStores", "IOStats"]


def __getattr__(name: str) -> Any:
    if name == "FileStores":
        from .stores import FileStores

        return FileStores
    if name in ("FileIO", "IOStats"):
        from . import fsio

        return getattr(fsio, name)
    raise AttributeError(name)
