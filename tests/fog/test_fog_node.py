"""A fog node against a real chain: rational sealed bids, reveals, training, commits, restarts and refused data.

Each test runs a real client agent and real fog nodes over the package's Anvil,
stepping their loops by hand and moving the chain's clock past deadlines.
"""

from __future__ import annotations

import dataclasses
import logging

import pytest
import torch

from fedchain.agent import record_fields
from fedchain.chain import bindings as b
from fedchain.chain.bindings import JobStatus
from fedchain.chain.events import LogQuery, fetch_events
from fedchain.client.commitments import bid_commitment
from fedchain.client.handoff import ExpectedJobData, fetch_job_data
from fedchain.errors import ConfigError
from fedchain.fl.params import flatten
from fedchain.publisher import start_task
from fedchain.store.digest import parse_digest
from fedchain.taskspec import load_spec, load_update
from fedchain.trainer.evaluation import local_losses
from fedchain.updates import fetch_update
from fog.bidding import CostModel
from fog.jobs import Phase
from tests.aggregator.conftest import SPEC, TERMS, World
from tests.fog.conftest import Agents, award, post_round


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
    job = fog.jobs[f"{task_id}:0"]
    assert job.cost == 2.4e9
    assert job.price == 3_000_000_000 >= job.cost
    assert sealed.bidder == world.session(9).address and not sealed.revealed
    assert sealed.commitment == bid_commitment(10**9, 3_000_000_000, parse_digest(job.sealed_salt()), sealed.bidder)
    (revealed,) = auction.bids(task_id, 0)
    assert (revealed.revealed, revealed.frequency, revealed.price) == (True, 10**9, 3_000_000_000)
    assert job.phase == Phase.REVEALED


def test_restarted_fog_finds_its_bid_on_chain_and_reveals_it_without_bidding_again(
    world: World, agents: Agents
) -> None:
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


def test_the_winner_of_two_bidders_trains_the_handed_off_data_and_commits_round_one(
    world: World, agents: Agents
) -> None:
    # prepare: two fog nodes bid; both are fast enough to earn the capped time reputation, so the
    # client's utility is highest for the cheaper one (f = 1e9 costs a quarter of f = 2e9)
    task_id = world.create()
    client, cheap, dear = agents.client(0, task_id), agents.fog(0, task_id), agents.fog(1, task_id)

    # execute: the auction, the hand-off, the task's start; the winner trains round 1
    award(world, (client,), (cheap, dear))

    # assert: the cheaper node won, verified the data and committed its update for round 1
    contracts = world.publisher.contracts
    job = contracts.fog_auction.job(task_id, 0)
    assert (job.status, job.paid_up_to, job.winner_price) == (2, 1, 3_000_000_000)
    assert cheap.jobs[f"{task_id}:0"].phase == Phase.WON
    assert cheap.jobs[f"{task_id}:0"].data_status == "ok"
    assert cheap.jobs[f"{task_id}:0"].committed == [1]
    assert dear.jobs[f"{task_id}:0"].phase == Phase.STANDBY
    assert contracts.data_handoff.data_hash(task_id, 0) == parse_digest(client.state.data["data_hash"])
    assert world.publisher.store.exists(job.update_hash)


def test_a_training_failure_leaves_the_job_due_and_the_next_step_trains_and_commits_it(
    world: World, agents: Agents, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # prepare: the node's first training fails as a pool whose workers started too slowly does
    from fedchain.errors import TrainingError
    from fedchain.trainer.trainer import Trainer

    task_id = world.create()
    client, node = agents.client(0, task_id), agents.fog(0, task_id)
    real_train, calls = Trainer.train, []

    def train_once_failing(self: Trainer, *args: object, **kwargs: object) -> object:
        calls.append(1)
        if len(calls) == 1:
            raise TrainingError("training workers did not start in time")
        return real_train(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Trainer, "train", train_once_failing)

    # execute: the auction, the hand-off and the start (the node's step trains and fails), then one more step
    with caplog.at_level(logging.ERROR, logger="fog.node"):
        award(world, (client,), (node,))
    failed = world.publisher.contracts.fog_auction.job(task_id, 0).paid_up_to
    node.step()

    # assert: the node lived through the failure, said so, and committed round 1 at its next step
    assert failed == 0 and "training failed; trying again at the next step" in caplog.text
    assert world.publisher.contracts.fog_auction.job(task_id, 0).paid_up_to == 1
    assert node.jobs[f"{task_id}:0"].committed == [1]


def test_fog_refuses_data_that_does_not_hash_to_the_committed_hash_and_trains_nothing(
    world: World, agents: Agents
) -> None:
    # prepare: the job is awarded and handed off, then the stored data is altered before the fog fetches it
    task_id = world.create()
    client, fog = agents.client(0, task_id), agents.fog(0, task_id)
    award(world, (client,), (fog,), start=False)
    store = world.publisher.store
    path = store.path_of(client.state.data["data_hash"])
    store.fs.pipe_file(path, store.fs.cat_file(path)[:-4] + b"\x00\x00\x00\x01")
    fresh = agents.fog(0, task_id)  # a fog node that has not fetched the data yet

    # execute
    fresh.step()
    start_task(world.publisher, task_id)
    fresh.step()

    # assert: refused with the reason, and no update committed
    job = fresh.jobs[f"{task_id}:0"]
    assert job.data_status == "rejected" and "damaged" in (job.data_error or "")
    assert world.publisher.contracts.fog_auction.job(task_id, 0).paid_up_to == 0


def test_restarted_fog_does_not_commit_a_round_twice(world: World, agents: Agents) -> None:
    # prepare: the fog node committed round 1, then lost its state
    task_id = world.create()
    fog = agents.fog(0, task_id)
    award(world, (agents.client(0, task_id),), (fog,))
    fog.config.state_path.unlink()

    # execute: a new process replays every event from the deployment block and acts again
    restarted = agents.fog(0, task_id)
    restarted.step()

    # assert: one commit on chain; the restarted node knows round 1 is done
    session = world.publisher
    events = fetch_events(
        session.w3, b.REGISTRY, LogQuery((session.contracts.fog_auction.address,), session.deployment.block_number)
    )
    commits = [e for e in events if isinstance(e, b.UpdateCommitted) and e.task_id == task_id]
    assert [(e.round, e.fog) for e in commits] == [(1, restarted.address)]
    assert restarted.jobs[f"{task_id}:0"].committed == [1]


def test_fog_that_never_reveals_forfeits_its_deposit_and_wins_nothing(world: World, agents: Agents) -> None:
    task_id = world.create()
    client, fog = agents.client(0, task_id), agents.fog(0, task_id, never_reveal=True)

    award(world, (client,), (fog,), start=False)

    contracts = world.publisher.contracts
    assert contracts.fog_auction.job(task_id, 0).status == 3  # Vacant
    assert [bid.revealed for bid in contracts.fog_auction.bids(task_id, 0)] == [False]
    assert fog.jobs[f"{task_id}:0"].phase == Phase.LOST
    assert contracts.treasury.claimable(client.address) == TERMS.fog_deposit


def test_lazy_fog_commits_an_all_zero_update_without_training(world: World, agents: Agents) -> None:
    task_id = world.create()
    fog = agents.fog(0, task_id, lazy="zero")

    award(world, (agents.client(0, task_id),), (fog,))

    session = world.publisher
    job = session.contracts.fog_auction.job(task_id, 0)
    spec = load_spec(session.store, session.contracts.task_registry.params(task_id).dataset_id)
    update = fetch_update(session.store, job.update_hash, spec.param_spec(), spec.max_payload_bytes())
    assert job.paid_up_to == 1
    assert all(not tensor.any() for tensor in update.params.values())


def test_a_disguised_lazy_fog_resends_the_last_global_step_plus_noise(world: World, agents: Agents) -> None:
    # prepare: round 1 has no step yet (the node commits zeros); round 1's posted model moved the initial one
    terms = dataclasses.replace(TERMS, rounds=2)
    task_id = world.create(terms)
    fog = agents.fog(0, task_id, lazy="disguised", disguise_noise=0.5)
    award(world, (agents.client(0, task_id),), (fog,))
    session = world.publisher
    spec = load_spec(session.store, session.contracts.task_registry.params(task_id).dataset_id)

    def committed() -> torch.Tensor:
        job = session.contracts.fog_auction.job(task_id, 0)
        update = fetch_update(session.store, job.update_hash, spec.param_spec(), spec.max_payload_bytes())
        return flatten(update.params, spec.param_spec())[0]

    assert not committed().any()
    generator = torch.Generator().manual_seed(5)
    initial = spec.initial_params()
    step = {name: torch.randn(tensor.shape, generator=generator) * 0.01 for name, tensor in initial.items()}
    post_round(world, task_id, 1, model={name: initial[name] + step[name] for name in initial})

    # execute
    fog.step()

    # assert: round 2's update is the step plus noise of half its RMS (cosine 1 / sqrt(1.25) = 0.89)
    flat_step = flatten(step, spec.param_spec())[0]
    update = committed()
    assert session.contracts.fog_auction.job(task_id, 0).paid_up_to == 2
    cosine = float(torch.nn.functional.cosine_similarity(update, flat_step, dim=0))
    assert 0.85 < cosine < 0.93
    assert 0.45 < float((update - flat_step).norm() / flat_step.norm()) < 0.55


def test_an_attacking_fog_trains_its_jobs_then_sends_them_one_sybil_update(world: World, agents: Agents) -> None:
    # prepare: two clients whose jobs one fog node wins; it trains both, then sends minus their mean for both
    task_id = world.create()
    fog = agents.fog(0, task_id, attack="sybil", attack_scale=1.0)

    award(world, (agents.client(0, task_id), agents.client(1, task_id)), (fog,))

    # assert: both rounds committed, with one identical non-zero update
    session = world.publisher
    spec = load_spec(session.store, session.contracts.task_registry.params(task_id).dataset_id)
    jobs = [session.contracts.fog_auction.job(task_id, index) for index in (0, 1)]
    updates = [
        flatten(
            fetch_update(session.store, job.update_hash, spec.param_spec(), spec.max_payload_bytes()).params,
            spec.param_spec(),
        )[0]
        for job in jobs
    ]
    assert [job.paid_up_to for job in jobs] == [1, 1]
    assert torch.equal(updates[0], updates[1]) and updates[0].abs().sum() > 0


def test_a_fog_node_is_lazy_or_an_attacker_not_both(agents: Agents, world: World) -> None:
    with pytest.raises(ConfigError, match="either lazy"):
        agents.fog(0, world.create(), lazy="zero", attack="noise")


def test_fog_stops_after_the_round_it_was_told_to_stop_after(world: World, agents: Agents) -> None:
    task_id = world.create()
    fog = agents.fog(0, task_id, stop_after_round=1)

    award(world, (agents.client(0, task_id),), (fog,))

    assert fog.agent.stopping
    assert world.publisher.contracts.fog_auction.job(task_id, 0).paid_up_to == 1


def test_a_fog_that_won_two_jobs_trains_them_together_in_one_pass(
    world: World, agents: Agents, caplog: pytest.LogCaptureFixture
) -> None:
    # prepare: two clients of one task, one fog node bidding for both jobs
    task_id = world.create()
    fog = agents.fog(0, task_id)
    award(world, (agents.client(0, task_id), agents.client(1, task_id)), (fog,), start=False)
    start_task(world.publisher, task_id)

    # execute
    with caplog.at_level(logging.INFO, logger="fog.node"):
        fog.step()

    # assert: one training call for both jobs, and both committed round 1
    trained = [record_fields(record) for record in caplog.records if record.getMessage().startswith("trained")]
    assert [(fields["jobs"], fields["round"]) for fields in trained] == [(2, 1)]
    auction = world.publisher.contracts.fog_auction
    assert [auction.job(task_id, index).paid_up_to for index in (0, 1)] == [1, 1]


def test_a_standby_fog_takes_over_the_job_of_a_winner_that_left_and_trains_the_next_round(
    world: World, agents: Agents
) -> None:
    # prepare: a three-round task; two nodes bid the same (the escrow caps a standby's price), the earlier
    # bid wins, commits round 1 and leaves; the other waits on standby
    terms = dataclasses.replace(TERMS, rounds=3)
    task_id = world.create(terms)
    same = CostModel(frequency=10**9, alpha=1e-13, margin=0.25)
    leaver, standby = agents.fog(0, task_id, stop_after_round=1, cost=same), agents.fog(1, task_id, cost=same)
    award(world, (agents.client(0, task_id),), (leaver, standby))
    post_round(world, task_id, 1)
    world.advance(terms.round_duration + 1)
    world.aggregator.contracts.fog_auction.report_missed_round(task_id, 0)  # round 2 missed: slashed, re-awarded
    post_round(world, task_id, 2)

    # execute
    standby.step()

    # assert: the standby node won the job from round 3 on and committed round 3
    job = world.publisher.contracts.fog_auction.job(task_id, 0)
    assert standby.jobs[f"{task_id}:0"].phase == Phase.WON
    assert standby.jobs[f"{task_id}:0"].from_round == 3
    assert (job.winner, job.paid_up_to) == (1, 3)
    assert standby.jobs[f"{task_id}:0"].committed == [3]


def test_on_a_fedave_task_the_fog_ships_its_trained_models_losses_on_the_job_data_inside_the_update(
    world: World, agents: Agents
) -> None:
    # prepare: a task whose strategy, fedave, needs the clients' local losses
    spec = dataclasses.replace(SPEC, strategy="fedave")
    task_id = world.create(spec=spec)
    client, fog = agents.client(0, task_id), agents.fog(0, task_id)

    # execute: the auction, the hand-off, the task's start; the winner trains round 1
    award(world, (client,), (fog,))

    # assert: the committed update carries one loss per job sample: those of start + delta, recomputed here
    contracts = world.publisher.contracts
    job = contracts.fog_auction.job(task_id, 0)
    update = load_update(
        world.publisher.store,
        spec,
        job.update_hash,
        task_id=task_id,
        round_number=1,
        client_index=0,
        client=client.address,
        data_size=job.data_size,
    )
    expected = ExpectedJobData(task_id, 0, job.data_size, spec.num_classes, spec.in_channels)
    data = fetch_job_data(world.publisher.store, client.state.data["data_hash"], expected)
    start = flatten(spec.initial_params(), spec.param_spec())[0]
    trained = start + flatten(update.params, spec.param_spec())[0]
    assert update.local_losses is not None and update.local_losses.shape == (job.data_size,)
    torch.testing.assert_close(
        update.local_losses, local_losses(spec.model_spec(), trained, (data.images, data.labels))
    )


def test_when_a_task_is_abandoned_the_fog_settles_its_job_and_withdraws_its_deposit_and_earnings(
    world: World, agents: Agents
) -> None:
    # prepare: the fog node won the job and committed round 1; the aggregator never posts it
    task_id = world.create()
    fog = agents.fog(0, task_id)
    award(world, (agents.client(0, task_id),), (fog,))
    registry = world.publisher.contracts.task_registry
    world.advance(TERMS.round_duration + registry.abandon_grace() + 1)
    world.publisher.contracts.task_registry.abandon_task(task_id)  # anyone may; here the publisher

    # execute
    fog.step()

    # assert: the job is settled (deposit back, round 1's price already released) and the node withdrew it all
    job = world.publisher.contracts.fog_auction.job(task_id, 0)
    assert job.status == JobStatus.SETTLED
    task_state = fog.state.data["tasks"][str(task_id)]
    assert task_state["ended"] and task_state["withdrawn"] > 0
    assert world.publisher.contracts.treasury.claimable(fog.address) == 0
