"""A fault-injecting JSON-RPC proxy: a flaky public endpoint in front of a local node, for tests.

:class:`FaultProxy` listens on a free port of 127.0.0.1 and forwards each
JSON-RPC request to ``upstream``. With probability ``rate``, drawn from a
seeded generator, a request meets one of :class:`Fault` instead: the
connection is reset, the proxy answers HTTP 429, 502 or 503, or it forwards
the request and then holds the answer past the client's timeout (the request
took effect, its answer is lost). It counts what it injected and forwarded,
and stops by itself after ``lifetime_s`` even if a test forgets to.

>>> with FaultProxy(node.rpc_url, rate=0.3, seed=7) as proxy:     # doctest: +SKIP
...     w3 = http_web3(proxy.url, timeout_s=1.0)
...     w3.eth.block_number
...     proxy.injected_total
"""

from __future__ import annotations

import enum
import json
import logging
import random
import socket
import struct
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Collection
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

log = logging.getLogger(__name__)

#: Seconds the proxy waits for the upstream node: longer than any test request, shorter than a hung test.
UPSTREAM_TIMEOUT_S = 30.0


class Fault(enum.Enum):
    """What a request may meet instead of a plain forward."""

    #: The connection is reset (TCP RST) before anything is forwarded.
    RESET = "reset"
    #: HTTP 429 Too Many Requests, nothing forwarded.
    HTTP_429 = "http 429"
    #: HTTP 502 Bad Gateway, nothing forwarded.
    HTTP_502 = "http 502"
    #: HTTP 503 Service Unavailable, nothing forwarded.
    HTTP_503 = "http 503"
    #: Forwarded, then the answer is held for ``delay_s`` (past the client's timeout) and the connection dropped.
    TIMEOUT = "timeout"


class FaultProxy:
    """A threaded HTTP proxy to ``upstream`` that injects :class:`Fault` at ``rate``, reproducibly from ``seed``.

    ``methods`` limits faults to those JSON-RPC methods (None: any); ``limit``
    stops injecting after that many faults (None: never), so that a test can
    aim one fault at one request.
    """

    def __init__(
        self,
        upstream: str,
        *,
        rate: float = 0.3,
        seed: int = 0,
        faults: Collection[Fault] = tuple(Fault),
        delay_s: float = 2.0,
        methods: Collection[str] | None = None,
        limit: int | None = None,
        lifetime_s: float = 300.0,
    ) -> None:
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"rate must be within [0, 1], got {rate}")
        if not faults:
            raise ValueError("faults must name at least one Fault")
        self.upstream = upstream
        self.rate = rate
        self.faults = tuple(faults)
        self.delay_s = delay_s
        self.methods = None if methods is None else frozenset(methods)
        self.limit = limit
        self.lifetime_s = lifetime_s
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._injected: Counter[Fault] = Counter()
        self._forwarded: Counter[str] = Counter()
        self._server: ThreadingHTTPServer | None = None
        self._stopped = threading.Event()

    # ------------------------------------------------------------------ life cycle

    def start(self) -> FaultProxy:
        """Listen on a free port and serve in a background thread; stop after ``lifetime_s``."""
        proxy = self

        class Handler(_ProxyHandler):
            owner = proxy

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        self._server = server
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        threading.Thread(target=self._stop_after_lifetime, daemon=True).start()
        log.debug("fault proxy on %s -> %s (rate %.2f)", self.url, self.upstream, self.rate)
        return self

    def stop(self) -> None:
        """Stop serving and close the port (idempotent)."""
        self._stopped.set()
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()

    def _stop_after_lifetime(self) -> None:
        if not self._stopped.wait(self.lifetime_s):
            log.warning("fault proxy %s reached its lifetime of %.0f s and stops", self.url, self.lifetime_s)
            self.stop()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # ------------------------------------------------------------------ what it did

    @property
    def url(self) -> str:
        """The proxy's endpoint, to use instead of the upstream's."""
        if self._server is None:
            raise RuntimeError("the fault proxy is not running; use it as a context manager or call start()")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def injected(self) -> dict[Fault, int]:
        """How many times each fault was injected so far."""
        with self._lock:
            return dict(self._injected)

    @property
    def injected_total(self) -> int:
        with self._lock:
            return sum(self._injected.values())

    @property
    def forwarded(self) -> dict[str, int]:
        """Requests answered to the client, by JSON-RPC method (a TIMEOUT fault's forward is not counted)."""
        with self._lock:
            return dict(self._forwarded)

    # ------------------------------------------------------------------ the schedule

    def draw(self, method: str) -> Fault | None:
        """The fault this request meets, if any; counted as injected."""
        with self._lock:
            if self.methods is not None and method not in self.methods:
                return None
            if self.limit is not None and sum(self._injected.values()) >= self.limit:
                return None
            if self._rng.random() >= self.rate:
                return None
            fault = self._rng.choice(self.faults)
            self._injected[fault] += 1
            return fault

    def count_forwarded(self, method: str) -> None:
        with self._lock:
            self._forwarded[method] += 1

    def forward(self, body: bytes) -> tuple[int, bytes]:
        """Send ``body`` upstream; its HTTP status and body (a 502 when the upstream cannot be reached)."""
        request = urllib.request.Request(self.upstream, data=body, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=UPSTREAM_TIMEOUT_S) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as err:
            return err.code, err.read()
        except OSError as err:
            return 502, f"upstream unreachable: {err}".encode()


class _ProxyHandler(BaseHTTPRequestHandler):
    """One request: draw a fault, then inject it or forward."""

    owner: FaultProxy

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        proxy = self.owner
        method = _method_of(body)
        fault = proxy.draw(method)
        if fault is Fault.RESET:
            self._reset()
        elif fault in (Fault.HTTP_429, Fault.HTTP_502, Fault.HTTP_503):
            status = int(fault.value.removeprefix("http "))
            self._answer(status, b"injected fault", "text/plain")
        elif fault is Fault.TIMEOUT:
            proxy.forward(body)
            time.sleep(proxy.delay_s)
            self._reset()
        else:
            status, answer = proxy.forward(body)
            self._answer(status, answer, "application/json")
            proxy.count_forwarded(method)

    def _answer(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _reset(self) -> None:
        """Close with RST instead of FIN: the client sees "connection reset by peer"."""
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()
        self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("fault proxy: " + format, *args)


def _method_of(body: bytes) -> str:
    """The JSON-RPC method of a request body ("batch" for a batch, "" when unreadable)."""
    try:
        request = json.loads(body)
    except ValueError:
        return ""
    if isinstance(request, list):
        return "batch"
    return str(request.get("method", "")) if isinstance(request, dict) else ""
