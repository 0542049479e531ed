"""RoundLedger's rewards in kind: a Merkle root posted with the round, proven by verifyReward on a real Anvil.

The proofs come from fedchain.chain.merkle, so these tests also check that the Python tree is the one
OpenZeppelin's MerkleProof verifies.
"""

from __future__ import annotations

from eth_utils import keccak

from fedchain.chain import bindings
from fedchain.chain.merkle import ZERO_ROOT, RewardTree
from fedchain.fl.reputation import WAD
from tests.contracts.conftest import CLIENTS, FedChain
from tests.contracts.test_rounds import commit_at, started

LIST_HASH = keccak(text="reward-list-1")


def committed_round_1(chain: FedChain, clients: int) -> tuple[int, list[tuple[int, int, bool]]]:
    """A started task of ``clients`` clients whose fog nodes all committed round 1; its measurements."""
    task = started(chain, clients=CLIENTS[:clients])
    for index in range(clients):
        commit_at(chain, task, index, 1, 50 + index)
    return task, [(WAD, 50 + index, True) for index in range(clients)]


def test_a_round_commits_its_reward_root_and_every_reward_verifies_against_it(chain: FedChain) -> None:
    # Prepare: five clients (an odd count), each with its own reward hash.
    task, measurements = committed_round_1(chain, 5)
    rewards = [(index, keccak(text=f"reward-{index}")) for index in range(5)]
    tree = RewardTree.of(rewards)
    # Execute
    receipt = chain.post_round(task, 1, measurements, rewards=(tree.root, LIST_HASH))
    # Assert: the root is stored and announced; the contract accepts exactly the Python proofs.
    committed = receipt.events_of(bindings.RewardsCommitted)
    assert [(e.task_id, e.round, e.rewards_root, e.reward_list) for e in committed] == [(task, 1, tree.root, LIST_HASH)]
    assert chain.view("RoundLedger", "rewardRoot", task, 1) == tree.root
    for index, reward in rewards:
        proof = list(tree.proof(index))
        assert chain.view("RoundLedger", "verifyReward", task, 1, index, reward, proof) is True
        assert chain.view("RoundLedger", "verifyReward", task, 1, index, keccak(text="forged"), proof) is False
        assert chain.view("RoundLedger", "verifyReward", task, 1, (index + 1) % 5, reward, proof) is False


def test_a_single_client_round_verifies_with_an_empty_proof(chain: FedChain) -> None:
    task, measurements = committed_round_1(chain, 1)
    tree = RewardTree.of([(0, keccak(text="only"))])
    chain.post_round(task, 1, measurements, rewards=(tree.root, LIST_HASH))
    assert chain.view("RoundLedger", "verifyReward", task, 1, 0, keccak(text="only"), []) is True


def test_a_round_without_rewards_stores_nothing_and_verify_reverts_with_no_rewards(chain: FedChain) -> None:
    task, measurements = committed_round_1(chain, 2)
    receipt = chain.post_round(task, 1, measurements)
    assert receipt.events_of(bindings.RewardsCommitted) == ()
    assert chain.view("RoundLedger", "rewardRoot", task, 1) == ZERO_ROOT
    with chain.reverts(bindings.LedgerNoRewards, task, 1):
        chain.view("RoundLedger", "verifyReward", task, 1, 0, keccak(text="reward-0"), [])
    with chain.reverts(bindings.LedgerNoRewards, task, 2):  # a round not posted yet
        chain.view("RoundLedger", "verifyReward", task, 2, 0, keccak(text="reward-0"), [])


def test_a_root_without_a_reward_list_or_a_list_without_a_root_is_refused(chain: FedChain) -> None:
    task, measurements = committed_round_1(chain, 2)
    root = RewardTree.of([(0, keccak(text="a")), (1, keccak(text="b"))]).root
    with chain.reverts(bindings.LedgerInconsistentRewards, task, 1, root, ZERO_ROOT):
        chain.post_round(task, 1, measurements, rewards=(root, ZERO_ROOT))
    with chain.reverts(bindings.LedgerInconsistentRewards, task, 1, ZERO_ROOT, LIST_HASH):
        chain.post_round(task, 1, measurements, rewards=(ZERO_ROOT, LIST_HASH))
    chain.post_round(task, 1, measurements, rewards=(root, LIST_HASH))
    assert chain.view("RoundLedger", "rewardRoot", task, 1) == root
