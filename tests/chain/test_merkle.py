"""The reward Merkle tree: hand-built trees, proofs, odd counts and one leaf (the contract's side is in tests/contracts)."""

from __future__ import annotations

import pytest
from eth_hash.auto import keccak

from fedchain.chain.merkle import ZERO_ROOT, RewardTree, hash_pair, leaf_hash, process_proof, verify
from fedchain.errors import MerkleError


def digest(n: int) -> bytes:
    return bytes([n]) * 32


def test_a_leaf_is_the_double_keccak_of_the_abi_encoded_index_and_hash() -> None:
    encoded = (7).to_bytes(32, "big") + digest(9)  # abi.encode(uint256 7, bytes32 0x0909..)
    assert leaf_hash(7, digest(9)) == keccak(keccak(encoded))
    assert leaf_hash(7, "0x" + digest(9).hex()) == leaf_hash(7, digest(9))


def test_a_parent_hashes_its_children_in_ascending_order() -> None:
    low, high = b"\x01" * 32, b"\xff" * 32
    assert hash_pair(low, high) == hash_pair(high, low) == keccak(low + high)


def test_one_leaf_is_its_own_root_with_an_empty_proof() -> None:
    tree = RewardTree.of([(3, digest(1))])
    assert tree.root == leaf_hash(3, digest(1))
    assert tree.proof(3) == ()
    assert verify(tree.root, leaf_hash(3, digest(1)), ())


def test_two_leaves_hash_to_their_sorted_pair() -> None:
    a, b = leaf_hash(0, digest(1)), leaf_hash(1, digest(2))
    tree = RewardTree.of([(1, digest(2)), (0, digest(1))])
    assert tree.root == keccak(min(a, b) + max(a, b))
    assert tree.proof(0) == (b,)
    assert tree.proof(1) == (a,)


def test_three_leaves_follow_the_openzeppelin_standard_layout() -> None:
    # Sorted leaves l0 < l1 < l2 sit at the array's end in reverse: nodes = [root, n1, l2, l1, l0],
    # n1 = hash(l1, l0) and root = hash(n1, l2) (OpenZeppelin merkle-tree's makeMerkleTree).
    rewards = [(i, digest(i + 1)) for i in range(3)]
    l0, l1, l2 = sorted(leaf_hash(i, h) for i, h in rewards)
    n1 = hash_pair(l1, l0)
    tree = RewardTree.of(rewards)
    assert tree.nodes == (hash_pair(n1, l2), n1, l2, l1, l0)
    by_leaf = {leaf_hash(i, h): i for i, h in rewards}
    assert tree.proof(by_leaf[l0]) == (l1, l2)
    assert tree.proof(by_leaf[l1]) == (l0, l2)
    assert tree.proof(by_leaf[l2]) == (n1,)


@pytest.mark.parametrize("count", [1, 2, 3, 5, 8, 13])
def test_every_reward_of_a_tree_is_proven_and_no_other(count: int) -> None:
    rewards = [(i * 2, keccak(f"reward-{i}".encode())) for i in range(count)]
    tree = RewardTree.of(rewards)
    for index, reward in rewards:
        proof = tree.proof(index)
        assert process_proof(leaf_hash(index, reward), proof) == tree.root
        assert not verify(tree.root, leaf_hash(index, digest(0)), proof)  # another model
        assert not verify(tree.root, leaf_hash(index + 1, reward), proof)  # another client
    assert tree.reward_hash(rewards[-1][0]) == rewards[-1][1]


def test_no_rewards_have_the_zero_root_which_proves_nothing() -> None:
    tree = RewardTree.of([])
    assert tree.root == ZERO_ROOT
    assert not verify(ZERO_ROOT, ZERO_ROOT, ())


def test_a_client_without_a_reward_or_with_two_is_refused() -> None:
    tree = RewardTree.of([(0, digest(1))])
    with pytest.raises(MerkleError, match="client 4 has no reward"):
        tree.proof(4)
    with pytest.raises(MerkleError, match="two leaves"):
        RewardTree.of([(0, digest(1)), (0, digest(2))])
    with pytest.raises(MerkleError, match="uint256"):
        leaf_hash(-1, digest(1))
