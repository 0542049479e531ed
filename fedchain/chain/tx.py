"""Sending transactions: one small transactor that signs, prices, sends, waits and decodes reverts.

:class:`Transactor` is the only place FedChain sends a transaction. It signs
with a local key, numbers its transactions itself (so that several can be in
flight at once), estimates gas (a revert found there is raised before anything
is sent), prices the transaction with EIP-1559 fees up to the operator's cap,
refuses when the account cannot pay, waits for the receipt and for K
confirmations, re-signs a transaction that stays unmined with higher fees, and
turns every revert into the exception class of the contract's custom error
(through an :class:`~fedchain.chain.abi.AbiRegistry`). Calls (``eth_call``) go
through it too, so a failed view raises the same exceptions.

>>> tx = Transactor(w3, account, registry)                     # doctest: +SKIP
>>> receipt = tx.send(address, calldata, value=10**18)         # doctest: +SKIP
>>> receipt.events                                              # doctest: +SKIP
(Stored(block_number=2, log_index=0, ...),)
>>> pending = [tx.submit(address, c) for c in calls]           # doctest: +SKIP
>>> receipts = [tx.wait(p) for p in pending]                   # all in the same block  # doctest: +SKIP
"""

from __future__ import annotations

import ast
import enum
import logging
import math
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from eth_account.signers.local import LocalAccount
from eth_utils import to_checksum_address
from web3 import Web3
from web3.exceptions import ContractLogicError, TransactionNotFound, Web3RPCError

from fedchain.chain.abi import AbiRegistry, ChainEvent, E, RevertReason
from fedchain.errors import ChainError, ContractRevert, FeeCapExceeded, InsufficientFunds
from fedchain.units import ether

log = logging.getLogger(__name__)

#: Tip per gas when the node cannot suggest one (1 gwei).
DEFAULT_PRIORITY_FEE_WEI = 10**9
#: The smallest fee bump a replacement may use: geth refuses replacements below +10%, and integer rounding eats some.
MIN_REPLACEMENT_BUMP = 0.125
#: How often a send whose nonce turned out taken is tried again with the node's count.
NONCE_RESYNC_ATTEMPTS = 3


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
    #: The most this account ever offers per gas (wei), whatever the chain charges: the operator's spending
    #: limit. None: no cap. While the base fee is above it, transactions wait (it may fall) up to ``timeout_s``.
    max_fee_per_gas_cap_wei: int | None = None
    #: Blocks a transaction may stay unmined before it is re-signed (same nonce) with higher fees.
    replace_after_blocks: int = 3
    #: How much a replacement raises both fees, as a fraction (0.125: +12.5%; at least that, see MIN_REPLACEMENT_BUMP).
    replacement_fee_bump: float = MIN_REPLACEMENT_BUMP
    #: How long to wait for a receipt (and, at submit, for a base fee under the cap), then for the confirmations.
    timeout_s: float = 120.0
    #: How often to poll the node while waiting.
    poll_interval_s: float = 0.05

    def __post_init__(self) -> None:
        if self.confirmations < 0:
            raise ValueError(f"confirmations must be >= 0, got {self.confirmations}")
        if self.gas_margin < 1.0:
            raise ValueError(f"gas_margin must be >= 1, got {self.gas_margin}")
        if self.max_fee_per_gas_cap_wei is not None and self.max_fee_per_gas_cap_wei < 1:
            raise ValueError(f"max_fee_per_gas_cap_wei must be >= 1 wei or None, got {self.max_fee_per_gas_cap_wei}")
        if self.replace_after_blocks < 1:
            raise ValueError(f"replace_after_blocks must be >= 1, got {self.replace_after_blocks}")
        if self.replacement_fee_bump < MIN_REPLACEMENT_BUMP:
            raise ValueError(
                f"replacement_fee_bump must be >= {MIN_REPLACEMENT_BUMP} (nodes refuse smaller bumps), "
                f"got {self.replacement_fee_bump}"
            )


@dataclass(frozen=True)
class Fees:
    """The price of one transaction: EIP-1559 (a max fee and a tip) or, on chains without a base fee, a gas price."""

    #: The most paid per gas (wei): ``maxFeePerGas``, or ``gasPrice`` for a legacy transaction.
    max_fee_per_gas: int
    #: The tip per gas (wei); None for a legacy transaction.
    priority_fee_per_gas: int | None

    @classmethod
    def of(cls, fields: Mapping[str, int]) -> Fees:
        """From the fee fields of a transaction (as :func:`current_fees` returns them)."""
        return cls(max_fee_per_gas(fields), fields.get("maxPriorityFeePerGas"))

    def fields(self) -> dict[str, int]:
        """The transaction's fee fields."""
        if self.priority_fee_per_gas is None:
            return {"gasPrice": self.max_fee_per_gas}
        return {"maxFeePerGas": self.max_fee_per_gas, "maxPriorityFeePerGas": self.priority_fee_per_gas}

    def capped(self, cap_wei: int | None) -> Fees:
        """These fees held to ``cap_wei`` per gas (the tip never above the max fee)."""
        if cap_wei is None or self.max_fee_per_gas <= cap_wei:
            return self
        tip = None if self.priority_fee_per_gas is None else min(self.priority_fee_per_gas, cap_wei)
        return Fees(cap_wei, tip)

    def raised(self, fraction: float) -> Fees:
        """Both fees raised by ``fraction`` (at least 1 wei each): the least a replacement may offer."""

        def up(wei: int) -> int:
            return max(math.ceil(wei * (1 + fraction)), wei + 1)

        tip = None if self.priority_fee_per_gas is None else up(self.priority_fee_per_gas)
        return Fees(up(self.max_fee_per_gas), tip)

    def at_least(self, other: Fees) -> Fees:
        """Each fee the higher of these and ``other``'s."""
        if self.priority_fee_per_gas is None:
            return Fees(max(self.max_fee_per_gas, other.max_fee_per_gas), None)
        tip = max(self.priority_fee_per_gas, other.priority_fee_per_gas or 0)
        return Fees(max(self.max_fee_per_gas, other.max_fee_per_gas, tip), tip)

    def covers(self, other: Fees) -> bool:
        """Whether both fees are at least ``other``'s."""
        return self.max_fee_per_gas >= other.max_fee_per_gas and (self.priority_fee_per_gas or 0) >= (
            other.priority_fee_per_gas or 0
        )


@dataclass(frozen=True)
class PendingTx:
    """A signed, sent transaction not yet known to be mined: what :meth:`Transactor.wait` and a replacement need."""

    #: The hash of this version (0x-hex).
    hash: str
    nonce: int
    #: The callee; None for a contract creation.
    to: str | None
    data: bytes
    value: int
    gas: int
    fees: Fees
    #: The chain's head when this version was sent: replacement counts blocks from it.
    sent_at_block: int
    #: Hashes of the earlier versions (same nonce, lower fees) it replaced, newest first; a receipt for any counts.
    replaces: tuple[str, ...] = ()

    @property
    def hashes(self) -> tuple[str, ...]:
        """Every version's hash, newest first."""
        return (self.hash, *self.replaces)


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


class SendAnswer(enum.Enum):
    """What a node's refusal of ``eth_sendRawTransaction`` means for the sender."""

    #: The node holds this very transaction already (or has mined it): a resend after a lost response.
    KNOWN = "known"
    #: The nonce is used: by a mined transaction, or by a pooled one this fee cannot replace.
    NONCE_TAKEN = "nonce taken"
    #: The max fee is below the base fee of the block being built.
    BELOW_BASE_FEE = "below base fee"
    #: Anything else: a real error.
    OTHER = "other"

    @classmethod
    def of(cls, err: BaseException) -> SendAnswer:
        message = str(err).lower()
        if "already known" in message or "already imported" in message:
            return cls.KNOWN
        if "nonce too low" in message or "replacement transaction underpriced" in message:
            return cls.NONCE_TAKEN
        if "less than block base fee" in message:
            return cls.BELOW_BASE_FEE
        return cls.OTHER


class Transactor:
    """Signs and sends transactions from one account, decoding reverts with ``registry``.

    Thread-safe: the nonce counter is taken under a lock, so several threads
    (or one thread with several :meth:`submit` calls) keep transactions in
    flight without clashing. Other senders using the same key are tolerated:
    a nonce found taken resynchronises the counter from the node.
    """

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
        #: The nonce of the next new transaction; None until first needed (then the node's pending count).
        self._next_nonce: int | None = None
        #: Nonce -> the hash last sent with it, for nonces not known to be mined (see _close_nonce_gap).
        self._sent: dict[int, str] = {}
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
        """EIP-1559 fee fields for a transaction sent now (``gasPrice`` on chains without a base fee), capped."""
        return Fees.of(current_fees(self.w3, self.settings)).capped(self.settings.max_fee_per_gas_cap_wei).fields()

    # ------------------------------------------------------------------ writes

    def send(self, to: str | None, data: bytes, *, value: int = 0, gas: int | None = None) -> Receipt:
        """Sign, send and wait for one transaction (``to=None`` creates a contract): ``wait(submit(...))``.

        Raises the decoded revert (before sending when gas estimation reverts),
        :class:`~fedchain.errors.InsufficientFunds` when the account cannot pay
        (nothing is sent), :class:`~fedchain.errors.FeeCapExceeded` when the base
        fee stays above the cap, and :class:`~fedchain.errors.ChainError` when
        no receipt or confirmation arrives within the timeout.
        """
        return self.wait(self.submit(to, data, value=value, gas=gas))

    def submit(self, to: str | None, data: bytes, *, value: int = 0, gas: int | None = None) -> PendingTx:
        """Sign and send one transaction with the next nonce of this account, and return without waiting.

        Transactions submitted back to back share a block. A revert found by the
        gas estimate, missing funds and a base fee above the cap for the whole
        timeout raise here, as for :meth:`send`; nothing is sent then.
        """
        if value:  # the node refuses to estimate gas for a value the account lacks, and says only that
            self.require_balance(value, what="the value sent")
        deadline = time.monotonic() + self.settings.timeout_s
        latest = self._latest_under_cap(deadline)
        if gas is None:
            estimate = self.estimate_gas(to, data, value=value)
            gas = min(int(estimate * self.settings.gas_margin), max(estimate, int(latest["gasLimit"])))
        while True:
            fees = self._market_fees(latest)
            needed = gas * fees.max_fee_per_gas + value
            self.require_balance(
                needed, what=f"a transaction of {gas} gas at the maximum fee plus {value} wei of value"
            )
            with self._lock:
                pending = self._send_new(to, data, value, gas, fees, int(latest["number"]), needed)
            if pending is not None:
                return pending
            # The base fee rose past our price between pricing and sending: price again.
            time.sleep(self.settings.poll_interval_s)
            latest = self._latest_under_cap(deadline)
            if time.monotonic() > deadline:
                raise self._priced_out(latest, fees)

    def wait(self, pending: PendingTx) -> Receipt:
        """Wait for ``pending`` (any of its versions) to be mined and confirmed; raise what :meth:`send` raises.

        A transaction still unmined ``replace_after_blocks`` blocks after it was
        sent is re-signed with the same nonce and higher fees (never above the
        cap), so that a rising base fee does not strand it.
        """
        s = self.settings
        deadline = time.monotonic() + s.timeout_s
        checked_block = -1
        while True:
            head = int(self.w3.eth.block_number)
            if head != checked_block:  # a receipt can only appear with a new block
                checked_block = head
                raw = self._receipt_of_any(pending.hashes)
                if raw is not None:
                    break
                if head >= pending.sent_at_block + s.replace_after_blocks:
                    pending = self.replace(pending)
            if time.monotonic() > deadline:
                raise self._no_receipt(pending)
            time.sleep(s.poll_interval_s)
        if int(raw["status"]) != 1:
            raise self._mined_failure(pending, raw)
        tx_hash = bytes(raw["transactionHash"])
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

    def replace(self, pending: PendingTx) -> PendingTx:
        """Re-sign ``pending`` with the same nonce and fees raised by the bump, at least today's price, at most the cap.

        Returns the new version, which remembers the earlier ones, or ``pending``
        itself when the cap leaves no room for the bump or the node refuses (the
        nonce is mined already: the caller's next receipt lookup finds which
        version). A version whose sending failed is kept as well, since its
        request may have reached the node.
        """
        s = self.settings
        latest = self.w3.eth.get_block("latest")
        head = int(latest["number"])
        least = pending.fees.raised(s.replacement_fee_bump)
        fees = least.at_least(self._market_fees(latest)).capped(s.max_fee_per_gas_cap_wei)
        if not fees.covers(least):
            log.debug("nonce %d: the fee cap leaves no room to replace %s", pending.nonce, pending.hash)
            return replace(pending, sent_at_block=head)
        signed = self._sign(replace(pending, fees=fees))
        newer = replace(
            pending, hash="0x" + bytes(signed.hash).hex(), fees=fees, sent_at_block=head, replaces=pending.hashes
        )
        try:
            answer = self._broadcast(signed, newer)
        except ChainError as err:
            log.warning("nonce %d: sending replacement %s failed: %s", pending.nonce, newer.hash, err)
            return newer
        if answer not in (None, SendAnswer.KNOWN):
            log.debug("nonce %d: replacement of %s not taken (%s)", pending.nonce, pending.hash, answer.value)
            return replace(pending, sent_at_block=head)
        with self._lock:
            self._sent[pending.nonce] = newer.hash
        log.info(
            "nonce %d unmined for %d blocks: replaced %s by %s at %d wei per gas",
            pending.nonce,
            head - pending.sent_at_block,
            pending.hash,
            newer.hash,
            fees.max_fee_per_gas,
        )
        return newer

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

    # ------------------------------------------------------------------ nonces and broadcasting

    def _send_new(
        self, to: str | None, data: bytes, value: int, gas: int, fees: Fees, head: int, needed_wei: int
    ) -> PendingTx | None:
        """Sign with the next nonce and broadcast (under the lock); None when the price fell below the base fee."""
        self._close_nonce_gap()
        for _ in range(NONCE_RESYNC_ATTEMPTS):
            if self._next_nonce is None:
                self._next_nonce = self._node_nonce()
            pending = PendingTx(
                hash="",
                nonce=self._next_nonce,
                to=None if to is None else to_checksum_address(to),
                data=data,
                value=value,
                gas=gas,
                fees=fees,
                sent_at_block=head,
            )
            signed = self._sign(pending)
            pending = replace(pending, hash="0x" + bytes(signed.hash).hex())
            answer = self._broadcast(signed, pending, needed_wei)
            if answer in (None, SendAnswer.KNOWN):
                self._next_nonce = pending.nonce + 1
                self._sent[pending.nonce] = pending.hash
                log.debug("sent %s (nonce %d, gas %d)", pending.hash, pending.nonce, gas)
                return pending
            if answer is SendAnswer.BELOW_BASE_FEE:
                return None
            self._next_nonce = self._node_nonce()
            log.info("nonce %d of %s is taken; resynchronised to %d", pending.nonce, self.address, self._next_nonce)
        raise ChainError(
            f"account {self.address} found its nonce taken {NONCE_RESYNC_ATTEMPTS} times in a row",
            hint="another program is sending from the same key at the same time; give each its own key",
        )

    def _node_nonce(self) -> int:
        return int(self.w3.eth.get_transaction_count(self.address, "pending"))

    def _close_nonce_gap(self) -> None:
        """Go back to the node's next nonce when transactions this account sent are no longer known to it.

        A transaction whose block was reorganised away, or that the pool dropped,
        leaves the local counter ahead of the chain: the next transaction would
        wait forever behind the gap. The node's count (pending transactions
        included) below the counter is checked against the hashes sent for those
        nonces; one the node does not know is gone, and its nonce is used again.
        """
        if self._next_nonce is None:
            return
        node = self._node_nonce()
        for nonce in list(self._sent):
            if nonce < node:
                del self._sent[nonce]  # mined: no longer a gap to watch
        for nonce in range(node, self._next_nonce):
            sent = self._sent.get(nonce)
            if sent is None or self._unknown(sent):
                log.warning(
                    "transactions from nonce %d of %s vanished (reorganised away or dropped); sending from there again",
                    nonce,
                    self.address,
                )
                self._next_nonce = node
                self._sent = {n: h for n, h in self._sent.items() if n < node}
                return

    def _unknown(self, tx_hash: str) -> bool:
        try:
            return self.w3.eth.get_transaction(tx_hash) is None
        except TransactionNotFound:
            return True

    def _sign(self, pending: PendingTx) -> Any:
        tx: dict[str, Any] = {
            "chainId": self.chain_id,
            "nonce": pending.nonce,
            "from": self.address,
            "data": pending.data,
            "value": pending.value,
            "gas": pending.gas,
            **pending.fees.fields(),
        }
        if pending.to is not None:
            tx["to"] = pending.to
        return self.account.sign_transaction(tx)

    def _broadcast(self, signed: Any, pending: PendingTx, needed_wei: int = 0) -> SendAnswer | None:
        """Send the signed transaction; None when the node took it, else why it refused (real errors raise).

        A refusal that says the transaction or its nonce is known is checked
        against the node: when our own hash is there, an earlier attempt whose
        response was lost went through, and it counts as sent.
        """
        try:
            self.w3.eth.send_raw_transaction(signed.raw_transaction)
            return None
        except Exception as err:  # noqa: BLE001 - classified below
            answer = SendAnswer.of(err)
            if answer is SendAnswer.OTHER:
                raise self._as_send_error(err, needed_wei) from None
        if answer in (SendAnswer.KNOWN, SendAnswer.NONCE_TAKEN) and self._known(pending.hash):
            log.debug("%s was already at the node (a resend after a lost response)", pending.hash)
            return SendAnswer.KNOWN
        return SendAnswer.NONCE_TAKEN if answer is SendAnswer.KNOWN else answer

    def _known(self, tx_hash: str) -> bool:
        try:
            return self.w3.eth.get_transaction(tx_hash) is not None
        except TransactionNotFound:
            return False

    # ------------------------------------------------------------------ fees

    def _market_fees(self, latest: Mapping[str, Any]) -> Fees:
        return Fees.of(current_fees(self.w3, self.settings, latest)).capped(self.settings.max_fee_per_gas_cap_wei)

    def _latest_under_cap(self, deadline: float) -> Mapping[str, Any]:
        """The latest block, once its base fee is at most the cap; FeeCapExceeded at ``deadline``."""
        cap = self.settings.max_fee_per_gas_cap_wei
        waiting = False
        while True:
            latest = self.w3.eth.get_block("latest")
            base = latest.get("baseFeePerGas")
            if cap is None or base is None or int(base) <= cap:
                return latest
            if time.monotonic() > deadline:
                raise self._priced_out(latest, Fees(cap, None))
            if not waiting:
                log.warning("base fee %d wei is above the cap of %d wei per gas; waiting for it to fall", base, cap)
                waiting = True
            time.sleep(max(self.settings.poll_interval_s, 0.05))

    def _priced_out(self, latest: Mapping[str, Any], fees: Fees) -> ChainError:
        """The error for a transaction whose price stayed below the base fee for the whole timeout."""
        base = int(latest.get("baseFeePerGas") or 0)
        cap = self.settings.max_fee_per_gas_cap_wei
        waited = f"for {self.settings.timeout_s:.0f} s"
        if cap is not None and base > cap:  # not even the cap would be mined
            return FeeCapExceeded(
                f"the chain's base fee is {base} wei per gas but max_fee_per_gas_cap_wei caps account "
                f"{self.address} at {cap} wei; it did not fall under the cap {waited}",
                base_fee_wei=base,
                cap_wei=cap,
            )
        return ChainError(
            f"the chain's base fee ({base} wei per gas) stayed above the price of {fees.max_fee_per_gas} wei {waited}",
            hint="raise TxSettings.base_fee_factor, or retry when fees have fallen",
        )

    # ------------------------------------------------------------------ waiting

    def _receipt_of_any(self, hashes: tuple[str, ...]) -> Mapping[str, Any] | None:
        for tx_hash in hashes:
            try:
                raw = self.w3.eth.get_transaction_receipt(tx_hash)
            except TransactionNotFound:
                continue
            if raw is not None and raw.get("blockNumber") is not None:
                return raw
        return None

    def _no_receipt(self, pending: PendingTx) -> ChainError:
        latest = self.w3.eth.get_block("latest")
        base = latest.get("baseFeePerGas")
        if base is not None and pending.fees.max_fee_per_gas < int(base):
            return self._priced_out(latest, pending.fees)
        return ChainError(
            f"no receipt for transaction {pending.hash} (nonce {pending.nonce}) within {self.settings.timeout_s:.0f} s",
            hint="the node may not be mining or the fee is too low; check the node, then retry",
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

    def _mined_failure(self, pending: PendingTx, raw: Mapping[str, Any]) -> ContractRevert:
        """The decoded revert of a mined, failed transaction, found where it really ran.

        First the node's trace of the transaction itself (its top-level call's
        revert data); then an ``eth_call`` replay on the parent block, which
        misses reverts caused by transactions before it in the same block; then
        a generic error saying what the trace said (out of gas, ...).
        """
        tx_hash = "0x" + bytes(raw["transactionHash"]).hex()
        data, trace_error = self._traced_revert(tx_hash)
        if data:
            return self.registry.decode_revert(data)
        request: dict[str, Any] = {
            "from": self.address,
            "data": pending.data,
            "value": pending.value,
            "gas": pending.gas,
        }
        if pending.to is not None:
            request["to"] = pending.to
        try:
            self.w3.eth.call(request, int(raw["blockNumber"]) - 1)
        except Exception as err:  # noqa: BLE001
            revert = self._as_revert(err)
            if isinstance(revert, ContractRevert):
                return revert
        why = f": {trace_error}" if trace_error else " and the replay does not say why"
        return ContractRevert(
            f"transaction {tx_hash} reverted in block {raw['blockNumber']} "
            f"(used {raw['gasUsed']} of {pending.gas} gas){why}",
            hint="it probably ran out of gas or depended on a transaction before it in the same block; retry",
        )

    def _traced_revert(self, tx_hash: str) -> tuple[bytes, str]:
        """The revert data and error of the transaction's top-level call, from ``debug_traceTransaction``.

        Empty when the node does not trace (public endpoints often refuse debug_*).
        """
        try:
            response = self.w3.provider.make_request("debug_traceTransaction", [tx_hash, {"tracer": "callTracer"}])
        except Exception as err:  # noqa: BLE001 - tracing is a best effort; the replay follows
            log.debug("debug_traceTransaction(%s) failed: %s", tx_hash, err)
            return b"", ""
        result = response.get("result") if isinstance(response, Mapping) else None
        if not isinstance(result, Mapping):
            return b"", ""
        output = result.get("output") or "0x"
        try:
            data = bytes.fromhex(str(output).removeprefix("0x"))
        except ValueError:
            data = b""
        return data, str(result.get("error") or "")

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
