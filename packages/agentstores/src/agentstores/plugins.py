"""Backend discovery through entry points (group ``agentstores``) and pluggy hooks.

An adapter distribution declares exactly one entry point in the ``agentstores`` group;
its value is a small module with a :data:`hookimpl` named ``agentstores_backends`` that
returns :class:`BackendInfo` records. Discovery imports only those small modules, never
a driver: the factory is a lazy ``"module:callable"`` path imported when a URL names it.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import logging
import os
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import pluggy

from .capabilities import Capability, capability_set
from .errors import UsageError

if TYPE_CHECKING:
    from .stores import Stores

PROJECT = "agentstores"
ENTRY_POINT_GROUP = "agentstores"
DISABLE_ENV = "AGENTSTORES_DISABLE_PLUGINS"
"""Comma-separated entry-point names to skip, or ``all`` to load none (builtins stay)."""

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class BackendInfo:
    """What a plugin says about one backend, without importing its driver.

    ``factory`` is ``"module:callable"``; the callable takes ``(url: str, **options)``
    and returns an unopened :class:`~agentstores.stores.Stores`.
    """

    name: str
    schemes: tuple[str, ...]
    factory: str
    capabilities: frozenset[Capability] = frozenset()
    distribution: str | None = None
    description: str = ""
    durability: str = ""
    schema_installer: str | None = None
    """Optional ``"module:callable"``: ``async (url, *, schema, runtime_role) -> str`` run by
    ``agentstores schema install``; returns a human summary of what it did."""

    def __post_init__(self) -> None:
        # Names become Capability members here, so a typo is refused at discovery.
        object.__setattr__(self, "capabilities", capability_set(self.capabilities))


@dataclass(frozen=True, slots=True)
class PluginFailure:
    """A plugin that could not be loaded, and why."""

    entry_point: str
    error: str


class HookSpecs:
    """The hooks a plugin may implement: backends, and ``agentstores`` subcommands."""

    @hookspec
    def agentstores_backends(self) -> list[BackendInfo]:  # type: ignore[empty-body]
        """Return the backends this plugin provides."""

    @hookspec
    def agentstores_register_commands(self, subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
        """Add ``agentstores`` subcommands: ``subparsers.add_parser(name, ...)`` each, with
        ``set_defaults(run=callable)`` taking the parsed arguments and returning the exit
        code. Tooling distributions (``agentstores-tools``: ``bench`` and ``drill``) plug in
        here, so core carries none of their code."""


@dataclass
class Registry:
    """Loaded plugins, their backends by scheme, and the plugins that failed."""

    manager: pluggy.PluginManager
    backends: dict[str, BackendInfo] = field(default_factory=dict)
    failures: list[PluginFailure] = field(default_factory=list)

    def by_scheme(self, scheme: str) -> BackendInfo | None:
        """The backend that handles URL scheme ``scheme``, or None."""
        for info in self.backends.values():
            if scheme in info.schemes:
                return info
        return None


_lock = threading.Lock()
_registry: Registry | None = None


def _disabled() -> set[str] | None:
    raw = os.environ.get(DISABLE_ENV, "").strip()
    if not raw:
        return set()
    if raw.lower() in {"1", "all", "true", "yes"}:
        return None
    return {part.strip() for part in raw.split(",") if part.strip()}


def build_registry() -> Registry:
    """Load builtins, then each entry point one at a time; a broken one is recorded."""
    manager = pluggy.PluginManager(PROJECT)
    manager.add_hookspecs(HookSpecs)
    from .memory import plugin as memory_plugin

    manager.register(memory_plugin, name="memory")
    registry = Registry(manager=manager)
    disabled = _disabled()
    if disabled is not None:
        for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            if ep.name in disabled or manager.has_plugin(ep.name):
                continue
            try:
                module = ep.load()
                manager.register(module, name=ep.name)
                manager.check_pending()
            except Exception as exc:  # a broken plugin must not break the others
                if manager.has_plugin(ep.name):
                    manager.unregister(name=ep.name)
                registry.failures.append(PluginFailure(ep.name, f"{type(exc).__name__}: {exc}"))
                log.warning("agentstores plugin %r failed to load: %s", ep.name, exc)
    for impl in manager.hook.agentstores_backends.get_hookimpls():
        try:
            infos = cast(list[BackendInfo], impl.function())
            for info in infos:
                if not isinstance(info, BackendInfo):
                    raise TypeError(f"expected BackendInfo, got {type(info).__name__}")
                registry.backends[info.name] = info
        except Exception as exc:
            registry.failures.append(
                PluginFailure(impl.plugin_name, f"{type(exc).__name__}: {exc}")
            )
            log.warning("agentstores plugin %r failed: %s", impl.plugin_name, exc)
    return registry


def get_registry(*, refresh: bool = False) -> Registry:
    """The process's plugin registry, built on first use (and again with ``refresh``)."""
    global _registry
    with _lock:
        if _registry is None or refresh:
            _registry = build_registry()
        return _registry


def load_factory(info: BackendInfo) -> Any:
    """Import the callable ``info.factory`` names."""
    module_name, _, attr = info.factory.partition(":")
    module = importlib.import_module(module_name)
    return getattr(module, attr)


def scheme_of(url: str) -> str:
    """The lower-cased scheme of a backend URL (``postgresql`` for ``postgresql://...``).

    Raises:
        UsageError: ``url`` has no ``scheme://``.
    """
    if not isinstance(url, str) or "://" not in url:
        raise UsageError(
            f"a backend URL looks like scheme://... (e.g. postgresql://user@host/db, "
            f"file://./.agentstores, memory://), got {url!r}"
        )
    return url.split("://", 1)[0].lower()


DISTRIBUTIONS: dict[str, str] = {
    "file": "agentstores-file",
    "postgresql": "agentstores-postgres",
    "postgres": "agentstores-postgres",
    **{
        f"{base}{tls}{cluster}": "agentstores-redis"
        for base in ("redis", "valkey")
        for tls in ("", "s")
        for cluster in ("", "+cluster")
    },
    "mongodb": "agentstores-mongo",
    "mongodb+srv": "agentstores-mongo",
    "s3": "agentstores-s3",
}
"""The distribution that provides each well-known scheme, named when it is not installed."""


def unknown_scheme(scheme: str, registry: Registry) -> str:
    """The message for a URL whose scheme no installed backend handles: the distribution
    to install when the scheme is a known one, the schemes there are, and the plugins
    that failed to load (the backend may be among them)."""
    known = ", ".join(sorted(s for b in registry.backends.values() for s in b.schemes))
    message = f"no installed backend handles {scheme}:// (installed: {known})"
    distribution = DISTRIBUTIONS.get(scheme)
    if distribution is not None:
        message += f"; install it with: pip install {distribution}"
    else:
        message += (
            f"; a third-party adapter for {scheme}:// registers it in the "
            f"{ENTRY_POINT_GROUP!r} entry-point group once installed"
        )
    failed = [f.entry_point for f in registry.failures]
    if failed:
        message += f"; plugins that failed to load: {', '.join(failed)}"
    return message


def create_stores(url: str, **options: Any) -> Stores:
    """An unopened bundle for ``url``; imports only the backend the scheme names.

    Raises:
        UsageError: no installed backend handles the URL's scheme (or it has none).
    """
    scheme = scheme_of(url)
    registry = get_registry()
    info = registry.by_scheme(scheme)
    if info is None:
        raise UsageError(unknown_scheme(scheme, registry), scheme=scheme)
    factory = load_factory(info)
    stores: Stores = factory(url, **options)
    return stores
