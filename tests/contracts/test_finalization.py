"""RoundLedger: a post is pending until its challenge window has passed; rounds are finalised in order; settlement
waits for every posted round; the final bonus uses the capped total reputation."""

from __future__ import annotations

import dataclasses

from fedchain.chain import bindings
from fedchain.fl.reputation import WAD, ClientReputation, final_bonus, score_round, total_reputation
from tests.contracts.conftest import CLIENTS, PUBLISHER, STRANGER, FedChain, TaskParams
from tests.contracts.test_rounds import commit_at, started

PARAMS = TaskParams(challenge_window=120)


def _posted_round_1(chain: FedChain, params: TaskParams = PARAMS) -> int:
    task = started(chain, params)
    commit_at(chain, task, 0, 1, 50)
    commit_at(chain, task, 1, 1, 60)
    chain.post_round(task, 1, [(WAD, 50, True), (WAD, 60, False)], final=False)
    return task


def test_a_post_moves_no_money_and_changes_no_reputation_until_it_is_final(chain: FedChain) -> None:
    # ---- prepare / execute: round 1 posted, client 1 rejected (it would be removed).
    task = _posted_round_1(chain)

    # ---- assert: nothing happened yet but the record and the clock.
    record = chain.view("RoundLedger", "roundRecord", task, 1)
    assert record.posted_at == chain.now() and record.entries_hash != b"\0" * 32
    assert chain.view("RoundLedger", "rounds", task) == (1, 0)
    assert chain.view("TaskRegistry", "state", task).current_round == 2
    for index in (0, 1):
        info = chain.view("RoundLedger", "client", task, index)
        assert (info.rounds, info.earned, info.status) == (0, 0, bindings.ClientStatus.ACTIVE)
    assert chain.view("TaskRegistry", "state", task).budget_left == 10**18
    assert chain.view("RoundLedger", "depositsHeld", task) == 2 * PARAMS.client_deposit
    # A client whose removal is pending is still active: its fog node commits the next round.
    assert chain.view("RoundLedger", "isActive", task, 1) is True


def test_finalisation_waits_for_the_window_then_anyone_applies_the_round(chain: FedChain) -> None:
    # ---- prepare
    task = _posted_round_1(chain)
    closes = chain.view("RoundLedger", "roundRecord", task, 1).posted_at + PARAMS.challenge_window
    measurements = chain.posted[(task, 1)]

    # ---- execute / assert: refused during the window (its last second included), applied after it.
    chain.set_next_timestamp(closes)
    chain.advance(0)  # a block at the window's last second: calls are estimated at the latest block's time
    with chain.reverts(bindings.LedgerWindowOpen, task, 1, closes, closes):
        chain.send("RoundLedger", "finalizeRound", task, 1, measurements, by=STRANGER)
    receipt = chain.finalize(task, 1, by=CLIENTS[0])
    finalized = receipt.events_of(bindings.RoundFinalized)[0]
    mechanism = PARAMS.mechanism()
    expected = score_round(ClientReputation.joined(mechanism), mechanism, WAD, 50, True)
    assert (finalized.paid, finalized.forfeited) == (expected.payment, PARAMS.client_deposit)
    assert [e.client_index for e in receipt.events_of(bindings.ClientRemoved)] == [1]
    assert chain.view("RoundLedger", "client", task, 0).earned == expected.payment
    assert chain.view("RoundLedger", "rounds", task) == (1, 1)
    with chain.reverts(bindings.LedgerNotNextRound, task, 1, 2, 1):
        chain.send("RoundLedger", "finalizeRound", task, 1, measurements, by=STRANGER)


def test_finalisation_takes_only_the_posted_measurements_and_goes_in_order(chain: FedChain) -> None:
    # ---- prepare: rounds 1 and 2 posted and pending.
    task = _posted_round_1(chain)
    commit_at(chain, task, 0, 2, 40)
    commit_at(chain, task, 1, 2, 45)
    chain.post_round(task, 2, [(WAD, 40, True), (WAD, 45, True)], final=False)
    chain.advance(PARAMS.challenge_window + 1)

    # ---- execute / assert
    with chain.reverts(bindings.LedgerNotNextRound, task, 2, 1, 2):
        chain.send("RoundLedger", "finalizeRound", task, 2, chain.posted[(task, 2)], by=STRANGER)
    forged = [(10 * WAD, 50, True, True), chain.posted[(task, 1)][1]]
    with chain.reverts(bindings.LedgerMeasurementsMismatch, task, 1):
        chain.send("RoundLedger", "finalizeRound", task, 1, forged, by=STRANGER)
    with chain.reverts(bindings.LedgerNotNextRound, task, 3, 1, 2):
        chain.send("RoundLedger", "finalizeRound", task, 3, chain.posted[(task, 2)], by=STRANGER)
    chain.finalize(task, 1)
    # Client 1 was removed by round 1: its round-2 entry is ignored when round 2 becomes final.
    receipt = chain.finalize(task, 2)
    assert receipt.events_of(bindings.ClientRemoved) == ()
    assert chain.view("RoundLedger", "client", task, 1).rounds == 1
    assert chain.view("RoundLedger", "client", task, 0).rounds == 2


def test_settlement_and_job_settlement_wait_for_every_posted_round(chain: FedChain) -> None:
    # ---- prepare: a one-round task, posted and finished, not final.
    task = _posted_round_1(chain, dataclasses.replace(PARAMS, rounds=1))
    assert chain.view("TaskRegistry", "state", task).status == bindings.TaskStatus.FINISHED

    # ---- execute / assert
    with chain.reverts(bindings.LedgerRoundsPending, task, 1, 0):
        chain.send("RoundLedger", "settle", task, by=STRANGER)
    with chain.reverts(bindings.AuctionRoundsPending, task, 1, 0):
        chain.send("FogAuction", "settleJobs", task, [0, 1], by=STRANGER)
    chain.finalize(task, 1)
    chain.send("RoundLedger", "settle", task, by=STRANGER)
    chain.send("FogAuction", "settleJobs", task, [0, 1], by=STRANGER)
    assert chain.view("TaskRegistry", "state", task).status == bindings.TaskStatus.SETTLED


def test_the_final_bonus_uses_the_total_reputation_capped_as_designed(chain: FedChain) -> None:
    # ---- prepare: a cap of 2; both clients reach r_a = r_t = 2, so r_a * r_t = 4 would exceed the cap.
    params = dataclasses.replace(TaskParams(), rounds=1, reputation_cap=2 * WAD, expected_duration=600)
    task = started(chain, params)
    commit_at(chain, task, 0, 1, 10)
    commit_at(chain, task, 1, 1, 10)
    chain.set_next_timestamp(chain.view("TaskRegistry", "state", task).round_started_at + 20)
    chain.post_round(task, 1, [(3 * WAD, 10, True), (3 * WAD, 10, True)])
    info = chain.view("RoundLedger", "client", task, 0)
    assert (info.loss_reputation, info.time_reputation) == (2 * WAD, 2 * WAD)

    # ---- execute
    receipt = chain.send("RoundLedger", "settle", task, by=PUBLISHER)

    # ---- assert: r_at = min(cap, r_a * r_t) = 2, not 4; the Python mirror agrees to the wei.
    state = chain.view("TaskRegistry", "state", task)
    duration = state.finished_at - state.started_at
    capped = total_reputation(info.loss_reputation, info.time_reputation, params.reputation_cap)
    assert capped == 2 * WAD
    bonus = final_bonus(params.phi, params.expected_duration, duration, capped)
    assert [e.bonus for e in receipt.events_of(bindings.ClientSettled)] == [bonus, bonus]
    uncapped = final_bonus(params.phi, params.expected_duration, duration, 4 * WAD)
    assert bonus * 2 == uncapped
