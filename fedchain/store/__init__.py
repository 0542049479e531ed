"""The blob store: immutable objects (updates, global models, job data) named by their hash.

FedChain's canonical hash is keccak256 of an object's exact bytes: the chain
stores it as ``bytes32`` and the store files the object under it, so a hash
from an on-chain event fetches and verifies the object directly.

>>> from fedchain.store import open_store
>>> store = open_store("memory://doc-package")   # or a folder, file://..., s3://bucket/prefix
>>> digest = store.put(b"bytes")                 # 32 bytes: commit this on chain
>>> store.get(digest)                            # verified against digest on read
b'bytes'
"""

from fedchain.store.blobs import DEFAULT_MAX_BYTES, DEFAULT_STORE_URL, BlobStore, open_store
from fedchain.store.digest import CANONICAL_HASH, HashName, keccak256, parse_digest, sha256, to_hex

__all__ = [
    "CANONICAL_HASH",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_STORE_URL",
    "BlobStore",
    "HashName",
    "keccak256",
    "open_store",
    "parse_digest",
    "sha256",
    "to_hex",
]
