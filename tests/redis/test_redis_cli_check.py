"""``agentstores check`` on Redis that cannot be used, and the URL options the adapter
takes: a closed port is one line with the driver's reason, an unknown option is refused
by name before connecting, redis-py's own parameters still reach it, and a bad
``tombstone_ttl`` is refused by name when the bundle is made."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta

import pytest

from agentstores.errors import UsageError
from agentstores_redis.stores import RedisStores, parse_url
from tests.servers.valkey import free_port
from tests.tombstone_ttls import REFUSED, erase_then_write_late


def check(url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentstores.cli", "check", url, "--profile", "quick"],
        capture_output=True,
        text=True,
        timeout=300,
    )


def one_line(run: subprocess.CompletedProcess[str]) -> str:
    assert run.returncode == 2, run.stdout + run.stderr
    assert run.stdout == "", "nothing ran, so there is no header and no table"
    lines = run.stderr.splitlines()
    assert len(lines) == 1, run.stderr
    return lines[0]


def test_a_closed_port_is_one_line_with_the_drivers_reason() -> None:
    line = one_line(check(f"redis://127.0.0.1:{free_port()}/0"))
    assert "cannot reach" in line and "Connect call failed" in line, line


def test_an_unknown_url_option_is_refused_before_connecting() -> None:
    line = one_line(check(f"redis://127.0.0.1:{free_port()}/0?pool=4"))
    assert "unknown redis URL option 'pool'" in line and "pool_size" in line, line
    assert "cannot reach" not in line, "refused when the URL was parsed, before connecting"


@pytest.mark.parametrize(
    ("url", "passed"),
    [
        ("redis://h:1/0?db=2&socket_keepalive=true", "db=2&socket_keepalive=true"),
        ("rediss://h:1/0?ssl_cert_reqs=none", "ssl_cert_reqs=none"),
        ("valkeys+cluster://h:1?ssl_ca_certs=%2Fca.pem", "ssl_ca_certs=%2Fca.pem"),
    ],
)
def test_redis_py_parameters_still_reach_the_driver(url: str, passed: str) -> None:
    driver_url, _, _ = parse_url(f"{url}&key_prefix=p", {})
    assert driver_url.endswith(f"?{passed}"), driver_url


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("redis://h:1/0?ssl_cert_reqs=none", "TLS options need rediss://"),
        ("redis://h:1/0?max_connections=4", "fixed by the adapter: use pool_size"),
        ("redis://h:1/0?socket_connect_timeout=1", "use connect_timeout"),
        ("redis://h:1/0?key_prefx=a", "unknown redis URL option 'key_prefx'; known: "),
    ],
)
def test_other_names_are_refused_saying_what_to_use(url: str, says: str) -> None:
    with pytest.raises(UsageError, match=says):
        parse_url(url, {})


@pytest.mark.parametrize(
    ("query", "options"),
    REFUSED,
)
def test_a_bad_tombstone_ttl_is_refused_by_name_when_the_bundle_is_made(
    query: str, options: dict[str, object]
) -> None:
    """Before, no upper bound, ``True`` was one second and a word was a float's error."""
    with pytest.raises(UsageError, match="tombstone_ttl") as refused:
        RedisStores(f"redis://127.0.0.1:{free_port()}/0{query}", **options)
    assert refused.value.context["option"] == "tombstone_ttl"


@pytest.mark.parametrize(
    ("query", "options", "ttl"),
    [
        pytest.param("&tombstone_ttl=3155760000", {}, timedelta(days=36_525), id="url-100y"),
        pytest.param("", {"tombstone_ttl": timedelta(seconds=1)}, timedelta(seconds=1), id="1s"),
    ],
)
async def test_a_tombstone_ttl_up_to_100_years_is_kept(
    url: str, query: str, options: dict[str, object], ttl: timedelta
) -> None:
    async with RedisStores(url + query, **options) as stores:
        assert stores.ctx.tombstone_ttl_ms == ttl // timedelta(milliseconds=1)
        await erase_then_write_late(stores, ttl, slack=timedelta(milliseconds=1))
