"""S3: append and read-by-index cost at 10 messages and at long lengths (100,000 by
default), in requests and rounds per call (counted by ``RequestStats``) and in latency, measured in
alternating rounds against one single-threaded moto server::

    python -m tests.bench.s3_lengths --lengths 100,100000 --calls 20 --rounds 4

``--concurrent`` measures with ``concurrent_requests=true`` (without it: ``false``, one
request after another, though the adapter's default is ``true``); ``--threaded`` serves moto
threaded (requests in parallel, as a real endpoint serves them); ``--latency-ms N`` holds
every request N ms before moto serves it (threaded, so held requests overlap), the round
trip of an endpoint across a network, where requests sent together cost one wait.
``--url s3://bucket/prefix?endpoint_url=...`` measures on another endpoint (Ceph RGW,
MinIO, AWS) instead of moto, seeding it over HTTP with the adapter's own appends (a few
minutes for 100,000 messages on a local Ceph RGW; ``--both`` then measures without and
with ``concurrent_requests``, and ``--latency-ms N`` through a relay holding each reply
N ms); the transcripts are removed after.

How the long transcripts are built: through HTTP, one message costs about three requests
(its id checked, then copied out to its message object and its id object once it leaves
the header's window), so 100,000 messages are ~300,000 requests, 18 minutes at best at
the ~280 requests/s moto serves. So the server process seeds itself before it serves:
the adapter's own ``append_messages`` (batches of 1,000 real messages) runs inside the
moto process on :class:`BackendClient`, which hands each request to moto's S3 backend
with moto's own ``If-Match`` / ``If-None-Match`` checks (those of its HTTP layer) instead
of over a socket. The headers and objects are the ones the same appends over HTTP write
(``tests/s3/test_s3_seeding.py`` checks it). Every measured call then goes over HTTP.

Short conversations are fresh keys of exactly 10 messages (one per measured append, so
each is appended to at 10); a long one grows by ``calls`` messages per round (100,000
stays 100,000 to within 0.1 %). Indexed reads at a long length pick positions outside
the header's window (the costly case: the header, then the message object); at 10 every
message is in the window.
"""

from __future__ import annotations

import argparse
import asyncio
import email.utils
import functools
import io
import itertools
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from agentstores.keys import ConversationKey
from agentstores.models import Message
from agentstores_s3 import RequestStats, S3Stores
from tests.servers.moto import free_port, use_test_credentials
from tests.servers.relay import Relay

BATCH = 1000
BUCKET = "agentstores-bench"
PREFIX = "lengths"
SHORT = 10
TAIL = 64
"""Messages at the end of a long transcript appended one at a time, as a chat does: the
header's window then holds single messages (it holds the last append whole, so right
after a batch the next append first copies that batch out)."""
TENANT = "lengths"


def messages(prefix: str, start: int, count: int) -> list[Message]:
    return [
        Message(f"{prefix}{n}", "user" if n % 2 == 0 else "assistant", {"text": f"m {n}"})
        for n in range(start, start + count)
    ]


def long_key(length: int) -> ConversationKey:
    return ConversationKey(TENANT, f"long-{length}")


def short_key(n: int) -> ConversationKey:
    return ConversationKey(TENANT, f"short-{n}")


# --- seeding inside the server process -------------------------------------------------


class BackendClient:
    """The boto3 S3 calls a transcript's appends make, served by moto's S3 backend in
    this process (no socket). Preconditions are checked as moto's HTTP layer checks them
    (``moto/s3/responses.py``); failures are the ``ClientError`` botocore would raise."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend

    @staticmethod
    def _meta(status: int = 200) -> dict[str, Any]:
        date = email.utils.formatdate(usegmt=True)
        return {"HTTPStatusCode": status, "HTTPHeaders": {"date": date}}

    def _error(self, code: str, status: int, operation: str) -> Exception:
        from botocore.exceptions import ClientError

        return ClientError(
            {"Error": {"Code": code}, "ResponseMetadata": self._meta(status)}, operation
        )

    def head_bucket(self, *, Bucket: str) -> dict[str, Any]:
        self.backend.head_bucket(Bucket)
        return {"ResponseMetadata": self._meta()}

    def get_object(self, *, Bucket: str, Key: str) -> dict[str, Any]:
        found = self.backend.get_object(Bucket, Key)
        if found is None:
            raise self._error("NoSuchKey", 404, "GetObject")
        return {
            "Body": io.BytesIO(found.value),
            "ETag": found.etag,
            "ResponseMetadata": self._meta(),
        }

    def put_object(
        self,
        *,
        Bucket: str,
        Key: str,
        Body: bytes,
        IfMatch: str | None = None,
        IfNoneMatch: str | None = None,
    ) -> dict[str, Any]:
        current = self.backend.get_object(Bucket, Key)
        if IfMatch is not None:
            if current is None:
                raise self._error("NoSuchKey", 404, "PutObject")
            if IfMatch.replace('"', "") != current.etag.replace('"', ""):
                raise self._error("PreconditionFailed", 412, "PutObject")
        if IfNoneMatch == "*" and current is not None:
            raise self._error("PreconditionFailed", 412, "PutObject")
        written = self.backend.put_object(Bucket, Key, Body)
        return {"ETag": written.etag, "ResponseMetadata": self._meta()}


def moto_backend() -> Any:
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    return s3_backends[DEFAULT_ACCOUNT_ID]["aws"]


async def seed(
    client: Any, url: str, lengths: Sequence[int], shorts: int, batch_size: int = BATCH
) -> RequestStats:
    """The adapter's appends on ``client`` (None: its own, from ``url``): one conversation
    of each length (in batches of ``batch_size``, the last :data:`TAIL` messages one at a
    time), and ``shorts`` conversations of :data:`SHORT` messages, one at a time."""
    stats = RequestStats()
    async with S3Stores(url, client=client, stats=stats) as stores:
        conv = stores.conversations
        for length in lengths:
            singles = min(length, TAIL)
            for start in range(0, length - singles, batch_size):
                batch = messages("b", start, min(batch_size, length - singles - start))
                await conv.append_messages(long_key(length), "p", batch)
            for message in messages("b", length - singles, singles):
                await conv.append_messages(long_key(length), "p", [message])
        for n in range(shorts):
            for message in messages("s", 0, SHORT):
                await conv.append_messages(short_key(n), "p", [message])
    return stats


class Delayed:
    """A WSGI app that holds every request ``seconds`` before ``app`` serves it."""

    def __init__(self, app: Any, seconds: float) -> None:
        self.app, self.seconds = app, seconds

    def __call__(self, environ: Any, start_response: Any) -> Any:
        time.sleep(self.seconds)
        return self.app(environ, start_response)


def serve_seeded(
    port: int, lengths: Sequence[int], shorts: int, threaded: bool = False, latency: float = 0
) -> None:
    """Seed the transcripts in this process's moto backend, then serve it over HTTP on
    127.0.0.1:``port``, single-threaded (as tests/servers/moto.py serves), or threaded:
    requests served concurrently, as a real endpoint serves them (moto's conditional
    writes are then not atomic, which one writer at a time never needs)."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import run_simple

    backend = moto_backend()
    backend.create_bucket(BUCKET, "us-east-1")
    began = time.perf_counter()
    url = f"s3://{BUCKET}/{PREFIX}?region=us-east-1"
    stats = asyncio.run(seed(BackendClient(backend), url, lengths, shorts))
    report = {"seed_seconds": round(time.perf_counter() - began, 1), **stats.snapshot()}
    print(json.dumps(report), flush=True)
    app: Any = DomainDispatcherApplication(create_backend_app)
    if latency:
        app = Delayed(app, latency)
    run_simple("127.0.0.1", port, app, threaded=threaded, use_reloader=False)


# --- measuring over HTTP ---------------------------------------------------------------

Sample = tuple[float, int, int]
"""(milliseconds, requests, rounds) of one call."""
FRESH = itertools.count()
"""Ids of measured messages (each append is of a new message, never a no-op retry)."""


async def measure(
    stores: S3Stores, stats: RequestStats, length: int, calls: int, first: int
) -> dict[str, list[Sample]]:
    """``calls`` single-message appends and indexed reads at ``length`` (at 10: on the
    short conversations ``first``, ``first + 1``, ...)."""
    conv = stores.conversations
    out: dict[str, list[Sample]] = {"append": [], "read": []}

    async def timed(fn: Callable[[], Awaitable[object]]) -> Sample:
        await stores.now()  # a fresh clock: no HEAD inside the measured call
        stats.reset()
        t0 = time.perf_counter()
        await fn()
        return (time.perf_counter() - t0) * 1000, stats.total, stats.rounds

    for n in range(calls):
        sample = first + n
        key = short_key(sample) if length == SHORT else long_key(length)
        msg = Message(f"x{next(FRESH)}", "user", {"text": "lorem ipsum " * 8})
        append = functools.partial(conv.append_messages, key, "p", [msg])
        out["append"].append(await timed(append))
        # at 10: any position (all are in the header); long: one of a message object
        span = SHORT if length == SHORT else length - TAIL
        index = (sample * 7919) % span
        read = functools.partial(conv.get_transcript, key, "p", index=index)
        out["read"].append(await timed(read))
    return out


def summary(samples: list[Sample]) -> dict[str, object]:
    ms = [s[0] for s in samples]
    return {
        "p50_ms": round(statistics.median(ms), 2),
        "mean_ms": round(statistics.fmean(ms), 2),
        "requests_per_call": sorted({s[1] for s in samples}),
        "requests_median": statistics.median(s[1] for s in samples),
        "requests_max": max(s[1] for s in samples),
        "requests_mean": round(statistics.fmean(s[1] for s in samples), 2),
        "rounds_per_call": sorted({s[2] for s in samples}),
    }


def ratios(samples: dict[int, dict[str, list[Sample]]], base: int) -> dict[str, object]:
    """Median latency at each length over the median at ``base``, per call."""
    return {
        f"{length}/{base}": {
            call: round(
                statistics.median(s[0] for s in by_call[call])
                / statistics.median(s[0] for s in samples[base][call]),
                3,
            )
            for call in by_call
        }
        for length, by_call in samples.items()
        if length != base
    }


async def run(url: str, lengths: Sequence[int], calls: int, rounds: int) -> None:
    """One append and one read at every length in turn, ``calls x rounds`` times, the
    order rotated each time (so a burst of load on the shared machine hits all alike)."""
    stats = RequestStats()
    sizes = [SHORT, *(n for n in lengths if n != SHORT)]  # 10 in --lengths: measured once
    samples: dict[int, dict[str, list[Sample]]] = {n: {"append": [], "read": []} for n in sizes}
    shorts_used = 0
    async with S3Stores(url, stats=stats) as stores:
        for turn in range(calls * rounds):
            for size in sizes[turn % len(sizes) :] + sizes[: turn % len(sizes)]:
                got = await measure(stores, stats, size, 1, shorts_used)
                if size == SHORT:
                    shorts_used += 1
                for call, found in got.items():
                    samples[size][call] += found
    line = {
        "per_length": {n: {c: summary(v) for c, v in by.items()} for n, by in samples.items()},
        "latency_ratio": {**ratios(samples, SHORT), **ratios(samples, lengths[0])},
    }
    print(json.dumps(line), flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.s3_lengths")
    parser.add_argument("--lengths", default="100,100000")
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument(
        "--concurrent",
        action="store_true",
        help="measure with concurrent_requests=true (requests of a call sent together)",
    )
    parser.add_argument(
        "--threaded",
        action="store_true",
        help="serve requests concurrently (as a real endpoint does), not one at a time",
    )
    parser.add_argument(
        "--latency-ms",
        type=float,
        default=0,
        help="hold every request this long before serving it (a network round trip; "
        "implies --threaded)",
    )
    parser.add_argument(
        "--url",
        help="measure on this s3:// URL (a real endpoint) instead of a seeded moto server",
    )
    parser.add_argument(
        "--both",
        action="store_true",
        help="with --url: measure without concurrent_requests, then with (one seeding)",
    )
    parser.add_argument("--serve", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    lengths = [int(n) for n in args.lengths.split(",") if n]
    args.threaded = args.threaded or args.latency_ms > 0
    use_test_credentials()
    shorts = args.calls * args.rounds
    if args.url:
        asyncio.run(on_endpoint(args.url, lengths, shorts, args))
        return 0
    if args.serve is not None:
        serve_seeded(args.serve, lengths, shorts, args.threaded, args.latency_ms / 1000)
        return 0
    port = free_port()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    command = [sys.executable, "-m", "tests.bench.s3_lengths", "--serve", str(port)]
    command += ["--lengths", args.lengths, "--calls", str(args.calls), "--rounds", str(args.rounds)]
    command += ["--threaded"] if args.threaded else []
    command += ["--latency-ms", str(args.latency_ms)]
    server = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        seeded = server.stdout.readline()
        if not seeded:
            raise RuntimeError("the seeding server exited before serving")
        print(json.dumps({"seeded": json.loads(seeded)}), flush=True)
        endpoint = f"http://127.0.0.1:{port}"
        _await_server(endpoint, server)
        url = f"s3://{BUCKET}/{PREFIX}?region=us-east-1&endpoint_url={endpoint}"
        url += f"&concurrent_requests={str(args.concurrent).lower()}"
        asyncio.run(run(url, lengths, args.calls, args.rounds))
    finally:
        server.terminate()
        server.wait(30)
    return 0


class HeldReplies(Relay):
    """A relay that holds the first chunk of every reply ``seconds`` (a network round
    trip: requests on different connections overlap, as on a network)."""

    def __init__(self, host: str, port: int, seconds: float) -> None:
        super().__init__(host, port)
        self.seconds = seconds

    def request(self, data: bytes, marks: list[Any]) -> bool:
        if not marks:  # HTTP/1.1: one request at a time per connection
            marks.append(True)
        return True

    async def reply(self, data: bytes, mark: Any | None) -> bool:
        if mark is not None:
            await asyncio.sleep(self.seconds)
        return True


async def on_endpoint(base: str, lengths: Sequence[int], shorts: int, args: Any) -> None:
    """Seed and measure under a fresh prefix of ``base``, then delete that prefix; with
    ``--latency-ms``, measured through a :class:`HeldReplies` relay."""
    from urllib.parse import parse_qsl, urlencode, urlsplit

    from tests.s3.conftest import purge, with_prefix

    url = with_prefix(base, f"{PREFIX}-{os.urandom(4).hex()}")
    url += "&" if "?" in url else "?"
    seeding = url + "concurrent_requests=true&workers=64"
    relay: HeldReplies | None = None
    measured_base = url
    if args.latency_ms:
        head, _, query = url.rstrip("&?").partition("?")
        options = dict(parse_qsl(query))
        target = urlsplit(options["endpoint_url"])
        relay = HeldReplies(
            target.hostname or "127.0.0.1", target.port or 80, args.latency_ms / 1000
        )
        await relay.start()
        options["endpoint_url"] = f"http://127.0.0.1:{relay.port}"
        measured_base = f"{head}?{urlencode(options)}&"
    began = time.perf_counter()
    try:
        stats = await seed(None, seeding, lengths, shorts)
        report = {"seed_seconds": round(time.perf_counter() - began, 1), **stats.snapshot()}
        print(json.dumps({"seeded": report}), flush=True)
        for concurrent in (False, True) if args.both else (args.concurrent,):
            print(json.dumps({"concurrent_requests": concurrent}), flush=True)
            measured = measured_base + f"concurrent_requests={str(concurrent).lower()}"
            await run(measured, lengths, args.calls, args.rounds)
    finally:
        if relay is not None:
            await relay.close()
        purge(url)


def _await_server(endpoint: str, server: subprocess.Popen[str]) -> None:
    import contextlib
    import urllib.request

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the seeded moto server exited with {server.returncode}")
        with contextlib.suppress(OSError):
            urllib.request.urlopen(endpoint + "/moto-api/", timeout=1).close()
            return
        time.sleep(0.1)
    raise RuntimeError("the seeded moto server did not answer within 120 s")


if __name__ == "__main__":
    sys.exit(main())
