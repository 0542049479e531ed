"""What FedChain deploys and how it is wired.

Seven contracts, each with the addresses of the others as immutables (no
set-up transaction after deployment, nothing an owner could re-point later):

================  ===========================================================
Treasury          every wei: task pools, claimable balances, ``withdraw``, the sink
TaskRegistry      tasks, parameters, budget, round clock
RoundLedger       clients, round posts (pending), finalisation, settlement
FogAuction        sealed-bid fog auctions, fog commits, slashing
DataHandoff       the hash of each job's data, committed by its client
ArbiterCommittee  the arbiters (M of N), the verdict window, verdict signatures
Disputes          aggregator bonds, challenges, verdicts
================  ===========================================================

They refer to each other in a cycle, so each address is computed before the
contracts exist: a contract created by an account's transaction number
``nonce`` lives at ``keccak256(rlp([sender, nonce]))[12:]``. The recipe sends
the creations with consecutive nonces and checks every address after. The
committee's members, quorum and verdict window, and the sink, are
:class:`ArbiterSettings`: fixed at deployment, like everything else.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import rlp
from eth_utils import keccak, to_canonical_address, to_checksum_address
from web3 import Web3

from fedchain.chain.compile import Artifact, compile_contracts
from fedchain.errors import ConfigError, DeploymentError

log = logging.getLogger(__name__)

#: Contract names in deployment order (the order of the nonces their addresses are computed from).
DEPLOYMENT_ORDER: tuple[str, ...] = (
    "Treasury",
    "TaskRegistry",
    "RoundLedger",
    "FogAuction",
    "DataHandoff",
    "ArbiterCommittee",
    "Disputes",
)

#: Constructor arguments of each contract: the names of the contracts they point at, or (in lower case) a field
#: of :class:`ArbiterSettings`.
CONSTRUCTOR_ARGS: Mapping[str, tuple[str, ...]] = {
    "Treasury": ("TaskRegistry", "RoundLedger", "FogAuction", "Disputes", "sink"),
    "TaskRegistry": ("Treasury", "RoundLedger", "Disputes"),
    "RoundLedger": ("TaskRegistry", "Treasury", "FogAuction", "Disputes"),
    "FogAuction": ("TaskRegistry", "RoundLedger", "Treasury", "Disputes"),
    "DataHandoff": ("RoundLedger", "FogAuction"),
    "ArbiterCommittee": ("members", "quorum", "verdict_window"),
    "Disputes": ("TaskRegistry", "RoundLedger", "FogAuction", "Treasury", "ArbiterCommittee"),
}

#: Where forfeits go by default: the zero address, from which nobody can ever withdraw (burned).
BURN_SINK = "0x0000000000000000000000000000000000000000"
#: The committee's verdict window by default, seconds: a day (ACCOUNTABILITY-NOTES: one to three days for money).
DEFAULT_VERDICT_WINDOW_S = 86_400
#: The most members a committee may have (ArbiterCommittee.MAX_MEMBERS).
MAX_ARBITERS = 31


@dataclass(frozen=True)
class ArbiterSettings:
    """The deployment's arbiter committee and sink, fixed at deployment.

    Attributes:
        members: the committee's addresses (each runs ``fedchain verifier run``).
        quorum: M, the signatures a verdict needs: more than half of the members (None: the smallest majority).
        verdict_window: seconds from a challenge's opening within which its verdict must be submitted.
        sink: where forfeits go that no wronged party is owed (default: the zero address, burned).
    """

    members: tuple[str, ...]
    quorum: int | None = None
    verdict_window: int = DEFAULT_VERDICT_WINDOW_S
    sink: str = BURN_SINK

    def __post_init__(self) -> None:
        from eth_utils import is_address

        n = len(self.members)
        if not 1 <= n <= MAX_ARBITERS:
            raise ConfigError(
                f"the committee needs 1 to {MAX_ARBITERS} members, got {n}",
                hint="name each member with --arbiter ADDRESS",
            )
        bad = [m for m in (*self.members, self.sink) if not is_address(m)]
        if bad:
            raise ConfigError(f"not an address: {bad[0]!r}", hint="give 0x-prefixed 20-byte addresses")
        if len({m.lower() for m in self.members}) != n or BURN_SINK in self.members:
            raise ConfigError("the committee's members must be distinct, non-zero addresses")
        if not n // 2 < self.effective_quorum <= n:
            raise ConfigError(
                f"a quorum of {self.quorum} of {n} members is not a majority",
                hint=f"use {n // 2 + 1} to {n}: two contrary verdicts must never both reach the quorum",
            )
        if self.verdict_window <= 0:
            raise ConfigError(f"the verdict window must be positive, got {self.verdict_window} s")

    @property
    def effective_quorum(self) -> int:
        """M: the quorum given, or the smallest majority of the members."""
        return self.quorum if self.quorum is not None else len(self.members) // 2 + 1

    @classmethod
    def of(
        cls,
        members: Sequence[str],
        *,
        quorum: int | None = None,
        verdict_window: int = DEFAULT_VERDICT_WINDOW_S,
        sink: str = BURN_SINK,
    ) -> ArbiterSettings:
        """Settings with checksummed addresses (a malformed one is left as given, for the check to name it)."""
        from eth_utils import is_address

        def checksummed(address: str) -> str:
            return to_checksum_address(address) if is_address(address) else address

        return cls(tuple(checksummed(m) for m in members), quorum, verdict_window, checksummed(sink))

    def argument(self, name: str) -> Any:
        """The constructor argument ``name`` (a field of these settings)."""
        if name == "members":
            return list(self.members)
        if name == "quorum":
            return self.effective_quorum
        return getattr(self, name)


#: Seconds to wait for a receipt, then for the confirmations.
RECEIPT_TIMEOUT_S = 120.0


def create_address(sender: str, nonce: int) -> str:
    """The address of the contract that ``sender``'s transaction number ``nonce`` creates (CREATE)."""
    return to_checksum_address(keccak(rlp.encode([to_canonical_address(sender), nonce]))[12:])


def planned_addresses(deployer_address: str, first_nonce: int) -> dict[str, str]:
    """Contract name -> the address it will have when deployed from ``first_nonce`` on, in order."""
    return {name: create_address(deployer_address, first_nonce + i) for i, name in enumerate(DEPLOYMENT_ORDER)}


def deploy_fedchain(
    w3: Web3,
    deployer_address: str,
    *,
    arbiters: ArbiterSettings | None = None,
    confirmations: int = 0,
    artifacts: Mapping[str, Artifact] | None = None,
) -> dict[str, str]:
    """Deploy and wire FedChain's contracts; return contract name -> checksum address in deployment order.

    Transactions go out with ``w3.eth.send_transaction`` from ``deployer_address``
    (an unlocked node account, or a web3 signing middleware). The deployer must
    send nothing else until this returns: the addresses depend on its nonces.
    ``arbiters`` fixes the committee and the sink (None: the deployer alone, for a
    throw-away chain).
    """
    arbiters = arbiters or ArbiterSettings.of([deployer_address])
    deployer = to_checksum_address(deployer_address)
    artifacts = artifacts if artifacts is not None else compile_contracts()
    missing = [name for name in DEPLOYMENT_ORDER if name not in artifacts]
    if missing:
        raise DeploymentError(
            f"the compiled artifacts lack {', '.join(missing)}", hint="check contracts/ and recompile"
        )
    first_nonce = int(w3.eth.get_transaction_count(deployer, "pending"))
    planned = planned_addresses(deployer, first_nonce)
    # Every creation is sent before any is awaited: their addresses are known from the nonces, and the
    # constructors only store addresses, so on a chain with a block time they all land in one block.
    sent = []
    for offset, name in enumerate(DEPLOYMENT_ORDER):
        artifact = artifacts[name]
        contract = w3.eth.contract(abi=list(artifact.abi), bytecode=artifact.bytecode)
        args = [planned[arg] if arg in planned else arbiters.argument(arg) for arg in CONSTRUCTOR_ARGS[name]]
        tx: dict[str, Any] = {"from": deployer, "nonce": first_nonce + offset}
        sent.append((name, contract.constructor(*args).transact(tx)))
    for name, tx_hash in sent:
        receipt = _wait(w3, tx_hash, confirmations)
        if receipt["status"] != 1 or to_checksum_address(receipt["contractAddress"]) != planned[name]:
            raise DeploymentError(
                f"{name} did not land at its planned address {planned[name]} (receipt: {dict(receipt)})",
                hint="the deployer must not send other transactions during a deployment; deploy again",
            )
        log.info("deployed %s at %s (gas %d)", name, planned[name], receipt["gasUsed"])
    return planned


def _wait(w3: Web3, tx_hash: bytes, confirmations: int) -> Mapping[str, Any]:
    receipt = w3.eth.wait_for_transaction_receipt(tx_hash, timeout=RECEIPT_TIMEOUT_S, poll_latency=0.05)
    if confirmations > 0:
        target = int(receipt["blockNumber"]) + confirmations
        deadline = time.monotonic() + RECEIPT_TIMEOUT_S
        while int(w3.eth.block_number) < target:
            if time.monotonic() > deadline:
                raise DeploymentError(
                    f"fewer than {confirmations} confirmations after {RECEIPT_TIMEOUT_S:.0f} s",
                    hint="the chain is not producing blocks (an automining dev node?); lower --confirmations",
                )
            time.sleep(0.2)
    return receipt
