"""Merkle trees over (index, hash) leaves, as OpenZeppelin's ``MerkleProof`` verifies them.

Each round the aggregator commits every client's rewarded model with one
``bytes32`` root over the leaves (client index, reward hash); a fog node
commits its training transcript with one over (checkpoint index, checkpoint
hash) (:mod:`fedchain.transcripts`). The tree is
OpenZeppelin's "standard" Merkle tree (the ``@openzeppelin/merkle-tree``
library), so ``MerkleProof.verify`` in ``RoundLedger.verifyReward`` accepts
the proofs this module makes:

* a leaf is ``keccak256(bytes.concat(keccak256(abi.encode(uint256 index, bytes32 hash))))``:
  hashed twice, so that no inner node can pass for a leaf;
* a parent is the keccak256 of its two children in ascending byte order
  (``Hashes.commutativeKeccak256``), so a proof needs no left/right flags;
* the leaves are sorted by their hash and laid out as a complete binary tree
  in one array (the root at 0, the children of node ``i`` at ``2i+1`` and
  ``2i+2``, the leaves at the end in reverse order).

Pure functions, no I/O. An empty set of rewards has the zero root (what a round
without rewards in kind posts).

>>> tree = RewardTree.of([(0, b"\\x01" * 32), (1, b"\\x02" * 32)])
>>> verify(tree.root, leaf_hash(1, b"\\x02" * 32), tree.proof(1))
True
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Self

from fedchain.errors import MerkleError
from fedchain.store.digest import DIGEST_BYTES, keccak256, parse_digest

#: The root of a round without rewards (and what ``RoundLedger`` stores for it).
ZERO_ROOT = bytes(DIGEST_BYTES)

#: Bytes of one ABI-encoded word (``uint256``).
_WORD = 32


def leaf_hash(index: int, reward_hash: bytes | str) -> bytes:
    """The leaf of client ``index``'s reward: ``keccak256(bytes.concat(keccak256(abi.encode(index, hash))))``."""
    if not 0 <= index < 2 ** (8 * _WORD):
        raise MerkleError(f"a client index must be a uint256, got {index}")
    encoded = index.to_bytes(_WORD, "big") + parse_digest(reward_hash)
    return keccak256(keccak256(encoded))


def find_reward(rewards: Sequence[tuple[int, bytes]], index: int) -> bytes | None:
    """Client ``index``'s reward hash among ``rewards`` (client index, hash) pairs; None when it has none."""
    return next((digest for client, digest in rewards if client == index), None)


def hash_pair(a: bytes, b: bytes) -> bytes:
    """A parent node: keccak256 of the two children in ascending order (OpenZeppelin's commutative hash)."""
    return keccak256(a + b if a < b else b + a)


def process_proof(leaf: bytes, proof: Sequence[bytes]) -> bytes:
    """The root that ``proof`` leads to from ``leaf`` (``MerkleProof.processProof``)."""
    node = leaf
    for sibling in proof:
        node = hash_pair(node, sibling)
    return node


def verify(root: bytes, leaf: bytes, proof: Sequence[bytes]) -> bool:
    """Whether ``proof`` proves ``leaf`` against ``root`` (``MerkleProof.verify``); never true for the zero root."""
    return root != ZERO_ROOT and process_proof(leaf, proof) == root


@dataclass(frozen=True)
class IndexedTree:
    """OpenZeppelin's standard tree over (index, hash) leaves; build it with :meth:`of`.

    Attributes:
        entries: (index, hash) of every leaf, by index.
        nodes: the tree as one array, the root first (empty without leaves).
    """

    entries: tuple[tuple[int, bytes], ...]
    nodes: tuple[bytes, ...]

    @classmethod
    def of(cls, entries: Iterable[tuple[int, bytes | str]]) -> Self:
        """The tree over ``entries`` (index, hash); a :class:`MerkleError` when an index repeats."""
        pairs = tuple(sorted((index, parse_digest(digest)) for index, digest in entries))
        indices = [index for index, _ in pairs]
        if len(set(indices)) != len(indices):
            raise MerkleError(f"an index has two leaves: indices {indices}")
        leaves = sorted(leaf_hash(index, digest) for index, digest in pairs)
        if not leaves:
            return cls(pairs, ())
        nodes: list[bytes] = [b""] * (2 * len(leaves) - 1)
        for i, leaf in enumerate(leaves):
            nodes[len(nodes) - 1 - i] = leaf
        for i in range(len(nodes) - 1 - len(leaves), -1, -1):
            nodes[i] = hash_pair(nodes[2 * i + 1], nodes[2 * i + 2])
        return cls(pairs, tuple(nodes))

    @property
    def root(self) -> bytes:
        """The root to commit on chain (:data:`ZERO_ROOT` without leaves)."""
        return self.nodes[0] if self.nodes else ZERO_ROOT

    def digest(self, index: int) -> bytes:
        """The hash of leaf ``index``; a :class:`MerkleError` when the tree has none."""
        digest = find_reward(self.entries, index)
        if digest is None:
            raise MerkleError(f"the tree has no leaf {index}")
        return digest

    def proof(self, index: int) -> tuple[bytes, ...]:
        """The siblings from leaf ``index`` up to the root (what ``MerkleProof.verify`` takes)."""
        position = self.nodes.index(leaf_hash(index, self.digest(index)))
        proof = []
        while position > 0:
            sibling = position + 1 if position % 2 == 1 else position - 1
            proof.append(self.nodes[sibling])
            position = (position - 1) // 2
        return tuple(proof)


@dataclass(frozen=True)
class RewardTree(IndexedTree):
    """The tree of one round's rewards: a leaf per (client index, reward hash)."""

    @property
    def rewards(self) -> tuple[tuple[int, bytes], ...]:
        """(client index, reward hash) of every leaf, by client index."""
        return self.entries

    def reward_hash(self, index: int) -> bytes:
        """Client ``index``'s reward hash; a :class:`MerkleError` when it has no reward in this tree."""
        digest = find_reward(self.entries, index)
        if digest is not None:
            return digest
        raise MerkleError(
            f"client {index} has no reward in this round",
            hint="a client removed from the task, or one that joined no round, gets no reward",
        )

    def proof(self, index: int) -> tuple[bytes, ...]:
        """The siblings from client ``index``'s leaf up to the root (what ``verifyReward`` takes)."""
        self.reward_hash(index)  # a client without a reward: the reward's error, not the tree's
        return super().proof(index)


__all__ = ["ZERO_ROOT", "IndexedTree", "RewardTree", "find_reward", "hash_pair", "leaf_hash", "process_proof", "verify"]
