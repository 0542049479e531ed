"""RoundLedger: joining, posting rounds (reputation, eq. 15 payments, removals), and settlement."""

from __future__ import annotations

import dataclasses
from typing import Any

from fedchain.chain import bindings
from fedchain.chain.merkle import ZERO_ROOT
from fedchain.fl.reputation import WAD, ClientReputation, final_bonus, scale_pro_rata, score_round
from tests.contracts.conftest import AGGREGATOR, CLIENTS, FOGS, PUBLISHER, SINK, STRANGER, FedChain, TaskParams

PARAMS = TaskParams()


def started(chain: FedChain, params: TaskParams = PARAMS, **kwargs: Any) -> int:
    task = chain.staffed_task(params, **kwargs)
    chain.send("TaskRegistry", "startTask", task, by=PUBLISHER)
    return task


def commit_at(chain: FedChain, task: int, index: int, round_: int, seconds: int) -> None:
    """Client ``index``'s fog commits round ``round_`` exactly ``seconds`` after the round began."""
    chain.set_next_timestamp(chain.view("TaskRegistry", "state", task).round_started_at + seconds)
    chain.commit_update(task, index, FOGS[index], round_)


# ----------------------------------------------------------------------------- join


def test_join_takes_the_deposit_and_the_data_commitment(chain: FedChain) -> None:
    task = chain.create_task()
    receipt = chain.send("RoundLedger", "join", task, b"\x11" * 32, by=CLIENTS[0], value=PARAMS.client_deposit)
    joined = receipt.events_of(bindings.ClientJoined)[0]
    assert (joined.client, joined.client_index, joined.deposit) == (chain.account(CLIENTS[0]), 0, PARAMS.client_deposit)
    assert chain.view("RoundLedger", "dataCommitment", task, 0) == b"\x11" * 32
    assert chain.view("RoundLedger", "clientIndex", task, chain.account(CLIENTS[0])) == 0
    assert chain.view("RoundLedger", "clientCount", task) == 1
    assert chain.view("RoundLedger", "isActive", task, 0) is True
    assert chain.view("RoundLedger", "reputation", task, 0) == (WAD, WAD)
    assert chain.view("RoundLedger", "depositsHeld", task) == PARAMS.client_deposit
    assert chain.view("Treasury", "held", task) == 10**18 + PARAMS.aggregator_bond + PARAMS.client_deposit


def test_join_refuses_a_wrong_deposit_a_second_join_a_full_task_and_a_started_task(chain: FedChain) -> None:
    task = chain.create_task(dataclasses.replace(PARAMS, max_clients=1))
    with chain.reverts(bindings.LedgerWrongDeposit, task, 1, PARAMS.client_deposit):
        chain.send("RoundLedger", "join", task, b"\0" * 32, by=CLIENTS[0], value=1)
    chain.join(task, CLIENTS[0])
    with chain.reverts(bindings.LedgerAlreadyJoined, task, chain.account(CLIENTS[0])):
        chain.join(task, CLIENTS[0])
    with chain.reverts(bindings.LedgerTaskFull, task, 1):
        chain.join(task, CLIENTS[1])
    chain.send("TaskRegistry", "startTask", task, by=PUBLISHER)
    with chain.reverts(bindings.LedgerWrongTaskStatus, task, bindings.TaskStatus.RUNNING):
        chain.join(task, CLIENTS[2])
    with chain.reverts(bindings.LedgerNotClient, task, chain.account(STRANGER)):
        chain.view("RoundLedger", "clientIndex", task, chain.account(STRANGER))
    with chain.reverts(bindings.LedgerUnknownClientIndex, task, 5):
        chain.view("RoundLedger", "client", task, 5)


# ----------------------------------------------------------------------------- rounds


def test_a_final_round_updates_reputations_and_credits_eq15_exactly_as_the_model(chain: FedChain) -> None:
    # Prepare: two clients; client 0 fast and good, client 1 slow (above t_max) and mediocre.
    task = started(chain)
    commit_at(chain, task, 0, 1, 100)
    commit_at(chain, task, 1, 1, 350)
    measurements = [(3 * WAD // 2, 100, True), (WAD * 3 // 5, 352, True)]  # 352 is within the 5 s tolerance
    # Execute
    receipt = chain.post_round(task, 1, measurements, accuracy=WAD // 2)
    # Assert: state and payments equal the Python model to the wei.
    mechanism = PARAMS.mechanism()
    expected = [score_round(ClientReputation.joined(mechanism), mechanism, q, t, ok) for q, t, ok in measurements]
    for index, score in enumerate(expected):
        info = chain.view("RoundLedger", "client", task, index)
        assert (info.rounds, info.sum_quality, info.sum_time_ratio) == (
            1,
            score.reputation.sum_quality,
            score.reputation.sum_time_ratio,
        )
        assert (info.loss_reputation, info.time_reputation) == (
            score.reputation.loss_reputation,
            score.reputation.time_reputation,
        )
        assert info.earned == score.payment
    posted = receipt.events_of(bindings.RoundPosted)[0]
    finalized = receipt.events_of(bindings.RoundFinalized)[0]
    assert (finalized.paid, finalized.forfeited) == (sum(s.payment for s in expected), 0)
    assert [tuple(m) for m in posted.measurements] == [(*m, True) for m in measurements]
    assert posted.model_hash == chain.w3.keccak(text="model-1")
    spent = receipt.events_of(bindings.BudgetSpent)[0]
    assert (spent.round, spent.spent, spent.budget_left) == (1, finalized.paid, 10**18 - finalized.paid)
    state = chain.view("TaskRegistry", "state", task)
    assert (state.current_round, state.budget_left) == (2, 10**18 - finalized.paid)
    assert chain.view("RoundLedger", "rewardsHeld", task) == finalized.paid
    assert chain.view("RoundLedger", "rounds", task) == (1, 1)


def test_only_the_aggregator_posts_and_a_round_cannot_be_posted_twice(chain: FedChain) -> None:
    task = started(chain)
    commit_at(chain, task, 0, 1, 50)
    commit_at(chain, task, 1, 1, 60)
    measurements = [(WAD, 50, True, True), (WAD, 60, True, True)]
    with chain.reverts(bindings.LedgerNotAggregator, task, chain.account(STRANGER)):
        chain.send("RoundLedger", "postRound", task, 1, b"\0" * 32, 0, ZERO_ROOT, ZERO_ROOT, measurements, by=STRANGER)
    chain.post_round(task, 1, measurements)
    with chain.reverts(bindings.LedgerWrongRound, task, 1, 2):
        chain.post_round(task, 1, measurements)


def test_post_round_checks_the_measurements_against_the_commits(chain: FedChain) -> None:
    task = started(chain)
    with chain.reverts(bindings.LedgerWrongMeasurementCount, task, 1, 2):
        chain.post_round(task, 1, [(WAD, 50, True)])
    commit_at(chain, task, 0, 1, 50)
    deadline = chain.view("TaskRegistry", "roundDeadline", task)
    with chain.reverts(bindings.LedgerRoundNotReady, task, 1, deadline):
        chain.post_round(task, 1, [(WAD, 50, True), (0, 0, False)])
    with chain.reverts(bindings.LedgerRoundTimeMismatch, task, 0, 40, 50):
        chain.post_round(task, 1, [(WAD, 40, True), (0, 0, False)])
    chain.advance(PARAMS.round_duration)
    with chain.reverts(bindings.LedgerUncommittedUpdate, task, 1):
        chain.post_round(task, 1, [(WAD, 50, True), (WAD, 50, True)])
    # `committed` must say what the chain saw: client 0 committed, client 1 did not.
    with chain.reverts(bindings.LedgerCommitMismatch, task, 0, True):
        chain.post_round(task, 1, [(WAD, 50, True, False), (0, 0, False, False)])
    with chain.reverts(bindings.LedgerCommitMismatch, task, 1, False):
        chain.post_round(task, 1, [(WAD, 50, True, True), (0, 0, False, True)])
    # After the deadline a client without a commit is skipped: no reputation change, no payment.
    chain.post_round(task, 1, [(WAD, 50, True), (0, 0, False)])
    assert chain.view("RoundLedger", "client", task, 1).rounds == 0
    assert chain.view("RoundLedger", "client", task, 0).rounds == 1


def test_a_client_below_the_thresholds_is_removed_and_its_deposit_goes_to_the_sink(chain: FedChain) -> None:
    task = started(chain)
    commit_at(chain, task, 0, 1, 50)
    commit_at(chain, task, 1, 1, 60)
    # Client 1's update was rejected: quality 0 -> r_a = 0 < r_a_min.
    receipt = chain.post_round(task, 1, [(WAD, 50, True), (WAD, 60, False)])
    removed = receipt.events_of(bindings.ClientRemoved)
    assert [(e.client_index, e.round, e.loss_reputation) for e in removed] == [(1, 1, 0)]
    assert receipt.events_of(bindings.RoundFinalized)[0].forfeited == PARAMS.client_deposit
    assert chain.view("RoundLedger", "isActive", task, 1) is False
    assert chain.view("RoundLedger", "client", task, 1).earned == 0
    # The forfeit goes to the sink: never to the publisher, who appoints the aggregator, nor to the aggregator.
    assert chain.view("Treasury", "claimable", chain.account(SINK)) == PARAMS.client_deposit
    assert chain.view("Treasury", "claimable", chain.account(PUBLISHER)) == 0
    assert chain.view("Treasury", "claimable", chain.account(AGGREGATOR)) == 0
    assert chain.view("RoundLedger", "depositsHeld", task) == PARAMS.client_deposit
    # A removed client's fog takes no more commits.
    with chain.reverts(bindings.AuctionClientInactive, task, 1):
        chain.commit_update(task, 1, FOGS[1], 2)


def test_payments_scale_down_pro_rata_when_the_budget_runs_short(chain: FedChain) -> None:
    # Each client would earn psi = 1e15 (r_a = r_t = 1); the budget holds 1.5e15.
    task = started(chain, budget=15 * 10**14)
    commit_at(chain, task, 0, 1, 200)
    commit_at(chain, task, 1, 1, 200)
    receipt = chain.post_round(task, 1, [(WAD, 200, True), (WAD, 200, True)])
    assert [chain.view("RoundLedger", "client", task, i).earned for i in (0, 1)] == scale_pro_rata(
        [10**15, 10**15], 15 * 10**14
    )
    assert receipt.events_of(bindings.RoundFinalized)[0].paid == 15 * 10**14
    assert chain.view("TaskRegistry", "state", task).budget_left == 0


def test_reaching_the_target_accuracy_finishes_the_task_early(chain: FedChain) -> None:
    task = started(chain, dataclasses.replace(PARAMS, target_accuracy=9 * WAD // 10))
    commit_at(chain, task, 0, 1, 50)
    commit_at(chain, task, 1, 1, 50)
    receipt = chain.post_round(task, 1, [(WAD, 50, True), (WAD, 50, True)], accuracy=95 * WAD // 100)
    finished = receipt.events_of(bindings.TaskFinished)[0]
    assert (finished.last_round, finished.target_reached) == (1, True)
    assert chain.view("TaskRegistry", "state", task).status == 3


# ----------------------------------------------------------------------------- settlement


def test_settlement_pays_eq16_bonuses_returns_deposits_and_refunds_the_rest(chain: FedChain) -> None:
    # Prepare: one round (N = 1) finished after 100 of the expected 600 s.
    params = dataclasses.replace(PARAMS, rounds=1)
    task = started(chain, params)
    commit_at(chain, task, 0, 1, 100)
    commit_at(chain, task, 1, 1, 100)
    chain.set_next_timestamp(chain.view("TaskRegistry", "state", task).round_started_at + 100)
    chain.post_round(task, 1, [(WAD, 100, True), (WAD // 2, 100, True)])
    state = chain.view("TaskRegistry", "state", task)
    infos = [chain.view("RoundLedger", "client", task, i) for i in (0, 1)]
    # Execute
    receipt = chain.send("RoundLedger", "settle", task, by=STRANGER)
    # Assert: bonus = phi * (T_ex - T_r) * r_a * r_t, deposits back, the rest to the publisher.
    actual = state.finished_at - state.started_at
    assert actual == 100
    bonuses = [
        final_bonus(params.phi, params.expected_duration, actual, i.loss_reputation * i.time_reputation // WAD)
        for i in infos
    ]
    assert all(i.loss_reputation * i.time_reputation // WAD <= params.reputation_cap for i in infos)
    settled = receipt.events_of(bindings.ClientSettled)
    assert [(e.earned, e.bonus, e.deposit_returned) for e in settled] == [
        (i.earned, b, params.client_deposit) for i, b in zip(infos, bonuses, strict=True)
    ]
    for client, info, bonus in zip(CLIENTS[:2], infos, bonuses, strict=True):
        assert chain.view("Treasury", "claimable", chain.account(client)) == info.earned + bonus + params.client_deposit
    refund = receipt.events_of(bindings.TaskSettled)[0].refund
    assert refund == 10**18 - sum(i.earned for i in infos) - sum(bonuses)
    released = receipt.events_of(bindings.BondReleased)[0]
    assert (released.bonder, released.amount) == (chain.account(AGGREGATOR), params.aggregator_bond)
    assert chain.view("TaskRegistry", "state", task).status == 4
    assert chain.view("RoundLedger", "settled", task) is True
    with chain.reverts(bindings.LedgerAlreadySettled, task):
        chain.send("RoundLedger", "settle", task, by=STRANGER)


def test_settlement_waits_for_the_end_and_a_cancelled_task_returns_every_deposit(chain: FedChain) -> None:
    task = chain.create_task()
    chain.join(task, CLIENTS[0])
    with chain.reverts(bindings.LedgerWrongTaskStatus, task, bindings.TaskStatus.OPEN):
        chain.send("RoundLedger", "settle", task, by=STRANGER)
    chain.send("TaskRegistry", "cancelTask", task, by=PUBLISHER)
    chain.send("RoundLedger", "settle", task, by=STRANGER)
    assert chain.view("Treasury", "claimable", chain.account(CLIENTS[0])) == PARAMS.client_deposit
    assert chain.view("Treasury", "held", task) == 0
