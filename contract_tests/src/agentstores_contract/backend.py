"""What the suite runs against: a way to get fresh bundles of one backend."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agentstores.capabilities import Capability, capability_set
from agentstores.errors import UsageError
from agentstores.plugins import create_stores
from agentstores.stores import Stores
from agentstores.urls import redact_url

from . import waivers


@dataclass
class BackendUnderTest:
    """One backend as the suite sees it.

    ``open`` returns a fresh, unopened :class:`Stores` bundle; the suite opens and closes
    each one. ``url``, when set, lets other OS processes reach the same data through
    :func:`agentstores.plugins.create_stores`. ``capabilities`` defaults to the bundle's.

    ``open_with(**options)`` returns a fresh, unopened bundle reaching the same data with
    backend options on top, such as ``tombstone_ttl`` (a timedelta) and, where the backend
    declares ``settable_clock``, ``clock``: the suite checks lifetimes with it. The contract
    makes the tombstone TTL configurable, so a backend without ``open_with`` fails those
    tests rather than skipping them.

    ``waive`` maps promise names (those of :data:`~agentstores_contract.PROMISES`) to the
    reason the backend does not keep each: its tests still run and are reported waived,
    never passed; a waiver whose tests all pass fails the run (see :mod:`.waivers`).
    """

    open: Callable[[], Stores]
    url: str | None = None
    capabilities: frozenset[Capability] = None  # type: ignore[assignment]
    name: str = ""
    open_with: Callable[..., Stores] | None = None
    waive: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.waive = waivers.checked(self.waive)
        if self.capabilities is None or not self.name:
            probe = self.open()
            if not isinstance(probe, Stores):
                raise UsageError(f"open() must return a Stores bundle, got {type(probe).__name__}")
            if self.capabilities is None:
                self.capabilities = frozenset(probe.capabilities)
            if not self.name:
                self.name = probe.backend or type(probe).__name__
        self.capabilities = capability_set(self.capabilities)

    @classmethod
    def from_url(
        cls, url: str, *, waive: Mapping[str, str] | None = None, **options: Any
    ) -> BackendUnderTest:
        """The backend a URL names, through the plugin registry; ``options`` go to
        :func:`~agentstores.plugins.create_stores`."""
        return cls(
            open=lambda: create_stores(url, **options),
            url=url if not options else None,
            open_with=lambda **more: create_stores(url, **{**options, **more}),
            waive=waive or {},
        )

    def has(self, capability: Capability | str) -> bool:
        """Whether the backend declares ``capability``; an unknown name is an error."""
        return Capability.parse(capability) in self.capabilities

    def __repr__(self) -> str:
        """Without the URL's secrets (a repr ends up in failure reports)."""
        url = redact_url(self.url) if self.url else None
        return f"BackendUnderTest(name={self.name!r}, url={url!r}, waive={self.waive!r})"

    @property
    def label(self) -> str:
        """The backend as it may be shown: its URL without secrets, else its name."""
        return redact_url(self.url) if self.url else self.name


def load_object(spec: str) -> Any:
    """Import ``"module:attribute"``."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise UsageError(f"expected 'module:callable', got {spec!r}")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


NOT_A_URL = (
    "expected a backend URL (scheme://..., e.g. postgresql://user@host/db or memory://), "
    "got {target!r}; a factory is named on its own, as module:callable "
    "(--factory, --agentstores-factory or validate(factory=...))"
)


def from_factory(spec: str) -> BackendUnderTest:
    """The backend the ``"module:callable"`` ``spec`` names (see :func:`as_backend`).

    Raises:
        UsageError: ``spec`` is not ``module:callable`` (a URL included).
    """
    if not isinstance(spec, str) or "://" in spec:
        raise UsageError(f"expected a factory as module:callable, got {spec!r}")
    return as_backend(load_object(spec))


def as_backend(target: object) -> BackendUnderTest:
    """Accept a BackendUnderTest, a backend URL or a callable.

    A callable is called with no arguments and may return a BackendUnderTest or an
    unopened Stores bundle; in the latter case it is called again for every bundle the
    suite needs. A string must be a URL: a ``"module:callable"`` spec goes through
    :func:`from_factory`, so a mistyped URL is never imported as a module.

    Raises:
        UsageError: a string without ``://``, or an object that makes no backend.
    """
    if isinstance(target, BackendUnderTest):
        return target
    if isinstance(target, str):
        if "://" not in target:
            raise UsageError(NOT_A_URL.format(target=target))
        return BackendUnderTest.from_url(target)
    if isinstance(target, type) and issubclass(target, Stores):
        raise UsageError("pass a callable returning a bundle, not a Stores class")
    if not callable(target):
        raise UsageError(f"cannot make a backend from {target!r}")
    made = target()
    if isinstance(made, BackendUnderTest):
        return made
    if isinstance(made, Stores):
        factory: Callable[[], Stores] = target
        return BackendUnderTest(open=factory, capabilities=frozenset(made.capabilities))
    raise UsageError(f"{target!r} returned {type(made).__name__}, not a backend or Stores")
