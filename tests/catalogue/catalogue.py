"""The whole broken-backend catalogue: the core list and each area's own module.

``mutants`` holds the first catalogue and the helpers every mutant uses;
``mutants_models`` breaks generators' regions and metadata side effects,
``mutants_races`` multi-record calls under concurrency, ``mutants_time`` lifetimes,
``mutants_metadata`` the conversation metadata.
"""

from __future__ import annotations

from tests.catalogue import (
    mutants,
    mutants_metadata,
    mutants_models,
    mutants_races,
    mutants_time,
)
from tests.catalogue.mutants import CONTROL, Mutant

MUTANTS: list[Mutant] = [
    *mutants.MUTANTS,
    *mutants_models.MUTANTS,
    *mutants_races.MUTANTS,
    *mutants_time.MUTANTS,
    *mutants_metadata.MUTANTS,
]

__all__ = ["CONTROL", "MUTANTS", "Mutant"]
