"""RoundLedger.postPriors: the cross-task priors of eq. 8, posted once before round 1 and added to r_a
(except in a round whose quality is below q_min)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fedchain.chain import bindings
from fedchain.fl.reputation import WAD, ClientReputation, score_round
from tests.contracts.conftest import (
    AGGREGATOR,
    PUBLISHER,
    SINK,
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


def test_a_high_prior_does_not_carry_a_client_through_a_quality_0_round(chain: FedChain) -> None:
    # Prepare: client 0 has a prior of 5 (half the cap), client 1 one of 0.25; both send good round-1 updates
    task = started(chain)
    priors = [5 * WAD, WAD // 4]
    chain.send("RoundLedger", "postPriors", task, priors, by=AGGREGATOR)
    commit_at(chain, task, 0, 1, 100)
    commit_at(chain, task, 1, 1, 100)
    chain.post_round(task, 1, [(WAD, 100, True), (WAD, 100, True)])
    commit_at(chain, task, 0, 2, 100)
    commit_at(chain, task, 1, 2, 100)
    # Execute: round 2, client 0 sends garbage (quality 0), client 1 exactly q_min
    round_2 = [(0, 100, True), (PARAMS.min_quality, 100, True)]
    receipt = chain.post_round(task, 2, round_2)
    # Assert: client 0's prior no longer counts, so r_a = 0 < r_a_min (with it r_a was 5): removed, deposit forfeited;
    # at exactly q_min the prior still applies: r_a = 0.25 + (1 * 1 + 2 * 0.5) / 3
    removed = receipt.events_of(bindings.ClientRemoved)
    assert [(e.client_index, e.round, e.loss_reputation) for e in removed] == [(0, 2, 0)]
    assert chain.view("RoundLedger", "isActive", task, 0) is False
    assert chain.view("Treasury", "claimable", chain.account(SINK)) == PARAMS.client_deposit
    assert chain.view("RoundLedger", "depositsHeld", task) == PARAMS.client_deposit
    assert chain.view("RoundLedger", "reputation", task, 1)[0] == WAD // 4 + 2 * WAD // 3
    mechanism = PARAMS.mechanism()
    for index, prior in enumerate(priors):
        state = score_round(ClientReputation.joined(mechanism), mechanism, WAD, 100, True, prior).reputation
        score = score_round(state, mechanism, *round_2[index], prior)
        info = chain.view("RoundLedger", "client", task, index)
        assert (info.loss_reputation, info.time_reputation) == (
            score.reputation.loss_reputation,
            score.reputation.time_reputation,
        )
        assert score.removed is (index == 0)


#: Qualities around q_min = 0.5 (0 is garbage; 0.5 - 1 wei is just below, 0.5 exactly at it).
QUALITIES = st.sampled_from([0, WAD // 4, PARAMS.min_quality - 1, PARAMS.min_quality, WAD, 3 * WAD // 2])


@settings(max_examples=10, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(
    priors=st.lists(st.sampled_from([0, WAD // 4, WAD, 5 * WAD]), min_size=2, max_size=2),
    rounds=st.lists(st.lists(QUALITIES, min_size=2, max_size=2), min_size=PARAMS.rounds, max_size=PARAMS.rounds),
)
def test_rounds_around_q_min_with_priors_match_the_model_to_the_wei(
    chain: FedChain, priors: list[int], rounds: list[list[int]]
) -> None:
    # Prepare: a started task with the drawn priors (a quality of 0 stands for a rejected update)
    snapshot = chain.w3.provider.make_request("evm_snapshot", [])["result"]
    mechanism = PARAMS.mechanism()
    model = [ClientReputation.joined(mechanism)] * 2
    earned, active = [0, 0], [True, True]
    try:
        task = started(chain)
        chain.send("RoundLedger", "postPriors", task, priors, by=AGGREGATOR)
        for round_, qualities in enumerate(rounds, start=1):
            # Execute: every active client's fog commits 100 s into the round, the aggregator posts
            for index in range(2):
                if active[index]:
                    commit_at(chain, task, index, round_, 100)
            measurements = [(q, 100, q > 0) if active[index] else (0, 0, False) for index, q in enumerate(qualities)]
            chain.post_round(task, round_, measurements)
            for index, (quality, seconds, accepted) in enumerate(measurements):
                if active[index]:
                    score = score_round(model[index], mechanism, quality, seconds, accepted, priors[index])
                    model[index], active[index] = score.reputation, not score.removed
                    earned[index] += score.payment
            # Assert: every reputation, payment and removal as the model says, to the wei
            for index in range(2):
                info = chain.view("RoundLedger", "client", task, index)
                assert (info.loss_reputation, info.time_reputation, info.earned) == (
                    model[index].loss_reputation,
                    model[index].time_reputation,
                    earned[index],
                )
                assert chain.view("RoundLedger", "isActive", task, index) is active[index]
        forfeited = active.count(False) * PARAMS.client_deposit
        assert chain.view("Treasury", "claimable", chain.account(SINK)) == forfeited
    finally:
        chain.w3.provider.make_request("evm_revert", [snapshot])


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
