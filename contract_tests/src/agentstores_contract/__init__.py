"""The agentstores contract suite: property-based tests any backend can run.

Subclass :class:`ContractSuite` and override its ``backend`` fixture, run
``pytest --agentstores-url URL``, or call :func:`validate` from code.

Names are imported lazily so that the pytest plugin can enable assertion rewriting
for the suite's modules before they load.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .backend import BackendUnderTest
    from .linearizability import Operation, check
    from .promises import PROMISES, promise, register_promise
    from .suite import ContractSuite
    from .validation import PromiseResult, Report, validate

_EXPORTS = {
    "BackendUnderTest": "backend",
    "ContractSuite": "suite",
    "Operation": "linearizability",
    "check": "linearizability",
    "PROMISES": "promises",
    "promise": "promises",
    "register_promise": "promises",
    "PromiseResult": "validation",
    "Report": "validation",
    "validate": "validation",
}

__all__ = [
    "PROMISES",
    "BackendUnderTest",
    "ContractSuite",
    "Operation",
    "PromiseResult",
    "Report",
    "check",
    "promise",
    "register_promise",
    "validate",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
