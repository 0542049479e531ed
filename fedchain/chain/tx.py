"""Sending transactions: one small transactor that signs, prices, sends, waits and decodes reverts.

:class:`Transactor` is the only place FedChain sends a transaction. It signs
with a local key, fills the nonce, estimates gas (a revert found there is
raised before anything is sent), prices the transaction with EIP-1559 fees,
refuses when the account cannot pay, waits for the receipt and for K
confirmations, and turns every revert into the exception class of the
contract's custom error (through an :class:`~fedchain.chain.abi.AbiRegistry`).
Calls (``eth_call``) go through it too, so a failed view raises the same
exceptions.

>>> tx = Transactor(w3, account, registry)                     # doctest: +SKIP
>>> receipt = tx.send(address, calldata, value=10**18)         # doctest: +SKIP
>>> receipt.events                                              # doctest: +SKIP
(Stored(block_number=2, log_index=0, ...),)
"""

from __future__ import annotations

import ast
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from eth_account.signers.local import LocalAccount
from eth_utils import to_checksum_address
from web3 import Web3
from web3.exceptions import ContractLogicError, TimeExhausted, Web3RPCError

from fedchain.chain.abi import AbiRegistry, ChainEvent, E, RevertReason
from fedchain.errors import ChainError, ContractRevert, InsufficientFunds
from fedchain.units import ether

log = logging.getLogger(__name__)

#: Tip per gas when the node cannot suggest one (1 gwei).
DEFAULT_PRIORITY_FEE_WEI = 10**9


@dataclass(frozen=True)
class TxSettings:
    """How the transactor prices and waits for transactions."""

    #: Blocks on top of the transaction's block before :meth:`Transactor.send` returns (0: the receipt suffices).
    confirmations: int = 0
    #: Gas limit = estimate * margin: state can change between estimate and inclusion.
    gas_margin: float = 1.25
    #: Tip per gas in wei; None asks the node (eth_maxPriorityFeePerGas).
    priority_fee_wei: int | None = None
    #: Max fee per gas = base_fee_factor * latest base fee + tip: survives that many full blocks of base-fee growth.
    base_fee_factor: int = 2
    #: How long to wait for a receipt, then for the confirmations.
    timeout_s: float = 120.0
    #: How often to poll the node while waiting.
    poll_interval_s: float = 0.05

    def __post_init__(self) -> None:
        if self.confirmations < 0:
            raise ValueError(f"confirmations must be >= 0, got {self.confirmations}")
        if self.gas_margin < 1.0:
            raise ValueError(f"gas_margin must be >= 1, got {self.gas_margin}")


@dataclass(frozen=True)
class Receipt:
    """A mined, successful transaction."""

    transaction_hash: str
    block_number: int
    gas_used: int
    #: Wei paid per unit of gas.
    effective_gas_price: int
    #: The created contract, for deployments.
    contract_address: str | None
    #: The known events the transaction emitted, in log order.
    events: tuple[ChainEvent, ...]

    @property
    def fee_wei(self) -> int:
        """What the sender paid for gas."""
        return self.gas_used * self.effective_gas_price

    def events_of(self, cls: type[E]) -> tuple[E, ...]:
        """The emitted events of type ``cls``."""
        return tuple(e for e in self.events if isinstance(e, cls))


class Transactor:
    """Signs and sends transactions from one account, decoding reverts with ``registry``."""

    def __init__(
        self,
        w3: Web3,
        account: LocalAccount,
        registry: AbiRegistry | None = None,
        settings: TxSettings = TxSettings(),
    ) -> None:
        self.w3 = w3
        self.account = account
        self.registry = registry or AbiRegistry()
        self.settings = settings
        self._chain_id: int | None = None
        self._next_nonce = 0
        self._lock = threading.Lock()

    @property
    def address(self) -> str:
        """The sending account's checksum address."""
        return self.account.address

    @property
    def chain_id(self) -> int:
        if self._chain_id is None:
            self._chain_id = int(self.w3.eth.chain_id)
        return self._chain_id

    # ------------------------------------------------------------------ reads

    def call(self, to: str, data: bytes, *, value: int = 0, block: int | str = "latest") -> bytes:
        """``eth_call`` from this account; a revert raises its decoded exception."""
        request = {"from": self.address, "to": to_checksum_address(to), "data": data, "value": value}
        try:
            return bytes(self.w3.eth.call(request, block))
        except Exception as err:  # noqa: BLE001 - classified below, re-raised if not a revert
            raise self._as_revert(err) from None

    def estimate_gas(self, to: str | None, data: bytes, *, value: int = 0) -> int:
        """Gas the transaction would use now; a revert raises its decoded exception."""
        request: dict[str, Any] = {"from": self.address, "data": data, "value": value}
        if to is not None:
            request["to"] = to_checksum_address(to)
        try:
            return int(self.w3.eth.estimate_gas(request))
        except Exception as err:  # noqa: BLE001
            raise self._as_revert(err) from None

    def fees(self) -> dict[str, int]:
        """EIP-1559 fee fields for a transaction sent now (``gasPrice`` on chains without a base fee)."""
        return current_fees(self.w3, self.settings)

    # ------------------------------------------------------------------ writes

    def send(self, to: str | None, data: bytes, *, value: int = 0, gas: int | None = None) -> Receipt:
        """Sign, send and wait for one transaction (``to=None`` creates a contract).

        Raises the decoded revert (before sending when gas estimation reverts),
        :class:`~fedchain.errors.InsufficientFunds` when the account cannot pay
        (nothing is sent), and :class:`~fedchain.errors.ChainError` when no
        receipt or confirmation arrives within the timeout.
        """
        if value:  # the node refuses to estimate gas for a value the account lacks, and says only that
            self.require_balance(value, what="the value sent")
        latest = self.w3.eth.get_block("latest")
        if gas is None:
            estimate = self.estimate_gas(to, data, value=value)
            gas = min(int(estimate * self.settings.gas_margin), max(estimate, int(latest["gasLimit"])))
        fees = current_fees(self.w3, self.settings, latest)
        price = max_fee_per_gas(fees)
        self.require_balance(gas * price + value, what=f"a transaction of {gas} gas at the maximum fee plus {value} wei of value")
        with self._lock:
            nonce = max(self._next_nonce, int(self.w3.eth.get_transaction_count(self.address, "pending")))
            tx: dict[str, Any] = {
                "chainId": self.chain_id, "nonce": nonce, "from": self.address,
                "data": data, "value": value, "gas": gas, **fees,
            }
            if to is not None:
                tx["to"] = to_checksum_address(to)
            signed = self.account.sign_transaction(tx)
            try:
                tx_hash = self.w3.eth.send_raw_transaction(signed.raw_transaction)
            except Exception as err:  # noqa: BLE001
                raise self._as_send_error(err, gas * price + value) from None
            self._next_nonce = nonce + 1
        log.debug("sent %s (nonce %d, gas %d)", tx_hash.hex(), nonce, gas)
        return self._wait(tx, bytes(tx_hash))

    def deploy(self, bytecode: str | bytes, constructor_args: bytes = b"", *, value: int = 0) -> Receipt:
        """Create a contract from creation ``bytecode`` followed by ABI-encoded ``constructor_args``."""
        code = bytes.fromhex(bytecode.removeprefix("0x")) if isinstance(bytecode, str) else bytes(bytecode)
        return self.send(None, code + constructor_args, value=value)

    def require_balance(self, wei: int, *, what: str) -> None:
        """Raise InsufficientFunds when this account holds less than ``wei``."""
        balance = int(self.w3.eth.get_balance(self.address))
        if balance < wei:
            raise InsufficientFunds(
                f"account {self.address} holds {balance} wei ({ether(balance)} ether) "
                f"but {what} needs {wei} wei ({ether(wei)} ether)",
            )

    # ------------------------------------------------------------------ waiting

    def _wait(self, tx: Mapping[str, Any], tx_hash: bytes) -> Receipt:
        s = self.settings
        try:
            raw = self.w3.eth.wait_for_transaction_receipt(tx_hash, timeout=s.timeout_s, poll_latency=s.poll_interval_s)
        except TimeExhausted:
            raise ChainError(
                f"no receipt for transaction 0x{tx_hash.hex()} within {s.timeout_s:.0f} s",
                hint="the node may not be mining or the fee is too low; check the node, then retry",
            ) from None
        if int(raw["status"]) != 1:
            raise self._replay_failure(tx, raw)
        if s.confirmations:
            raw = self._confirm(tx_hash, raw)
        return Receipt(
            transaction_hash="0x" + tx_hash.hex(),
            block_number=int(raw["blockNumber"]),
            gas_used=int(raw["gasUsed"]),
            effective_gas_price=int(raw.get("effectiveGasPrice") or 0),
            contract_address=raw.get("contractAddress"),
            events=tuple(self.registry.decode_logs(raw["logs"])),
        )

    def _confirm(self, tx_hash: bytes, raw: Mapping[str, Any]) -> Mapping[str, Any]:
        """Wait until ``confirmations`` blocks sit on top of the transaction's block and it is still there."""
        s = self.settings
        target = int(raw["blockNumber"]) + s.confirmations
        deadline = time.monotonic() + s.timeout_s
        while int(self.w3.eth.block_number) < target:
            if time.monotonic() > deadline:
                raise ChainError(
                    f"transaction 0x{tx_hash.hex()} has fewer than {s.confirmations} confirmations after {s.timeout_s:.0f} s",
                    hint="the chain is not producing blocks (an automining dev node?); lower --confirmations",
                )
            time.sleep(max(s.poll_interval_s, 0.05))
        final = self.w3.eth.get_transaction_receipt(tx_hash)
        if final is None or final["blockHash"] != raw["blockHash"]:
            raise ChainError(f"transaction 0x{tx_hash.hex()} was reorganised out of its block", hint="send it again")
        return final

    # ------------------------------------------------------------------ errors

    def _replay_failure(self, tx: Mapping[str, Any], raw: Mapping[str, Any]) -> ContractRevert:
        """The decoded revert of a mined, failed transaction: replayed as eth_call on its parent block."""
        request = {k: tx[k] for k in ("from", "to", "data", "value", "gas") if k in tx}
        try:
            self.w3.eth.call(request, int(raw["blockNumber"]) - 1)
        except Exception as err:  # noqa: BLE001
            revert = self._as_revert(err)
            if isinstance(revert, ContractRevert):
                return revert
        return ContractRevert(
            f"transaction 0x{bytes(raw['transactionHash']).hex()} reverted in block {raw['blockNumber']} "
            f"(used {raw['gasUsed']} of {tx['gas']} gas) and the replay does not say why",
            hint="it probably ran out of gas or depended on a transaction before it in the same block; retry",
        )

    def _as_revert(self, err: Exception) -> Exception:
        """Turn a node's revert into the decoded exception; anything else into a ChainError."""
        data = revert_data(err)
        if isinstance(data, ContractRevert):
            return data
        if data is not None:
            return self.registry.decode_revert(data)
        if isinstance(err, ChainError):
            return err
        return ChainError(f"the node refused the request or could not be reached: {err}")

    def _as_send_error(self, err: Exception, needed_wei: int) -> Exception:
        message = str(err)
        if "insufficient funds" in message.lower():
            return InsufficientFunds(f"account {self.address} cannot pay {needed_wei} wei: {message}")
        return self._as_revert(err)


def current_fees(
    w3: Web3, settings: TxSettings = TxSettings(), latest: Mapping[str, Any] | None = None
) -> dict[str, int]:
    """EIP-1559 fee fields (``maxFeePerGas``, ``maxPriorityFeePerGas``) for a transaction sent now.

    On chains without a base fee: ``gasPrice``. ``latest`` is the latest block
    when the caller has fetched it already.
    """
    latest = latest if latest is not None else w3.eth.get_block("latest")
    tip = settings.priority_fee_wei
    if tip is None:
        try:
            tip = int(w3.eth.max_priority_fee)
        except Exception:  # noqa: BLE001 - nodes without eth_maxPriorityFeePerGas
            tip = DEFAULT_PRIORITY_FEE_WEI
    base = latest.get("baseFeePerGas")
    if base is None:
        return {"gasPrice": int(w3.eth.gas_price)}
    return {"maxFeePerGas": settings.base_fee_factor * int(base) + tip, "maxPriorityFeePerGas": tip}


def max_fee_per_gas(fees: Mapping[str, int]) -> int:
    """The most a transaction priced with ``fees`` pays per gas."""
    return fees.get("maxFeePerGas", fees.get("gasPrice", 0))


def revert_data(err: BaseException) -> bytes | ContractRevert | None:
    """The revert data carried by a node's error (web3 over JSON-RPC, or eth-tester in process), if any."""
    if isinstance(err, ContractLogicError):
        data = err.data
        if isinstance(data, str) and data.startswith("0x"):
            return bytes.fromhex(data[2:])
        if isinstance(data, (bytes, bytearray)):
            return bytes(data)
        return b""
    if isinstance(err, Web3RPCError):
        response = err.rpc_response or {}
        data = (response.get("error") or {}).get("data") if isinstance(response, Mapping) else None
        if isinstance(data, str) and data.startswith("0x") and "revert" in str(err).lower():
            return bytes.fromhex(data[2:])
        return None
    if type(err).__name__ == "TransactionFailed":  # eth-tester: "execution reverted: b'...'" or the decoded reason
        message = str(err.args[0]) if err.args else ""
        detail = message.removeprefix("execution reverted: ")
        if detail.startswith(("b'", 'b"')):
            try:
                return bytes(ast.literal_eval(detail))
            except (ValueError, SyntaxError):
                return b""
        if detail and detail != message:
            return RevertReason(detail)
        return b""
    return None
