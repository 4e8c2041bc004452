"""``agentstores bench`` on PostgreSQL shows the URL it measured with its password masked,
in the table, in the JSON and in its progress lines."""

from __future__ import annotations

import json

import pytest

from agentstores.cli import main as cli_main
from agentstores.urls import redact_url
from tests.tools.leaks import PASSWORD, with_password

from .conftest import PgServer

TINY = ["--clients", "2", "--seconds", "0.2", "--warmup", "0.05", "--rounds", "2"]
TINY += ["--ops", "cas,read", "--lengths", "3"]


def test_bench_shows_the_url_without_its_password(
    pg: PgServer, capsys: pytest.CaptureFixture[str]
) -> None:
    url = with_password(pg.url)
    assert cli_main(["bench", "--url", url, *TINY]) == 0
    table = capsys.readouterr()
    assert cli_main(["bench", "--url", url, *TINY, "--json"]) == 0
    data = capsys.readouterr()
    for text in (table.out, table.err, data.out, data.err):
        assert PASSWORD not in text
    assert redact_url(url) in table.out and redact_url(url) in table.err
    (run,) = json.loads(data.out)["runs"]
    assert run["url"] == redact_url(url) and run["floor"] is not None
