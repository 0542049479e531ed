"""A JSON-RPC transport that survives a flaky endpoint: retries with backoff for a bounded time.

Public endpoints drop connections, time out, answer HTTP 429 when a key
exceeds its rate and 502/503 while a load balancer swaps backends. Each of
these says nothing about the request itself, so :class:`RetryingHTTPProvider`
sends the same request again after an exponentially growing, jittered delay,
until :attr:`RetrySettings.total_s` have passed; then it raises
:class:`~fedchain.errors.RpcUnavailable` naming the endpoint and the last
failure. A JSON-RPC error is an *answer* (a revert, "nonce too low") and is
returned to the caller at once, never retried.

Re-sending ``eth_sendRawTransaction`` whose first response was lost can meet
the transaction already in the node ("already known", or "nonce too low" once
it is mined); :class:`~fedchain.chain.tx.Transactor` recognises its own
transaction there and counts it as sent.

>>> w3 = Web3(RetryingHTTPProvider("http://127.0.0.1:8545", timeout_s=10))  # doctest: +SKIP
"""

from __future__ import annotations

import json
import logging
import random
import re
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import requests
from web3 import HTTPProvider
from web3.types import RPCEndpoint

from fedchain.errors import RpcUnavailable

log = logging.getLogger(__name__)

#: HTTP statuses that say "not now" rather than "not this request": rate limits and unavailable backends.
TOO_MANY_REQUESTS = 429
FIRST_SERVER_ERROR = 500
#: Retries of one request logged at DEBUG; from this one on at WARNING (an outage, not a blip).
WARN_FROM_ATTEMPT = 3
#: A path segment this long (letters, digits, - and _) is taken for an API key and hidden in messages.
API_KEY_MIN_LENGTH = 16


@dataclass(frozen=True)
class RetrySettings:
    """How long and how often a failed JSON-RPC request is sent again."""

    #: Seconds from the first attempt after which no new attempt starts (0: never retry).
    total_s: float = 30.0
    #: Delay before the first retry; each next one doubles, up to ``max_delay_s``.
    first_delay_s: float = 0.2
    #: Longest delay between two attempts.
    max_delay_s: float = 5.0

    def __post_init__(self) -> None:
        if self.total_s < 0:
            raise ValueError(f"total_s must be >= 0, got {self.total_s}")
        if not 0 < self.first_delay_s <= self.max_delay_s:
            raise ValueError(f"need 0 < first_delay_s <= max_delay_s, got {self.first_delay_s} and {self.max_delay_s}")

    def delay_s(self, retry: int, rng: random.Random) -> float:
        """The pause before retry number ``retry`` (1, 2, ...): doubling, capped, "equal jitter".

        Half the delay is fixed and half random, so that many clients cut off by
        the same outage do not come back in the same instant.
        """
        ceiling = min(self.max_delay_s, self.first_delay_s * 2 ** (retry - 1))
        return rng.uniform(ceiling / 2, ceiling)


#: Fail at the first failure (a first contact that must say at once whether a node answers).
NO_RETRY = RetrySettings(total_s=0.0)


class RetryingHTTPProvider(HTTPProvider):
    """web3's HTTP provider, retrying transport failures, 429 and 5xx within :class:`RetrySettings`."""

    def __init__(
        self,
        endpoint_uri: str,
        *,
        timeout_s: float,
        retry: RetrySettings = RetrySettings(),
        rng: random.Random | None = None,
    ) -> None:
        # web3's own retry (a fixed count, a fixed method list) is replaced by ours.
        super().__init__(endpoint_uri, request_kwargs={"timeout": timeout_s}, exception_retry_configuration=None)
        self.timeout_s = timeout_s
        self.retry = retry
        self._rng = rng or random.Random()

    @property
    def endpoint_label(self) -> str:
        """The endpoint as messages and logs show it: without credentials or API keys."""
        return endpoint_label(str(self.endpoint_uri))

    def _make_request(self, method: RPCEndpoint, request_data: bytes) -> bytes:
        started = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            try:
                return bytes(
                    self._request_session_manager.make_post_request(
                        self.endpoint_uri, request_data, **self.get_request_kwargs()
                    )
                )
            except requests.HTTPError as err:
                answer = _json_rpc_answer(err.response)
                if answer is not None:  # an error status around a JSON-RPC answer: the answer counts
                    return answer
                status = err.response.status_code if err.response is not None else 0
                failure = f"HTTP {status}"
                if status != TOO_MANY_REQUESTS and status < FIRST_SERVER_ERROR:
                    raise self._unavailable(method, failure, attempt, started) from err
            except requests.Timeout as err:  # before ConnectionError: a connect timeout is both
                failure = f"no answer within {self.timeout_s:g} s ({type(err).__name__})"
            except (requests.ConnectionError, requests.exceptions.ChunkedEncodingError) as err:
                failure = f"connection failed ({_root_cause(err)})"
            remaining = self.retry.total_s - (time.monotonic() - started)
            if remaining <= 0:
                raise self._unavailable(method, failure, attempt, started) from None
            delay = min(self.retry.delay_s(attempt, self._rng), remaining)
            log.log(
                logging.WARNING if attempt >= WARN_FROM_ATTEMPT else logging.DEBUG,
                "%s to %s failed (%s); retry %d in %.2f s",
                method,
                self.endpoint_label,
                failure,
                attempt,
                delay,
            )
            time.sleep(delay)

    def _unavailable(self, method: str, failure: str, attempts: int, started: float) -> RpcUnavailable:
        elapsed = time.monotonic() - started
        return RpcUnavailable(
            f"the JSON-RPC endpoint {self.endpoint_label} did not answer {method}: {failure} "
            f"({attempts} attempt{'s' if attempts != 1 else ''} in {elapsed:.1f} s)",
        )


def endpoint_label(url: str) -> str:
    """``url`` without a password, query or API-key-like path segments, safe for logs and messages."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    path = "/".join(
        "***" if re.fullmatch(rf"[A-Za-z0-9_-]{{{API_KEY_MIN_LENGTH},}}", segment) else segment
        for segment in parts.path.split("/")
    )
    return urlunsplit((parts.scheme, netloc, path, "", ""))


def _json_rpc_answer(response: requests.Response | None) -> bytes | None:
    """The body of ``response`` when it is a JSON-RPC answer (some nodes wrap errors in HTTP 4xx/5xx)."""
    if response is None:
        return None
    try:
        body: Any = json.loads(response.content)
    except ValueError:
        return None
    answers = body if isinstance(body, list) else [body]
    if answers and all(isinstance(a, dict) and "jsonrpc" in a and ("error" in a or "result" in a) for a in answers):
        return bytes(response.content)
    return None


def _root_cause(err: BaseException) -> str:
    """The innermost cause's class name (ConnectionRefusedError, ConnectionResetError, ...)."""
    while err.__context__ is not None and err.__context__ is not err:
        err = err.__context__
    return type(err).__name__
