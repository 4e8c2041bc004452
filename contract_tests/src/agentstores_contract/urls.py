"""What a backend does with its URL: an option it does not know is refused, by name, when
the bundle is made. Dropping it silently hides a typo (``pool_max=`` for ``pool_max_size=``);
handing it to a driver fails later, at connect time, with the driver's words."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

import pytest

from agentstores.errors import UsageError
from agentstores.plugins import create_stores

from .backend import BackendUnderTest
from .base import ContractBase
from .promises import promise

UNKNOWN_OPTION = "agentstores_no_such_option"
"""A name no backend takes: the one the test adds to the backend's URL."""


def with_option(url: str, name: str, value: str) -> str:
    """``url`` with ``name=value`` added to its query string."""
    parts = urlsplit(url)
    query = f"{parts.query}&{name}={value}" if parts.query else f"{name}={value}"
    return urlunsplit(parts._replace(query=query))


class UrlContract(ContractBase):
    @promise("urls.unknown_option")
    def test_an_unknown_url_option_is_refused_by_name(self, backend: BackendUnderTest) -> None:
        """Made, not opened: the refusal must come before anything connects."""
        if backend.url is None:
            pytest.skip("the backend was given without a URL")
        url = with_option(backend.url, UNKNOWN_OPTION, "1")
        with pytest.raises(UsageError) as refused:
            create_stores(url)
        assert UNKNOWN_OPTION in str(refused.value), (
            f"the refusal must name the option: {refused.value}"
        )
