"""Griffe extension: the core's docstrings name objects with Sphinx roles
(``:class:`Lease```); render each as a link to that object's reference entry, or as plain
code when the site documents no such object."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import griffe

ROLE = re.compile(r":(?:class|func|meth|attr|data|exc|mod|obj):`~?(?P<name>[^`]+)`")


class SphinxRoles(griffe.Extension):
    """Rewrites every role in the loaded package's docstrings once the package is complete
    (names resolve only then)."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        """Rewrite the docstrings of ``pkg`` and of everything defined in it."""
        for obj in _defined_in(pkg):
            if obj.docstring is not None:
                obj.docstring.value = _rewrite(obj, obj.docstring.value)


def _rewrite(obj: griffe.Object, text: str) -> str:
    return ROLE.sub(lambda match: _link(obj, match["name"]), text)


def _defined_in(obj: griffe.Object) -> Iterator[griffe.Object]:
    yield obj
    for member in obj.members.values():
        if not member.is_alias:
            yield from _defined_in(member)  # type: ignore[arg-type]


def _link(obj: griffe.Object, name: str) -> str:
    head, _, rest = name.removesuffix("()").partition(".")
    try:
        path = obj.resolve(head)
    except griffe.NameResolutionError:
        return f"`{name}`"
    target = f"{path}.{rest}" if rest else path
    # "optional": an object the site does not document renders as code, not a warning.
    return f'<autoref identifier="{target}" optional><code>{name}</code></autoref>'
