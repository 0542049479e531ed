"""A fog node against a real chain: rational sealed bids, reveals, training, commits, restarts and refused data.

Each test runs a real client agent and real fog nodes over the package's Anvil,
stepping their loops by hand and moving the chain's clock past deadlines.
"""

from __future__ import annotations

import json

from fedchain.chain import bindings as b
from fedchain.client.commitments import bid_commitment
from fedchain.publisher import start_task
from fedchain.store.digest import parse_digest
from fog.node import BID, REVEALED, WON
from tests.aggregator.conftest import TERMS, World
from tests.fog.conftest import SAMPLES, Agents


def open_auction(world: World, agents: Agents) -> tuple[int, object]:
    """A new task whose client 0 joined and opened its job's auction."""
    task_id = world.create()
    client = agents.client(0, task_id)
    client.step()
    return task_id, client


def test_fog_bids_its_cost_plus_margin_sealed_then_reveals_it(world: World, agents: Agents) -> None:
    # prepare: an open auction of 48 samples; the task's c is 1000 cycles per sample
    task_id, _ = open_auction(world, agents)
    fog = agents.fog(0, task_id)
    auction = world.publisher.contracts.fog_auction

    # execute: the fog node sees the auction and bids; then the bidding deadline passes
    fog.step()
    (sealed,) = auction.bids(task_id, 0)
    world.advance(TERMS.bidding_duration + 1)
    fog.step()

    # assert: E = alpha/2 * c * D * f^2 = 1e-13 / 2 * 1000 * 48 * 1e18 = 2.4e9 wei; price = 1.25 E
    job = fog.state.jobs[f"{task_id}:0"]
    assert job["cost"] == 2.4e9
    assert job["price"] == 3_000_000_000 >= job["cost"]
    assert sealed.bidder == world.session(9).address and not sealed.revealed
    assert sealed.commitment == bid_commitment(10**9, 3_000_000_000, parse_digest(job["salt"]), sealed.bidder)
    (revealed,) = auction.bids(task_id, 0)
    assert (revealed.revealed, revealed.frequency, revealed.price) == (True, 10**9, 3_000_000_000)
    assert job["phase"] == REVEALED


def test_restarted_fog_finds_its_bid_on_chain_and_reveals_it_without_bidding_again(world: World, agents: Agents) -> None:
    # prepare: a fog node bids, then loses its state file (killed before it was saved)
    task_id, _ = open_auction(world, agents)
    first = agents.fog(0, task_id)
    first.step()
    first.config.state_path.unlink()

    # execute: a new process of the same fog node replays the chain from the deployment block
    restarted = agents.fog(0, task_id)
    restarted.step()
    world.advance(TERMS.bidding_duration + 1)
    restarted.step()

    # assert: still one bid, revealed with the salt derived again from the key
    bids = world.publisher.contracts.fog_auction.bids(task_id, 0)
    assert [(bid.bidder, bid.revealed) for bid in bids] == [(restarted.address, True)]


def test_a_task_runs_end_to_end_between_a_client_and_two_fog_nodes(world: World, agents: Agents) -> None:
    # prepare: two fog nodes bid; both are fast enough to earn the capped time reputation, so the
    # client's utility is highest for the cheaper one (f = 1e9 costs a quarter of f = 2e9)
    task_id, client = open_auction(world, agents)
    cheap, dear = agents.fog(0, task_id), agents.fog(1, task_id)
    for node in (cheap, dear):
        node.step()
    world.advance(TERMS.bidding_duration + 1)
    for node in (cheap, dear):
        node.step()
    world.advance(TERMS.reveal_duration + 1)

    # execute: the client closes the auction and hands off its data; the winner trains round 1
    client.step()
    client.step()
    start_task(world.publisher, task_id)
    for node in (cheap, dear):
        node.step()

    # assert: the cheaper node won, verified the data and committed its update for round 1
    contracts = world.publisher.contracts
    job = contracts.fog_auction.job(task_id, 0)
    assert (job.status, job.paid_up_to, job.winner_price) == (2, 1, 3_000_000_000)
    assert cheap.state.jobs[f"{task_id}:0"]["phase"] == WON
    assert cheap.state.jobs[f"{task_id}:0"]["data_status"] == "ok"
    assert cheap.state.jobs[f"{task_id}:0"]["committed"] == [1]
    assert dear.state.jobs[f"{task_id}:0"]["phase"] == "standby"
    assert contracts.data_handoff.data_hash(task_id, 0) == parse_digest(client.state.data["data_hash"])
    assert world.publisher.store.exists(job.update_hash)
