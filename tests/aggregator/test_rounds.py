"""The aggregator on a real chain: real trained updates, a malformed one, a missed deadline, a restart, settlement."""

from __future__ import annotations

import dataclasses
import json
import pickle
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from eth_utils import keccak
from rich.console import Console

from fedchain.agent.finality import finalize_due
from fedchain.aggregator import Aggregator, AggregatorSettings
from fedchain.aggregator.checkpoint import load_strategy_state
from fedchain.audit import CheckName, read_chain
from fedchain.audit.auditor import audit_on_chain
from fedchain.audit.render import budget_lines
from fedchain.audit.replay import DEPOSIT_FORFEIT, reason_name
from fedchain.audit.scores import verify_scores
from fedchain.chain.abi import E
from fedchain.chain.bindings import (
    BondPosted,
    ClientRemoved,
    ClientStatus,
    Credited,
    FogSlashed,
    JobReassigned,
    JobStatus,
    PriorsPosted,
    RoundPosted,
    TaskFinished,
    TaskSettled,
    TaskStatus,
)
from fedchain.data.datasets import load_dataset
from fedchain.errors import AgentError
from fedchain.fl.params import unflatten
from fedchain.fl.quality import to_wad
from fedchain.publisher import start_task
from fedchain.publisher.cli import render_task
from fedchain.publisher.service import task_view
from fedchain.system.progress import EventLog
from fedchain.taskspec import load_spec, load_validation
from fedchain.trainer.evaluation import local_losses, predict
from tests.aggregator.conftest import FOGS, SPEC, TERMS, World

PRICE = 10**14


def task_events(world: World, task_id: int, kind: type[E]) -> list[E]:
    log = EventLog(world.publisher)
    log.refresh()
    return log.of(kind, task_id)


def aggregator_for(world: World, task_id: int, state_path: Path) -> Aggregator:
    settings = AggregatorSettings(task_id=task_id, state_path=state_path, poll_interval_s=0.01)
    return Aggregator(world.aggregator, settings)


def step_until(aggregator: Aggregator, done: Callable[[], object], limit: int = 20) -> None:
    """Step the aggregator until ``done()`` holds (each step handles new blocks or does the round's work)."""
    for _ in range(limit):
        if done():
            return
        aggregator.step()
    assert done(), "the aggregator did not get there"


@pytest.fixture(scope="module")
def mnist_slices() -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Three clients' training data: 64 MNIST training images each."""
    train = load_dataset("mnist", train=True)
    return [(train.images[i * 64 : (i + 1) * 64], train.labels[i * 64 : (i + 1) * 64]) for i in range(3)]


def test_round_scores_real_updates_rejects_malformed_one_and_slashes_the_late_fog(
    world: World, tmp_path: Path, mnist_slices: list
) -> None:
    # prepare: client 0 honest, client 1's fog commits a NaN update, client 2's fog never commits
    # (a standby bid waits), client 3's fog commits a pickle instead of safetensors
    task_id = world.staffed_task(
        {0: [(FOGS[0], PRICE)], 1: [(FOGS[1], PRICE)], 2: [(FOGS[2], PRICE), (FOGS[3], PRICE)], 3: [(FOGS[4], PRICE)]}
    )  # ties go to the earlier bid
    model_id = world.publisher.contracts.task_registry.params(task_id).model_id
    start = world.global_model(task_id, model_id, 0)
    spec = load_spec(world.publisher.store, world.publisher.contracts.task_registry.params(task_id).dataset_id)
    world.commit_trained_update(task_id, 0, FOGS[0], 1, start, *mnist_slices[0])
    poisoned = unflatten(torch.full_like(start, float("nan")), spec.param_spec())
    world.commit_params(task_id, 1, FOGS[1], 1, poisoned, spec)
    pickled = world.session(FOGS[4]).store.put(pickle.dumps({"weights": [1.0, 2.0]}))
    world.session(FOGS[4]).contracts.fog_auction.commit_update(task_id, 3, 1, pickled, keccak(text="transcript"))
    aggregator = aggregator_for(world, task_id, tmp_path / "aggregator.json")
    registry = world.publisher.contracts.task_registry

    # execute: before the deadline the aggregator waits for client 2; after it, the round completes
    for _ in range(3):
        aggregator.step()
    assert registry.state(task_id).current_round == 1
    world.advance(TERMS.round_duration + 1)
    step_until(aggregator, lambda: registry.state(task_id).current_round == 2)
    removed_while_pending = task_events(world, task_id, ClientRemoved)
    # the post is pending until its challenge window has passed; then anyone finalises it (here the publisher,
    # so that no further step of the aggregator works on round 2)
    world.pass_challenge_window(task_id)
    finalized = finalize_due(world.publisher, task_id)

    # assert: one post with the honest client scored, the NaN update failed, the late fog slashed and replaced
    assert removed_while_pending == [] and finalized == (1,)
    (posted,) = task_events(world, task_id, RoundPosted)
    honest, poisoned_m, missing, pickled_m = posted.measurements
    round_start = registry.state(task_id).started_at
    commit_times = world.publisher.contracts.fog_auction.commit_times(task_id, 1, 4)
    assert honest.accepted and honest.quality == 10**18  # the only accepted client: loss_avg / loss_0 = 1
    assert honest.round_time == commit_times[0] - round_start
    # a rejected update keeps its measured round time (the contract checks it against the commit);
    # it may be 0 when the commit landed in the round's first second
    assert (poisoned_m.accepted, poisoned_m.quality, poisoned_m.round_time) == (False, 0, commit_times[1] - round_start)
    assert (missing.accepted, missing.quality, missing.round_time) == (False, 0, 0)
    assert (pickled_m.accepted, pickled_m.quality, pickled_m.round_time) == (False, 0, commit_times[3] - round_start)
    (slashed,) = task_events(world, task_id, FogSlashed)
    assert (slashed.client_index, slashed.fog, slashed.round) == (2, world.session(FOGS[2]).address, 1)
    (reassigned,) = task_events(world, task_id, JobReassigned)
    job = world.publisher.contracts.fog_auction.job(task_id, 2)
    assert job.status == JobStatus.AWARDED and reassigned.from_round == 2
    assert [r.client_index for r in task_events(world, task_id, ClientRemoved)] == [1, 3]  # quality 0 < q_min
    # their deposits go to the deployment's sink, in one credit at finalisation; the publisher gets none of it
    credits = task_events(world, task_id, Credited)
    forfeits = [(c.to, c.amount) for c in credits if reason_name(c.reason) == DEPOSIT_FORFEIT]
    assert forfeits == [(world.publisher.contracts.treasury.sink(), 2 * TERMS.client_deposit)]
    assert [c for c in credits if c.to == world.publisher.address] == []
    # the posted model is FedAvg of the one accepted update, in the store, and its accuracy is what was posted
    new_global = world.global_model(task_id, posted.model_hash, 1)
    accuracy = predict(spec.model_spec(), new_global, load_validation(spec)).accuracies[0]
    assert posted.accuracy == to_wad([float(accuracy)])[0]


def test_restarted_aggregator_resumes_from_the_chain_without_posting_twice_and_settles(
    world: World, tmp_path: Path, mnist_slices: list
) -> None:
    # prepare: a two-client task whose round 1 was posted by an aggregator that then "died" before saving, and
    # whose strategy checkpoint is lost too (a new machine)
    task_id = world.staffed_task({0: [(FOGS[0], PRICE)], 1: [(FOGS[1], PRICE)]})
    registry = world.publisher.contracts.task_registry
    start = world.global_model(task_id, registry.params(task_id).model_id, 0)
    for index in (0, 1):
        world.commit_trained_update(task_id, index, FOGS[index], 1, start, *mnist_slices[index])
    state_path = tmp_path / "aggregator.json"
    first = aggregator_for(world, task_id, state_path)
    step_until(first, lambda: registry.state(task_id).current_round == 2)
    state_path.write_text(json.dumps({**json.loads(state_path.read_text()), "data": {}, "last_block": 0}))
    strategy_type = first._load_context().strategy.state_type
    saved = load_strategy_state(first.settings.checkpoint_dir, 1, strategy_type)
    assert saved is not None
    shutil.rmtree(first.settings.checkpoint_dir)

    # execute: a new process with the stale state; then round 2's commits arrive
    second = aggregator_for(world, task_id, state_path)
    for _ in range(4):
        second.step()
    (posted_1,) = task_events(world, task_id, RoundPosted)
    round_1_model = world.global_model(task_id, posted_1.model_hash, 1)
    for index in (0, 1):
        world.commit_trained_update(task_id, index, FOGS[index], 2, round_1_model, *mnist_slices[index])
    step_until(second, lambda: registry.state(task_id).status == TaskStatus.FINISHED, limit=40)
    for _ in range(2):
        second.step()
    # both rounds are pending (their challenge window): nothing is settled yet
    assert not second.state.finished and registry.state(task_id).status == TaskStatus.FINISHED
    world.pass_challenge_window(task_id)
    step_until(second, lambda: second.state.finished, limit=40)

    # assert: the state after round 1 was rebuilt as it was, and the audit reproduces round 2 scored from it
    rebuilt = load_strategy_state(second.settings.checkpoint_dir, 1, strategy_type)
    assert rebuilt is not None and rebuilt.parts()[1] == saved.parts()[1]
    assert all(torch.equal(a, b) for a, b in zip(rebuilt.parts()[0].values(), saved.parts()[0].values(), strict=True))
    events = read_chain(world.publisher.w3, world.publisher.deployment, task_id).events
    scores = verify_scores(task_id, events, world.publisher.store)
    assert scores.tally.findings.get(CheckName.SCORES, []) == []
    assert [r.within_tolerance for r in scores.rounds] == [True, True]
    # the priors and each round posted once, round 2 trained from round 1's model, the task settled
    assert len(task_events(world, task_id, PriorsPosted)) == 1
    posted = task_events(world, task_id, RoundPosted)
    assert [p.round for p in posted] == [1, 2]
    assert all(m.accepted for p in posted for m in p.measurements)
    assert registry.state(task_id).status == TaskStatus.SETTLED
    assert len(task_events(world, task_id, TaskSettled)) == 1
    assert all(world.publisher.contracts.fog_auction.job(task_id, i).status == JobStatus.SETTLED for i in (0, 1))
    clients = [world.publisher.contracts.round_ledger.client(task_id, i) for i in (0, 1)]
    assert [c.rounds for c in clients] == [2, 2] and all(c.status == ClientStatus.ACTIVE for c in clients)
    # settlement zeroed the ledger's earnings: `task show` reads what each client was paid from the settlement
    view = task_view(world.publisher, task_id)
    assert all(c.info.earned == 0 and c.settled is not None and c.settled.earned > 0 for c in view.clients)
    console = Console(width=400, record=True, color_system=None)
    for table in render_task(view):
        console.print(table)
    shown = console.export_text()
    assert all(str(c.settled.earned) in shown for c in view.clients if c.settled)


def test_an_aggregator_acting_at_a_depth_posts_a_round_only_once_its_commits_are_that_deep(
    world: World, tmp_path: Path, mnist_slices: list
) -> None:
    # prepare: round 1's commit is in the latest block; the aggregator acts at 3 confirmations
    task_id = world.staffed_task({0: [(FOGS[0], PRICE)]})
    registry = world.publisher.contracts.task_registry
    start = world.global_model(task_id, registry.params(task_id).model_id, 0)
    world.commit_trained_update(task_id, 0, FOGS[0], 1, start, *mnist_slices[0])
    settings = AggregatorSettings(
        task_id=task_id, state_path=tmp_path / "aggregator.json", poll_interval_s=0.01, confirmations=3
    )
    aggregator = Aggregator(world.aggregator, settings)

    # execute: steps while the commit is shallower than 3 blocks (its priors post mines one), then blocks come
    for _ in range(4):
        aggregator.step()
    waited = (registry.state(task_id).current_round, task_events(world, task_id, RoundPosted))
    for _ in range(3):
        world.publisher.w3.provider.make_request("evm_mine", [])
    step_until(aggregator, lambda: registry.state(task_id).current_round == 2)

    # assert: nothing was posted before the commit was 3 blocks deep; then round 1 was, with the commit in it
    assert waited == (1, [])
    (posted,) = task_events(world, task_id, RoundPosted)
    assert posted.round == 1 and posted.measurements[0].committed


def test_a_budget_that_runs_short_scales_rounds_down_which_the_aggregator_logs_and_the_audit_reports(
    world: World, tmp_path: Path, mnist_slices: list, caplog: pytest.LogCaptureFixture
) -> None:
    # prepare: two fast clients ask psi x r_t^2 = 0.1 ether each per round (r_t at the cap 10); the budget is 0.15
    budget = 15 * 10**16
    task_id = world.staffed_task({0: [(FOGS[0], PRICE)], 1: [(FOGS[1], PRICE)]}, budget=budget)
    registry = world.publisher.contracts.task_registry
    aggregator = aggregator_for(world, task_id, tmp_path / "aggregator.json")
    model = registry.params(task_id).model_id

    # execute: both rounds, their windows, the settlement
    for round_number in (1, 2):
        start = world.global_model(task_id, model, round_number - 1)
        for index in (0, 1):
            world.commit_trained_update(task_id, index, FOGS[index], round_number, start, *mnist_slices[index])

        def posted(r: int = round_number) -> bool:
            return registry.state(task_id).current_round > r or registry.state(task_id).status != TaskStatus.RUNNING

        step_until(aggregator, posted)
        (model,) = [p.model_hash for p in task_events(world, task_id, RoundPosted) if p.round == round_number]
    world.pass_challenge_window(task_id)
    with caplog.at_level("WARNING"):
        step_until(aggregator, lambda: aggregator.state.finished, limit=40)
    report = audit_on_chain(world.publisher.w3, world.publisher.deployment, task_id, world.publisher.store)

    # assert: the whole budget went to round 1, scaled down; round 2 asked as much and got nothing; both said so
    assert report.passed, report.failed_checks
    budget_view = report.to_dict()["budget"]
    paid = [(r["round"], int(r["paid"])) for r in budget_view["scaled_rounds"]]
    assert [r for r, _ in paid] == [1, 2] and budget - 2 < paid[0][1] <= budget and paid[1][1] == 0  # wei of rounding
    assert all(int(r["demanded"]) > int(r["paid"]) for r in budget_view["scaled_rounds"])
    assert budget_view["bonuses_scaled_down"] is True
    warned = [r.getMessage() for r in caplog.records if "budget short" in r.getMessage()]
    assert len(warned) == 3 and "round=1" in warned[0] and "round=2" in warned[1] and "final bonuses" in warned[2]
    assert "round 1: the budget paid" in "\n".join(budget_lines(report))


def test_aggregator_refuses_a_task_it_is_not_the_aggregator_of(world: World, tmp_path: Path) -> None:
    task_id = world.create()
    impostor = Aggregator(world.publisher, AggregatorSettings(task_id=task_id, state_path=tmp_path / "a.json"))

    with pytest.raises(AgentError, match="aggregator") as caught:
        impostor.step()

    assert "key" in caught.value.hint


def test_task_finishes_early_once_the_target_accuracy_is_reached_and_is_settled(
    world: World, tmp_path: Path, mnist_slices: list
) -> None:
    # prepare: a 2-round task whose target (1% accuracy) any model reaches after round 1
    task_id = world.staffed_task({0: [(FOGS[0], PRICE)]}, terms=dataclasses.replace(TERMS, target_accuracy=0.01))
    registry = world.publisher.contracts.task_registry
    world.commit_trained_update(
        task_id, 0, FOGS[0], 1, world.global_model(task_id, registry.params(task_id).model_id, 0), *mnist_slices[0]
    )
    aggregator = aggregator_for(world, task_id, tmp_path / "aggregator.json")

    # execute: the round is posted and the task finishes; it settles once the round is final
    step_until(aggregator, lambda: registry.state(task_id).status == TaskStatus.FINISHED)
    world.pass_challenge_window(task_id)
    step_until(aggregator, lambda: aggregator.state.finished)

    # assert: one round posted, the task finished with the target reached, then settled
    (finished,) = task_events(world, task_id, TaskFinished)
    assert (finished.last_round, finished.target_reached) == (1, True)
    assert [p.round for p in task_events(world, task_id, RoundPosted)] == [1]
    assert registry.state(task_id).status == TaskStatus.SETTLED


def test_fedave_round_scores_the_fog_nodes_local_losses_rejects_malformed_ones_and_the_audit_reproduces_it(
    world: World, tmp_path: Path, mnist_slices: list
) -> None:
    # prepare: a fedave task; clients 0 and 1 honest, client 2's fog node ships one local loss too few
    spec = dataclasses.replace(SPEC, strategy="fedave")
    task_id = world.staffed_task({i: [(FOGS[i], PRICE)] for i in range(3)}, spec=spec)
    registry = world.publisher.contracts.task_registry
    start = world.global_model(task_id, registry.params(task_id).model_id, 0)
    for index in (0, 1):
        world.commit_trained_update(task_id, index, FOGS[index], 1, start, *mnist_slices[index])
    images, labels = mnist_slices[2]
    short = local_losses(spec.model_spec(), start, (images, labels))[:-1]
    world.commit_params(task_id, 2, FOGS[2], 1, unflatten(torch.zeros_like(start), spec.param_spec()), spec, short)
    aggregator = aggregator_for(world, task_id, tmp_path / "aggregator.json")

    # execute
    step_until(aggregator, lambda: registry.state(task_id).current_round == 2)

    # assert: the honest clients scored by their normalised reputation (mean 1), the short losses rejected
    (posted,) = task_events(world, task_id, RoundPosted)
    assert [m.accepted for m in posted.measurements] == [True, True, False]
    assert sum(m.quality for m in posted.measurements) == pytest.approx(2 * 10**18, rel=1e-12)
    assert posted.measurements[0].quality != posted.measurements[1].quality
    readings = read_chain(world.publisher.w3, world.publisher.deployment, task_id)
    scores = verify_scores(task_id, readings.events, world.publisher.store)
    assert scores.tally.findings.get(CheckName.SCORES, []) == []
    [reproduced] = scores.rounds
    assert reproduced.within_tolerance and reproduced.rejections == (None, None, "bad_local_losses")


def test_the_aggregator_posts_its_bond_while_the_task_is_open_once_and_only_when_told(
    world: World, tmp_path: Path
) -> None:
    # prepare: a staffed task nobody has bonded yet
    task_id = world.staffed_task({0: [(FOGS[0], PRICE)]}, start=False, bond=False)
    contracts = world.publisher.contracts
    told_not_to = Aggregator(
        world.aggregator,
        AggregatorSettings(task_id=task_id, state_path=tmp_path / "no-bond.json", poll_interval_s=0.01, bond=False),
    )
    aggregator = aggregator_for(world, task_id, tmp_path / "aggregator.json")

    # execute: an aggregator told not to bond steps while the task is open; then one that bonds, several times
    for _ in range(3):
        told_not_to.step()
    unbonded = contracts.disputes.bonded(task_id)
    step_until(aggregator, lambda: contracts.disputes.bonded(task_id))
    nonce = world.aggregator.w3.eth.get_transaction_count(world.aggregator.address)
    for _ in range(3):
        aggregator.step()
    start_task(world.publisher, task_id, force=True)  # no data handed off: the test plays the fog node

    # assert: the bond came from the aggregator, exactly the task's, once; the task could start with it
    assert not unbonded
    bond = contracts.task_registry.params(task_id).aggregator_bond
    assert contracts.disputes.bond(task_id) == (bond, world.aggregator.address)
    assert [(e.bonder, e.amount) for e in task_events(world, task_id, BondPosted)] == [(world.aggregator.address, bond)]
    assert world.aggregator.w3.eth.get_transaction_count(world.aggregator.address) == nonce  # no second post
    assert contracts.task_registry.state(task_id).status == TaskStatus.RUNNING
