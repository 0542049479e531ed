"""A client against a real chain: join, auction, hand-off, settlement and withdrawal, and a restart.

The test plays the publisher and the aggregator (posting each round from the
fog node's commit); the client and the fog node are the real agents.
"""

from __future__ import annotations

from eth_utils import keccak

from fedchain.chain import bindings as b
from fedchain.chain.events import LogQuery, fetch_events
from fedchain.client import data_commitment, decode_job_data
from fedchain.client.commitments import DATA_SIZE_SALT, derive_salt
from fedchain.client.data import client_dataset
from fedchain.client.handoff import ExpectedJobData
from tests.aggregator.conftest import TERMS, World
from tests.fog.conftest import SAMPLES, Agents, award, post_round


def events_of(world: World, cls: type, task_id: int) -> list:
    session = world.publisher
    query = LogQuery(tuple(session.deployment.addresses.values()), session.deployment.block_number)
    return [
        e
        for e in fetch_events(session.w3, b.REGISTRY, query)
        if isinstance(e, cls) and getattr(e, "task_id", task_id) == task_id
    ]


def test_client_joins_auctions_its_job_and_hands_off_its_committed_data(world: World, agents: Agents) -> None:
    # prepare
    task_id = world.create()
    client, fog = agents.client(0, task_id), agents.fog(0, task_id)

    # execute: join and open, the fog bids and reveals, then close and hand off
    award(world, (client,), (fog,), start=False)

    # assert: the join committed to D = 48 with the key's salt; the escrow is the winning price x N
    contracts = world.publisher.contracts
    key = client.session.transactor.account.key
    salt = derive_salt(key, DATA_SIZE_SALT, contracts.round_ledger.address, task_id, 0)
    assert contracts.round_ledger.data_commitment(task_id, 0) == data_commitment(SAMPLES, salt)
    job = contracts.fog_auction.job(task_id, 0)
    (closed,) = events_of(world, b.AuctionClosed, task_id)
    assert (job.status, job.data_size, closed.winner) == (2, SAMPLES, 0)
    assert closed.price == fog.jobs[f"{task_id}:0"].price
    assert closed.escrow == job.escrow == closed.price * TERMS.rounds
    # the committed hash names the stored bytes, which are the client's data
    digest = contracts.data_handoff.data_hash(task_id, 0)
    data = world.publisher.store.get(digest)
    decoded = decode_job_data(data, keccak(data), ExpectedJobData(task_id, 0, SAMPLES, num_classes=10, in_channels=1))
    expected = client_dataset(client.spec, client.config)
    assert digest == keccak(data)
    assert (decoded.images == expected.images).all() and (decoded.labels == expected.labels).all()


def test_client_and_fog_settle_and_withdraw_what_they_are_owed_after_the_last_round(
    world: World, agents: Agents
) -> None:
    # prepare: a two-round task; the fog commits each round, the test posts it as the aggregator
    task_id = world.create()
    client, fog = agents.client(0, task_id), agents.fog(0, task_id)
    award(world, (client,), (fog,))
    post_round(world, task_id, 1)
    fog.step()  # trains round 2 from the model posted with round 1
    post_round(world, task_id, 2)
    client.step()  # both rounds are pending (their challenge window): nothing to settle yet
    pending = (client.state.finished, world.publisher.contracts.round_ledger.settled(task_id))
    world.pass_challenge_window(task_id)

    # execute: once the window has passed, the client finalises both rounds and settles
    contracts = world.publisher.contracts
    earlier = contracts.treasury.claimable(client.address)  # accounts are shared with other tests' tasks
    client.step()
    owed = contracts.treasury.claimable(fog.address)  # the fog node's account may hold other tests' tasks' pay too
    fog.step()

    # assert: the task is settled; both withdrew exactly what the Treasury credited them
    withdrawn = {e.account: e.amount for e in events_of(world, b.Withdrawn, task_id)}
    credited: dict[str, int] = {}
    for credit in events_of(world, b.Credited, task_id):
        credited[credit.to] = credited.get(credit.to, 0) + credit.amount
    assert pending == (False, False)
    assert contracts.round_ledger.rounds(task_id) == (2, 2)  # posted, final
    assert client.state.finished and contracts.round_ledger.settled(task_id)
    assert withdrawn[client.address] == client.state.data["withdrawn"] == earlier + credited[client.address]
    assert withdrawn[fog.address] == owed >= credited[fog.address]  # all it was owed, this task's credits with it
    price = fog.jobs[f"{task_id}:0"].price
    assert price is not None
    assert credited[fog.address] == TERMS.fog_deposit + 2 * price  # deposit back, two rounds paid
    assert contracts.treasury.claimable(client.address) == contracts.treasury.claimable(fog.address) == 0


def test_restarted_client_finds_its_join_and_auction_on_chain_and_goes_on(world: World, agents: Agents) -> None:
    # prepare: the client joined and opened its auction, then lost its state
    task_id = world.create()
    first = agents.client(0, task_id)
    first.step()
    first.config.state_path.unlink()

    # execute
    restarted = agents.client(0, task_id)
    restarted.step()
    world.advance(TERMS.bidding_duration + TERMS.reveal_duration + 2)
    restarted.step()

    # assert: one join, one auction, now closed without a bid (vacant)
    contracts = world.publisher.contracts
    assert contracts.round_ledger.client_count(task_id) == 1
    assert len(events_of(world, b.AuctionOpened, task_id)) == 1
    assert contracts.fog_auction.job(task_id, 0).status == 3
    assert restarted.state.data["client_index"] == 0
