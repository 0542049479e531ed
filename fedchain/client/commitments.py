"""Commitments the agents put on chain, and the salts behind them.

Salts are derived from the agent's private key and the commitment's place
(contract, task, job), never drawn at random: an agent killed between sending
a commitment and saving its state recomputes the same salt after a restart and
can still open (reveal) what it committed. Nobody without the key can derive
them, so they hide the committed value as well as random salts do.
"""

from __future__ import annotations

from eth_abi import encode as abi_encode
from eth_utils import keccak

#: Domain tags, so that salts for different purposes never coincide.
DATA_SIZE_SALT = b"fedchain/data-size-salt/1"
BID_SALT = b"fedchain/bid-salt/1"


def derive_salt(private_key: bytes, domain: bytes, contract: str, task_id: int, client_index: int) -> bytes:
    """A 32-byte salt only the key's holder can compute, unique per domain, contract, task and job."""
    place = abi_encode(["address", "uint256", "uint256"], [contract, task_id, client_index])
    return keccak(bytes(private_key) + domain + place)


def data_commitment(data_size: int, salt: bytes) -> bytes:
    """keccak256(abi.encode(uint256 dataSize, bytes32 salt)): what a client commits when it joins."""
    return keccak(abi_encode(["uint256", "bytes32"], [data_size, salt]))


def bid_commitment(frequency: int, price: int, salt: bytes, bidder: str) -> bytes:
    """keccak256(abi.encode(uint64 frequency, uint96 price, bytes32 salt, address bidder)): a sealed bid."""
    return keccak(abi_encode(["uint64", "uint96", "bytes32", "address"], [frequency, price, salt, bidder]))
