"""A real S3-compatible endpoint for the S3 backend's tests: a one-OSD Ceph cluster and
its RADOS gateway (RGW), from Debian's ``ceph-mon``, ``ceph-osd`` and ``radosgw``
packages, on free loopback ports in a private directory.

The OSD keeps objects in memory (``memstore``) and cephx is off: this is a test server,
not a deployment. RGW's S3 front end is the real one, the one Ceph clusters serve::

    with CephGateway() as gateway:
        print(gateway.url("bucket"))   # s3://bucket/?endpoint_url=http://127.0.0.1:<port>&...

Two things RGW 16 (Debian 12's Ceph) does differently from AWS, both found by the suite
and both declared in :meth:`CephGateway.url`: it compares a PUT's ``If-Match`` with the
bare ETag, so the quoted form AWS documents is always refused (``quoted_if_match=false``),
and it ignores ``If-Match`` on DELETE (``conditional_delete=false``).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Self

from .moto import CREDENTIALS
from .process import free_port

PACKAGES = ("ceph-mon", "ceph-osd", "radosgw", "ceph-common")
"""Debian's packages for a test gateway (``apt-get install --no-install-recommends``)."""
PROGRAMS = ("monmaptool", "ceph-mon", "ceph-osd", "radosgw", "radosgw-admin", "ceph")
OPTIONS = "quoted_if_match=false&conditional_delete=false"
"""What RGW 16 needs of the S3 backend (see the module docstring)."""


def missing_programs() -> list[str]:
    return [name for name in PROGRAMS if shutil.which(name) is None]


class CephGateway:
    """A monitor, one OSD and an RGW, each a child process; stopped and removed on exit."""

    start_timeout = 120.0

    def __init__(self) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="ceph-"))
        self.mon_port = free_port()
        self.port = free_port({self.mon_port})
        self.fsid = str(uuid.uuid4())
        self.processes: list[subprocess.Popen[bytes]] = []

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, bucket: str, prefix: str = "") -> str:
        return f"s3://{bucket}/{prefix}?region=us-east-1&endpoint_url={self.endpoint}&{OPTIONS}"

    # --- life cycle -------------------------------------------------------------------

    def _config(self) -> None:
        d = self.directory
        conf = d / "ceph.conf"
        conf.write_text(
            f"""[global]
fsid = {self.fsid}
mon host = v2:127.0.0.1:{self.mon_port}
public addr = 127.0.0.1
auth cluster required = none
auth service required = none
auth client required = none
ms mon client mode = crc
ms client mode = crc
ms bind ipv6 = false
osd pool default size = 1
osd pool default min size = 1
mon allow pool size one = true
mon warn on pool no redundancy = false
osd crush chooseleaf type = 0
mon max pg per osd = 2000
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
run dir = {d}/run
log file = {d}/log/$name.log
admin socket = {d}/run/$name.asok
[mon]
mon data = {d}/mon.$id
[osd]
osd data = {d}/osd.$id
osd objectstore = memstore
memstore device bytes = 8589934592
[client]
rgw frontends = beast endpoint=127.0.0.1:{self.port} tcp_nodelay=1
rgw data = {d}/rgw
"""
        )
        for sub in ("run", "log", "mon.a", "osd.0", "rgw"):
            (d / sub).mkdir(exist_ok=True)

    def _run(self, *args: str, timeout: float = 60) -> str:
        done = subprocess.run(
            [*args, "-c", str(self.directory / "ceph.conf")],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed: {done.stderr.strip()[-2000:]}")
        return done.stdout

    def _spawn(self, *args: str) -> None:
        # the child keeps its own copy of the log's descriptor; ours closes at once
        with open(self.directory / "log" / f"{args[0]}.out", "ab") as log:
            self.processes.append(
                subprocess.Popen(
                    [*args, "-f", "-c", str(self.directory / "ceph.conf")],
                    stdout=log,
                    stderr=log,
                    start_new_session=True,
                )
            )

    def _wait(self, what: str, check: Callable[[], bool]) -> None:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            for proc in self.processes:
                if proc.poll() is not None:
                    raise RuntimeError(f"{proc.args[0]} exited: see {self.directory}/log")
            with contextlib.suppress(Exception):
                if check():
                    return
            time.sleep(0.25)
        raise RuntimeError(f"ceph: {what} not ready within {self.start_timeout:.0f} s")

    def start(self) -> Self:
        missing = missing_programs()
        if missing:
            raise RuntimeError(
                f"ceph test gateway: {', '.join(missing)} not found; install Debian's "
                f"packages: apt-get install --no-install-recommends {' '.join(PACKAGES)}"
            )
        self._config()
        monmap = str(self.directory / "monmap")
        mon = f"[v2:127.0.0.1:{self.mon_port}]"
        create = ["monmaptool", "--create", "--addv", "a", mon, "--fsid", self.fsid, monmap]
        subprocess.run(create, capture_output=True, check=True)
        self._run("ceph-mon", "--mkfs", "-i", "a", "--monmap", monmap)
        self._spawn("ceph-mon", "-i", "a")
        self._wait("monitor", lambda: "quorum" in self._run("ceph", "-s", timeout=10))
        osd = self._run("ceph", "osd", "create").strip()
        self._run("ceph-osd", "-i", osd, "--mkfs")
        self._spawn("ceph-osd", "-i", osd)
        self._wait(
            "osd",
            lambda: (
                json.loads(self._run("ceph", "osd", "stat", "-f", "json", timeout=10))[
                    "num_up_osds"
                ]
                == 1
            ),
        )
        self._spawn("radosgw", "-n", "client.rgw")
        self._wait("rgw", self._answers)
        self._run(
            "radosgw-admin",
            "user",
            "create",
            "--uid=agentstores",
            "--display-name=agentstores",
            f"--access-key={CREDENTIALS['AWS_ACCESS_KEY_ID']}",
            f"--secret={CREDENTIALS['AWS_SECRET_ACCESS_KEY']}",
        )
        return self

    def _answers(self) -> bool:
        with urllib.request.urlopen(self.endpoint, timeout=2) as reply:
            return bool(reply.status == 200)

    def close(self) -> None:
        for proc in reversed(self.processes):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.processes:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        self.processes.clear()
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> Self:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc_info: object) -> None:
        self.close()
