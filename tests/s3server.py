"""An S3-compatible server on loopback for tests: moto's standalone server, as a process of its own.

:class:`S3Server` starts ``python -m moto.server`` on a free port of 127.0.0.1
and waits until it answers. :meth:`S3Server.environment` is what a process
needs to use it as its S3 endpoint, through the standard AWS variables that
boto3, botocore and s3fs read (the same a user sets for AWS or MinIO).

>>> with S3Server() as server:                                    # doctest: +SKIP
...     env = {**os.environ, **server.environment()}
...     server.create_bucket("fedchain")
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from types import TracebackType

#: Seconds the server may take to answer its first request (Flask and moto's imports on a busy 2-core machine).
START_TIMEOUT_S = 60.0
#: The key pair the server is given: moto accepts any key unless told to check (``check_credentials``).
ACCESS_KEY, SECRET_KEY = "fedchain-test", "fedchain-test-secret"
REGION = "us-east-1"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class S3Server:
    """moto's S3 server on 127.0.0.1; with ``check_credentials`` it refuses every key (no IAM user exists)."""

    def __init__(self, *, check_credentials: bool = False) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._check_credentials = check_credentials
        self._process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> S3Server:
        env = {**os.environ}
        if self._check_credentials:
            env["INITIAL_NO_AUTH_ACTION_COUNT"] = "0"  # authenticate from the first request on
        self._process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=2).close()
                return self
            except (urllib.error.URLError, OSError):
                if self._process.poll() is not None or time.monotonic() > deadline:
                    self.__exit__(None, None, None)
                    raise RuntimeError(f"moto's S3 server did not start on {self.endpoint}") from None
                time.sleep(0.2)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()

    def environment(self) -> dict[str, str]:
        """The AWS variables that point boto3, botocore and s3fs at this server."""
        return {
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_DEFAULT_REGION": REGION,
        }

    def create_bucket(self, name: str) -> None:
        """Create bucket ``name`` (a PUT on its path: the S3 API's CreateBucket)."""
        request = urllib.request.Request(f"{self.endpoint}/{name}", method="PUT")
        urllib.request.urlopen(request, timeout=10).close()
