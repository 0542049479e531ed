"""What FedChain deploys and how it is wired.

Five contracts, each with the addresses of the others as immutables (no
set-up transaction after deployment, nothing an owner could re-point later):

==============  =============================================================
Treasury        every wei: task pools, claimable balances, ``withdraw``
TaskRegistry    tasks, parameters, budget, round clock
RoundLedger     clients, reputation, round posting, settlement
FogAuction      sealed-bid fog auctions, fog commits, slashing
DataHandoff     the hash of each job's data, committed by its client
==============  =============================================================

They refer to each other in a cycle, so each address is computed before the
contracts exist: a contract created by an account's transaction number
``nonce`` lives at ``keccak256(rlp([sender, nonce]))[12:]``. The recipe sends
the creations with consecutive nonces and checks every address after.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

import rlp
from eth_utils import keccak, to_canonical_address, to_checksum_address
from web3 import Web3

from fedchain.chain.compile import Artifact, compile_contracts
from fedchain.errors import DeploymentError

log = logging.getLogger(__name__)

#: Contract names in deployment order (the order of the nonces their addresses are computed from).
DEPLOYMENT_ORDER: tuple[str, ...] = ("Treasury", "TaskRegistry", "RoundLedger", "FogAuction", "DataHandoff")

#: Constructor arguments of each contract, by the names of the contracts they point at.
CONSTRUCTOR_ARGS: Mapping[str, tuple[str, ...]] = {
    "Treasury": ("TaskRegistry", "RoundLedger", "FogAuction"),
    "TaskRegistry": ("Treasury", "RoundLedger"),
    "RoundLedger": ("TaskRegistry", "Treasury", "FogAuction"),
    "FogAuction": ("TaskRegistry", "RoundLedger", "Treasury"),
    "DataHandoff": ("RoundLedger", "FogAuction"),
}

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
    confirmations: int = 0,
    artifacts: Mapping[str, Artifact] | None = None,
) -> dict[str, str]:
    """Deploy and wire FedChain's contracts; return contract name -> checksum address in deployment order.

    Transactions go out with ``w3.eth.send_transaction`` from ``deployer_address``
    (an unlocked node account, or a web3 signing middleware). The deployer must
    send nothing else until this returns: the addresses depend on its nonces.
    """
    deployer = to_checksum_address(deployer_address)
    artifacts = artifacts if artifacts is not None else compile_contracts()
    missing = [name for name in DEPLOYMENT_ORDER if name not in artifacts]
    if missing:
        raise DeploymentError(f"the compiled artifacts lack {', '.join(missing)}", hint="check contracts/ and recompile")
    first_nonce = int(w3.eth.get_transaction_count(deployer, "pending"))
    planned = planned_addresses(deployer, first_nonce)
    # Every creation is sent before any is awaited: their addresses are known from the nonces, and the
    # constructors only store addresses, so on a chain with a block time they all land in one block.
    sent = []
    for offset, name in enumerate(DEPLOYMENT_ORDER):
        artifact = artifacts[name]
        contract = w3.eth.contract(abi=list(artifact.abi), bytecode=artifact.bytecode)
        args = [planned[dependency] for dependency in CONSTRUCTOR_ARGS[name]]
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
