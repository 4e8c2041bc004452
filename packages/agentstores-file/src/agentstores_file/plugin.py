"""Registers the ``file://`` backend. Imports only core's plugin module: cheap to discover."""

from __future__ import annotations

from agentstores.capabilities import Capability
from agentstores.plugins import BackendInfo, hookimpl

BACKEND = BackendInfo(
    name="file",
    schemes=("file",),
    factory="agentstores_file.stores:FileStores",
    capabilities=frozenset(
        {Capability.MULTI_PROCESS, Capability.DURABLE, Capability.SETTABLE_CLOCK}
    ),
    distribution="agentstores-file",
    description=(
        "Local files, the embedded default (file:///abs/path or file://./relative). "
        "Safe for any number of processes on one machine (flock); not across NFS hosts."
    ),
    durability=(
        "every acknowledged write is fsynced and renamed into place with the directory "
        "fsynced: it survives a killed process and, with fsync=True (the default), a "
        "power loss on a filesystem that honours fsync"
    ),
)
"""The one declaration of this backend; its ``Stores`` class reads its capabilities here."""


@hookimpl
def agentstores_backends() -> list[BackendInfo]:
    return [BACKEND]
