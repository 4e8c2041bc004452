"""Every test of the SDK's session modules is run against the bridge or listed as not
applicable with its reason: an SDK upgrade that adds or renames tests shows here, not as
silently fewer tests."""

from __future__ import annotations

from .sdk_suite import NOT_APPLICABLE, all_test_names, applicable_tests


def test_every_sdk_test_runs_or_is_listed() -> None:
    names = all_test_names()
    assert set(NOT_APPLICABLE) <= names, sorted(set(NOT_APPLICABLE) - names)
    assert names == set(applicable_tests()) | set(NOT_APPLICABLE)
    assert len(applicable_tests()) >= 25
