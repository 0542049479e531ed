"""RoundLedger.postPriors: the cross-task priors of eq. 8, posted once before round 1 and added to r_a."""

from __future__ import annotations

from fedchain.chain import bindings
from fedchain.fl.reputation import WAD, ClientReputation, score_round
from tests.contracts.conftest import (
    AGGREGATOR,
    PUBLISHER,
    STRANGER,
    FedChain,
    TaskParams,
)
from tests.contracts.test_rounds import PARAMS, commit_at, started


def test_posted_priors_are_stored_emitted_and_added_to_the_loss_reputation_under_the_cap(chain: FedChain) -> None:
    # Prepare: two clients; client 0 gets a prior of 0.4, client 1 one of 9.9 (the cap is 10)
    task = started(chain)
    priors = [4 * WAD // 10, 99 * WAD // 10]
    # Execute
    receipt = chain.send("RoundLedger", "postPriors", task, priors, by=AGGREGATOR)
    commit_at(chain, task, 0, 1, 100)
    commit_at(chain, task, 1, 1, 100)
    measurements = [(WAD, 100, True), (WAD, 100, True)]
    chain.post_round(task, 1, measurements)
    # Assert: the event, the views, and r_a = min(cap, prior + weighted mean) as the model says
    posted = receipt.events_of(bindings.PriorsPosted)[0]
    assert (posted.task_id, list(posted.priors)) == (task, priors)
    assert chain.view("RoundLedger", "priorsPosted", task) is True
    assert [chain.view("RoundLedger", "prior", task, i) for i in range(2)] == priors
    mechanism = PARAMS.mechanism()
    for index, prior in enumerate(priors):
        score = score_round(ClientReputation.joined(mechanism), mechanism, WAD, 100, True, prior)
        loss_rep, time_rep = chain.view("RoundLedger", "reputation", task, index)
        assert (loss_rep, time_rep) == (score.reputation.loss_reputation, score.reputation.time_reputation)
        assert chain.view("RoundLedger", "client", task, index).earned == score.payment
    assert chain.view("RoundLedger", "reputation", task, 0)[0] == WAD + 4 * WAD // 10
    assert chain.view("RoundLedger", "reputation", task, 1)[0] == PARAMS.reputation_cap


def test_without_priors_every_prior_is_zero(chain: FedChain) -> None:
    task = started(chain)
    assert chain.view("RoundLedger", "priorsPosted", task) is False
    assert chain.view("RoundLedger", "prior", task, 1) == 0


def test_priors_are_refused_from_a_stranger_before_the_start_twice_after_round_1_miscounted_or_above_the_cap(
    chain: FedChain,
) -> None:
    # Prepare: a task not yet started
    task = chain.staffed_task(PARAMS)
    # Execute / assert
    with chain.reverts(bindings.LedgerWrongTaskStatus, task, bindings.TaskStatus.OPEN):
        chain.send("RoundLedger", "postPriors", task, [0, 0], by=AGGREGATOR)
    chain.send("TaskRegistry", "startTask", task, by=PUBLISHER)
    with chain.reverts(bindings.LedgerNotAggregator, task, chain.account(STRANGER)):
        chain.send("RoundLedger", "postPriors", task, [0, 0], by=STRANGER)
    with chain.reverts(bindings.LedgerWrongPriorCount, task, 1, 2):
        chain.send("RoundLedger", "postPriors", task, [0], by=AGGREGATOR)
    with chain.reverts(bindings.LedgerPriorAboveCap, task, 1, PARAMS.reputation_cap + 1, PARAMS.reputation_cap):
        chain.send("RoundLedger", "postPriors", task, [0, PARAMS.reputation_cap + 1], by=AGGREGATOR)
    chain.send("RoundLedger", "postPriors", task, [0, 0], by=AGGREGATOR)
    with chain.reverts(bindings.LedgerPriorsAlreadyPosted, task):
        chain.send("RoundLedger", "postPriors", task, [0, 0], by=AGGREGATOR)


def test_priors_are_refused_once_round_1_is_posted(chain: FedChain) -> None:
    # Prepare
    task = started(chain, TaskParams(rounds=3))
    commit_at(chain, task, 0, 1, 100)
    commit_at(chain, task, 1, 1, 100)
    chain.post_round(task, 1, [(WAD, 100, True), (WAD, 100, True)])
    # Execute / assert
    with chain.reverts(bindings.LedgerPriorsTooLate, task, 2):
        chain.send("RoundLedger", "postPriors", task, [0, 0], by=AGGREGATOR)
