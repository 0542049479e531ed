"""Local chains and connections to remote ones.

Two local chains share one small interface (:class:`ChainNode`): start, stop,
a connected web3 client, and the chain's public development accounts.
:class:`AnvilNode` runs a real Anvil on a port it binds itself (no other
process can take it between choosing and binding); :class:`InProcessChain`
runs eth-tester with py-evm inside the Python process, for where no node can
be run (no Anvil binary, no sockets). :func:`connect` reaches any JSON-RPC
node and checks that it answers with the expected chain id.

>>> with AnvilNode() as node:          # doctest: +SKIP
...     w3 = node.web3()
...     w3.eth.block_number
0
"""

from __future__ import annotations

import logging
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Protocol

from fedchain.errors import ChainError

if TYPE_CHECKING:
    from eth_account.signers.local import LocalAccount
    from web3 import Web3

    from fedchain.chain.rpc import RetrySettings

log = logging.getLogger(__name__)

#: The line Anvil prints once it listens, with the port it bound (its own choice under ``--port 0``).
_LISTENING = re.compile(rb"Listening on [^\s:]+:(\d+)")

PROJECT_ROOT = Path(__file__).resolve().parents[2]
#: Anvil's default mnemonic: its accounts are public test keys, never for real funds.
DEFAULT_MNEMONIC = "test test test test test test test test test test test junk"
DEFAULT_CHAIN_ID = 31337
#: Seconds an HTTP JSON-RPC request may take before the node counts as unreachable.
RPC_TIMEOUT_S = 60.0
#: Seconds a first contact with a node is retried before it counts as unreachable (a flaky endpoint vs a wrong URL).
#: 3 s was too short: an endpoint that stalls one request in five for 2 s could spend it on one stall and one
#: more fault, and an agent started through it died (seen once in the flaky-RPC system test); 10 s leaves
#: room for several attempts while a wrong URL is still reported within seconds.
FIRST_CONTACT_RETRY_S = 10.0


class NodeError(ChainError):
    """The local chain node cannot be started or does not answer."""

    hint = "run `make setup` to install Anvil, or pass --rpc-url to use a running node"


def anvil_binary() -> Path:
    """The project's pinned Anvil (node_modules), else one on PATH.

    The npm package's platform binary is run directly: its ``.bin/anvil``
    launcher is a Node script that would add a Node process per chain.
    """
    for native in sorted((PROJECT_ROOT / "node_modules" / "@foundry-rs").glob("anvil-*/bin/anvil")):
        if os.access(native, os.X_OK):
            return native
    local = PROJECT_ROOT / "node_modules" / ".bin" / "anvil"
    if local.exists():
        return local
    found = shutil.which("anvil")
    if found:
        return Path(found)
    raise NodeError("Anvil is not installed (looked in node_modules and on PATH)")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _read_port(stream: IO[bytes], bound: queue.Queue[int]) -> None:
    """Read Anvil's output to its end: the port of its "Listening on" line goes to ``bound``, the rest is dropped."""
    with stream:
        for line in stream:
            found = _LISTENING.search(line)
            if found and bound.empty():
                bound.put(int(found.group(1)))


@dataclass(frozen=True)
class AnvilSettings:
    """How to start a local Anvil node."""

    port: int = 0  # 0: pick a free port
    chain_id: int = DEFAULT_CHAIN_ID
    accounts: int = 20
    balance_eth: int = 10_000
    block_time: float | None = None  # None: mine a block per transaction
    mnemonic: str = DEFAULT_MNEMONIC
    gas_limit: int = 60_000_000
    startup_timeout_s: float = 20.0
    #: Fork the chain at this JSON-RPC URL (its latest block) instead of starting empty.
    fork_url: str | None = None
    #: Accept unsigned transactions from any address (for dry runs on a fork).
    auto_impersonate: bool = False


class AnvilNode:
    """A running Anvil process; use as a context manager or call start()/stop()."""

    def __init__(self, settings: AnvilSettings = AnvilSettings()) -> None:
        self.settings = settings
        #: The node's port: the settings' or, for 0, the one Anvil bound (known once started).
        self.port = settings.port
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def rpc_url(self) -> str:
        """HTTP JSON-RPC endpoint of the node."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> AnvilNode:
        """Start Anvil and wait until it answers JSON-RPC."""
        s = self.settings
        command = [
            str(anvil_binary()),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--chain-id",
            str(s.chain_id),
            "--accounts",
            str(s.accounts),
            "--balance",
            str(s.balance_eth),
            "--mnemonic",
            s.mnemonic,
            "--gas-limit",
            str(s.gas_limit),
            "--hardfork",
            "prague",
        ]
        if s.block_time is not None:
            command += ["--block-time", str(s.block_time)]
        if s.fork_url is not None:
            command += ["--fork-url", s.fork_url, "--no-storage-caching"]
        if s.auto_impersonate:
            command += ["--auto-impersonate"]
        log.info("starting anvil on port %s", self.port or "of its choice")
        # Not --silent: the port comes from Anvil's own "Listening on" line. Picking a free port here and handing
        # it over left a gap in which another process (a parallel test worker's Anvil) could bind it, and this
        # node's requests would then reach that one. Its output, a line per request, is read and dropped.
        self._process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # a Ctrl-C in the terminal reaches us, and we stop the node
        )
        bound: queue.Queue[int] = queue.Queue()
        threading.Thread(target=_read_port, args=(self._process.stdout, bound), daemon=True).start()
        deadline = time.monotonic() + s.startup_timeout_s
        listening = False
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                stderr = self._process.stderr.read().decode(errors="replace") if self._process.stderr else ""
                hint = None
                if "address already in use" in stderr.lower():
                    hint = f"another process listens on port {s.port}: pass another port, or 0 to let Anvil choose"
                raise NodeError(f"anvil exited with status {self._process.returncode}: {stderr.strip()}", hint=hint)
            if not listening:
                try:
                    self.port = bound.get(timeout=0.05)
                    listening = True
                except queue.Empty:
                    continue
            if self._answers():
                return self
            time.sleep(0.05)
        self.stop()
        where = self.rpc_url if listening else "any port"
        raise NodeError(f"anvil did not answer on {where} within {s.startup_timeout_s:.0f} s")

    def _answers(self) -> bool:
        import json
        import urllib.request

        request = urllib.request.Request(
            self.rpc_url,
            data=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []}).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=0.5) as response:
                return response.status == 200
        except OSError:
            return False

    def stop(self) -> None:
        """Stop the node (SIGTERM, then SIGKILL after 5 s)."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        except ProcessLookupError:
            pass
        if process.stderr:
            process.stderr.close()

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def chain_id(self) -> int:
        return self.settings.chain_id

    def web3(self) -> Web3:
        """A web3.py client connected to this node."""
        return http_web3(self.rpc_url)

    def dev_account(self, index: int = 0) -> LocalAccount:
        """Public test account ``index`` of the node's mnemonic (funded with ``balance_eth``)."""
        if not 0 <= index < self.settings.accounts:
            raise NodeError(f"the node has {self.settings.accounts} accounts, not an account {index}")
        return mnemonic_account(self.settings.mnemonic, index)

    def __enter__(self) -> AnvilNode:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


class ChainNode(Protocol):
    """What FedChain needs of a local chain: Anvil and the in-process chain both provide it."""

    #: The HTTP JSON-RPC endpoint, or None for a chain other processes cannot reach.
    rpc_url: str | None

    @property
    def chain_id(self) -> int: ...

    @property
    def running(self) -> bool: ...

    def start(self) -> ChainNode: ...

    def stop(self) -> None: ...

    def web3(self) -> Web3: ...

    def dev_account(self, index: int = 0) -> LocalAccount: ...


class InProcessChain:
    """An in-process chain (eth-tester on py-evm): no node, no port, about 30 ms per transaction.

    It only lives as long as the Python process and cannot be reached by other
    processes (``rpc_url`` is None). Reverts surface from eth-tester rather than
    JSON-RPC; the transactor decodes both.
    """

    rpc_url: str | None = None
    #: eth-tester's test accounts hold the private keys 1, 2, 3, ... (public, never for real funds).
    ACCOUNTS = 10

    def __init__(self) -> None:
        self._w3: Web3 | None = None

    def start(self) -> InProcessChain:
        try:
            from eth_tester import EthereumTester, PyEVMBackend
            from web3 import EthereumTesterProvider, Web3
        except ImportError as err:
            raise NodeError(
                f"the in-process chain needs eth-tester with py-evm: {err}",
                hint="install the test extras: pip install -e '.[test]'",
            ) from err
        self._w3 = Web3(EthereumTesterProvider(EthereumTester(PyEVMBackend())))
        return self

    def stop(self) -> None:
        self._w3 = None

    @property
    def running(self) -> bool:
        return self._w3 is not None

    @property
    def chain_id(self) -> int:
        return int(self.web3().eth.chain_id)

    def web3(self) -> Web3:
        if self._w3 is None:
            raise NodeError("the in-process chain is not started", hint="call start() or use it as a context manager")
        return self._w3

    def dev_account(self, index: int = 0) -> LocalAccount:
        """Test account ``index``: eth-tester funds the keys 1, 2, 3, ..."""
        from eth_account import Account

        if not 0 <= index < self.ACCOUNTS:
            raise NodeError(f"the in-process chain has {self.ACCOUNTS} accounts, not an account {index}")
        return Account.from_key((index + 1).to_bytes(32, "big"))

    def __enter__(self) -> InProcessChain:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def mnemonic_account(mnemonic: str, index: int) -> LocalAccount:
    """Account ``index`` of a BIP-39 mnemonic on Ethereum's standard path m/44'/60'/0'/0/index."""
    from eth_account import Account

    Account.enable_unaudited_hdwallet_features()
    return Account.from_mnemonic(mnemonic, account_path=f"m/44'/60'/0'/0/{index}")


def http_web3(rpc_url: str, *, timeout_s: float = RPC_TIMEOUT_S, retry: RetrySettings | None = None) -> Web3:
    """A web3 client over HTTP that retries a failing endpoint within ``retry``, then raises RpcUnavailable.

    ``retry`` defaults to :class:`~fedchain.chain.rpc.RetrySettings`' defaults.
    """
    from web3 import Web3

    from fedchain.chain.rpc import RetryingHTTPProvider, RetrySettings

    return Web3(RetryingHTTPProvider(rpc_url, timeout_s=timeout_s, retry=retry or RetrySettings()))


def connect(
    rpc_url: str, *, chain_id: int | None = None, timeout_s: float = 10.0, retry: RetrySettings | None = None
) -> Web3:
    """A web3 client for the node at ``rpc_url``, checked to answer (and to serve ``chain_id`` when given).

    The first contact is retried only for FIRST_CONTACT_RETRY_S, so that a
    wrong URL is reported within seconds while an endpoint that answers one
    request in five with HTTP 503 still connects; the returned client retries
    failures within ``retry``.

    Raises :class:`~fedchain.errors.ChainError` for a URL that is not HTTP(S),
    a node that does not answer within ``timeout_s``, and a chain id other than
    the expected one; nothing is sent in any of these cases.
    """
    if not rpc_url.startswith(("http://", "https://")):
        raise ChainError(f"--rpc-url {rpc_url!r} is not an HTTP(S) URL", hint="pass a URL like http://127.0.0.1:8545")
    from fedchain.chain.rpc import RetrySettings

    w3 = http_web3(rpc_url, timeout_s=timeout_s, retry=RetrySettings(total_s=FIRST_CONTACT_RETRY_S))
    try:
        actual = int(w3.eth.chain_id)
    except Exception as err:  # any transport failure means "unreachable"
        raise ChainError(
            f"no Ethereum node answers at {rpc_url} ({type(err).__name__})",
            hint="start one (`fedchain chain start` prints its URL) or fix --rpc-url",
        ) from err
    if chain_id is not None and actual != chain_id:
        raise ChainError(
            f"the node at {rpc_url} serves chain id {actual}, not the expected {chain_id}",
            hint="pass the --chain-id of the network behind that URL, or the URL of the network you meant",
        )
    return http_web3(rpc_url, retry=retry)  # the short timeout was for the first contact only
