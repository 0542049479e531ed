"""A local Anvil chain node: start on a free port, wait until it answers, stop cleanly.

>>> with AnvilNode() as node:          # doctest: +SKIP
...     w3 = node.web3()
...     w3.eth.block_number
0
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from fedchain.errors import ChainError

log = logging.getLogger(__name__)

PROJECT_ROOT = Path(__file__).resolve().parents[2]
#: Anvil's default mnemonic: its accounts are public test keys, never for real funds.
DEFAULT_MNEMONIC = "test test test test test test test test test test test junk"
DEFAULT_CHAIN_ID = 31337


class NodeError(ChainError):
    """The local chain node cannot be started or does not answer."""

    hint = "run `make setup` to install Anvil, or pass --rpc-url to use a running node"


def anvil_binary() -> Path:
    """The project's pinned Anvil (node_modules), else one on PATH."""
    local = PROJECT_ROOT / "node_modules" / ".bin" / "anvil"
    if local.exists():
        return local
    found = shutil.which("anvil")
    if found:
        return Path(found)
    raise NodeError("Anvil is not installed (looked in node_modules/.bin and on PATH)")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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


class AnvilNode:
    """A running Anvil process; use as a context manager or call start()/stop()."""

    def __init__(self, settings: AnvilSettings = AnvilSettings()) -> None:
        self.settings = settings
        self.port = settings.port or free_port()
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def rpc_url(self) -> str:
        """HTTP JSON-RPC endpoint of the node."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "AnvilNode":
        """Start Anvil and wait until it answers JSON-RPC."""
        s = self.settings
        command = [
            str(anvil_binary()),
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--chain-id", str(s.chain_id),
            "--accounts", str(s.accounts),
            "--balance", str(s.balance_eth),
            "--mnemonic", s.mnemonic,
            "--gas-limit", str(s.gas_limit),
            "--hardfork", "prague",
            "--silent",
        ]
        if s.block_time is not None:
            command += ["--block-time", str(s.block_time)]
        log.info("starting anvil on port %d", self.port)
        self._process = subprocess.Popen(
            command,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,  # a Ctrl-C in the terminal reaches us, and we stop the node
        )
        deadline = time.monotonic() + s.startup_timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                stderr = self._process.stderr.read().decode(errors="replace") if self._process.stderr else ""
                raise NodeError(f"anvil exited with status {self._process.returncode}: {stderr.strip()}")
            if self._answers():
                return self
            time.sleep(0.05)
        self.stop()
        raise NodeError(f"anvil did not answer on {self.rpc_url} within {s.startup_timeout_s:.0f} s")

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

    def web3(self):
        """A web3.py client connected to this node."""
        from web3 import Web3

        return Web3(Web3.HTTPProvider(self.rpc_url, request_kwargs={"timeout": 60}))

    def __enter__(self) -> "AnvilNode":
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
