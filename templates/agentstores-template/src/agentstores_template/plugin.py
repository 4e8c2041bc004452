"""Registers the template backend. Imports nothing but core: no driver at discovery."""

from __future__ import annotations

from agentstores.plugins import BackendInfo, hookimpl

BACKEND = BackendInfo(
    name="template",
    schemes=("template",),
    factory="agentstores_template.stores:TemplateStores",
    # Declare only what the backend really does; the suite skips tests gated on the rest.
    capabilities=frozenset(),
    distribution="agentstores-template",
    description="Skeleton to copy for a new backend; every store method is not implemented.",
    durability="none: nothing is implemented yet",
)
"""The one declaration of this backend; ``TemplateStores`` reads its capabilities here."""


@hookimpl
def agentstores_backends() -> list[BackendInfo]:
    return [BACKEND]
