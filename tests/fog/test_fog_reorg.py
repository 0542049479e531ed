"""Agents on a chain whose recent blocks are reorganised away: what vanished is sent again, nothing twice.

The chain (the package's Anvil) is rewound with ``evm_snapshot``/``evm_revert``
under a client and a fog node that already acted on the blocks that vanish,
and a block with another timestamp takes the place of the first vanished one,
as a competing branch would.
"""

from __future__ import annotations

import torch
from web3 import Web3

from fedchain.publisher import start_task
from fedchain.store.digest import keccak256, to_hex
from fog.jobs import Phase
from tests.aggregator.conftest import World
from tests.fog.conftest import Agents, award, post_round
from tests.fog.test_fog_rewards import REWARD_SPEC, a_reward, committed_update, job_data, reward_task, trained_from


def snapshot(w3: Web3) -> str:
    return str(w3.provider.make_request("evm_snapshot", [])["result"])


def reorganise_back_to(world: World, snapshot_id: str) -> None:
    """Drop every block after the snapshot, then mine one other block in place of the first that vanished."""
    w3 = world.publisher.w3
    assert w3.provider.make_request("evm_revert", [snapshot_id])["result"] is True
    world.advance(7)  # another timestamp: another block hash at the height the agents handled


def test_a_join_auction_and_bid_reorganised_away_are_sent_again_once(world: World, agents: Agents) -> None:
    # prepare: a task; then, in blocks about to vanish, the client joins and opens its auction and the fog node bids
    task_id = world.create()
    before = snapshot(world.publisher.w3)
    client, fog = agents.client(0, task_id), agents.fog(0, task_id)
    client.step()
    fog.step()
    ledger, auction = world.publisher.contracts.round_ledger, world.publisher.contracts.fog_auction
    assert ledger.client_count(task_id) == 1 and len(auction.bids(task_id, 0)) == 1

    # execute: the blocks vanish; both agents step on the new branch
    reorganise_back_to(world, before)
    assert ledger.client_count(task_id) == 0
    fog.step()
    client.step()
    fog.step()

    # assert: one join, one auction and one bid from this fog node, on the new branch; the fog node's job waits to reveal
    assert ledger.client_count(task_id) == 1
    assert [bid.bidder for bid in auction.bids(task_id, 0)] == [fog.address]
    assert fog.jobs[f"{task_id}:0"].phase == Phase.BID
    opened = auction.job(task_id, 0)
    assert fog.jobs[f"{task_id}:0"].bidding_deadline == opened.bidding_deadline


def test_a_commit_that_vanished_from_the_chain_is_committed_again(world: World, agents: Agents) -> None:
    # prepare: the fog node won the job, trained round 1 and committed it; then the commit's block vanishes
    task_id = world.create()
    client, fog = agents.client(0, task_id), agents.fog(0, task_id)
    award(world, (client,), (fog,), start=False)
    start_task(world.publisher, task_id)
    before = snapshot(world.publisher.w3)
    fog.step()
    auction = world.publisher.contracts.fog_auction
    assert auction.job(task_id, 0).paid_up_to == 1 and fog.jobs[f"{task_id}:0"].committed == [1]
    world.publisher.w3.provider.make_request("evm_revert", [before])

    # execute: the next step, with the round still open
    fog.step()

    # assert: round 1 is committed again, once
    assert auction.job(task_id, 0).paid_up_to == 1
    assert fog.jobs[f"{task_id}:0"].committed == [1]


def test_a_reward_commitment_reorganised_away_is_forgotten_and_the_new_branchs_reward_is_trained_from_and_proven(
    world: World, agents: Agents
) -> None:
    # prepare: a task whose clients train from their rewards; round 1 is posted with one reward, the fog node
    # trains round 2 from it and the client proves it; then those blocks vanish
    task_id, client, fog = reward_task(world, agents)
    before = snapshot(world.publisher.w3)
    first = post_round(world, task_id, 1, {0: a_reward(REWARD_SPEC, seed=1)})
    fog.step()
    client.step()
    assert first is not None and client.state.data["rewards"] == {"1": to_hex(first.rewards[0][1])}
    assert world.publisher.contracts.fog_auction.job(task_id, 0).paid_up_to == 2

    # execute: the blocks vanish, both agents step; then the new branch posts round 1 with another reward
    reorganise_back_to(world, before)
    fog.step()
    client.step()
    forgotten = (fog.state.data["tasks"][str(task_id)]["rewards"], client.state.data["commitments"])
    models_after_reorg = dict(fog.state.data["tasks"][str(task_id)]["models"])
    proven = dict(client.state.data["rewards"])
    second_reward = a_reward(REWARD_SPEC, seed=2)
    second = post_round(world, task_id, 1, {0: second_reward})
    fog.step()
    client.step()

    # assert: the vanished commitment and model were forgotten with the reward proven against it; both agents then hold only
    # the new branch's commitment; the fog trained round 2 again, from the new
    # reward; the client proved the new reward and keeps it
    assert forgotten == ({}, {}) and proven == {} and models_after_reorg == {}  # round 1's model went with its block
    assert list(fog.state.data["tasks"][str(task_id)]["models"]) == ["1"]  # and came back with the new branch's
    assert second is not None and first.rewards != second.rewards
    book = fog.state.data["tasks"][str(task_id)]["rewards"]
    assert [book["1"]["root"]] == [to_hex(second.tree.root)] and client.state.data["commitments"] == book
    assert world.publisher.contracts.fog_auction.job(task_id, 0).paid_up_to == 2
    update = committed_update(world, task_id, client.address)
    data = job_data(world, task_id, client.state.data["data_hash"])
    torch.testing.assert_close(update, trained_from(REWARD_SPEC, second_reward, data))
    assert client.state.data["rewards"] == {"1": to_hex(second.rewards[0][1])}
    assert client.state.data["final_reward"] == to_hex(second.rewards[0][1])
    assert keccak256(client.reward_path.read_bytes()) == second.rewards[0][1]
