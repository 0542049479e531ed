"""Content hashes: keccak256 (FedChain's canonical hash) and SHA-256.

FedChain names every update and every global model by ONE hash: the keccak256
of the object's exact bytes (the safetensors file). It is what the contracts
store as ``bytes32``, what the blob store files the object under, and what a
reader checks the bytes against, so a hash read from an on-chain event fetches
and verifies the object with no lookup table in between. SHA-256 is offered for
stores that want to be addressed by it (``BlobStore(..., hash_name="sha256")``),
but then the on-chain hash no longer names the object.

A digest is 32 raw bytes; :func:`parse_digest` also accepts the ``0x``-prefixed
or bare hex that logs, events and command lines carry.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Literal

from eth_hash.auto import keccak

from fedchain.errors import StoreError

#: The names of the hash functions a store can be addressed by.
HashName = Literal["keccak256", "sha256"]

#: The one hash FedChain commits on chain for updates and models.
CANONICAL_HASH: HashName = "keccak256"

#: Length of every digest in bytes (a Solidity ``bytes32``).
DIGEST_BYTES = 32


def keccak256(data: bytes) -> bytes:
    """Keccak-256 of ``data`` as the EVM computes it (not NIST SHA3-256): FedChain's canonical hash."""
    return keccak(data)


def sha256(data: bytes) -> bytes:
    """SHA-256 of ``data``."""
    return hashlib.sha256(data).digest()


#: name -> hash function, for stores addressed by either.
HASHES: dict[str, Callable[[bytes], bytes]] = {"keccak256": keccak256, "sha256": sha256}


def parse_digest(value: bytes | str) -> bytes:
    """A 32-byte digest from raw bytes or hex text (with or without ``0x``)."""
    if isinstance(value, (bytes, bytearray)):
        digest = bytes(value)
    elif isinstance(value, str):
        text = value.removeprefix("0x").removeprefix("0X")
        try:
            digest = bytes.fromhex(text)
        except ValueError as err:
            raise StoreError(
                f"{value!r} is not a hex hash", hint="pass 64 hex digits, optionally prefixed by 0x"
            ) from err
    else:
        raise StoreError(f"a hash must be bytes or hex text, not {type(value).__name__}")
    if len(digest) != DIGEST_BYTES:
        raise StoreError(
            f"a hash has {DIGEST_BYTES} bytes, got {len(digest)} in {value!r}",
            hint="pass the 32-byte hash exactly as the chain or `put` returned it",
        )
    return digest


def to_hex(digest: bytes) -> str:
    """``0x``-prefixed lowercase hex of a digest, as logs and JSON carry it."""
    return "0x" + bytes(digest).hex()
