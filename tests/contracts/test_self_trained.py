"""Self-trained tasks (``TaskParams.selfTrained``): each client trains its own job, no fog auction.

contracts/README.md, "Tasks trained by their own clients": no auction terms, no jobs, no fog challenges; the
round post takes ``committed`` from the aggregator (the clients' signed replies), and everything else (bond,
window, finalisation, settlement) is every task's.
"""

from __future__ import annotations

import dataclasses

import pytest

from fedchain.chain import bindings
from fedchain.fl.reputation import WAD
from tests.contracts.conftest import CLIENTS, FOGS, PUBLISHER, SINK, STRANGER, FedChain, TaskParams

PARAMS = TaskParams(rounds=2).self_trained_task()


def started(chain: FedChain, clients: int = 3) -> int:
    """A started task whose round 1 has run 60 s (a reply's round time is at most that)."""
    task = chain.create_task(PARAMS)
    for client in CLIENTS[:clients]:
        chain.join(task, client, params=PARAMS)
    chain.send("TaskRegistry", "startTask", task, by=PUBLISHER)
    chain.advance(60)
    return task


@pytest.mark.parametrize(
    ("term", "value", "name"),
    [
        ("fog_deposit", 1, "fogDeposit"),
        ("bidding_duration", 10, "biddingDuration"),
        ("reveal_duration", 10, "revealDuration"),
        ("second_price", True, "secondPrice"),
    ],
)
def test_a_self_trained_task_refuses_every_auction_term(chain: FedChain, term: str, value: object, name: str) -> None:
    with chain.reverts(bindings.TaskInvalidParameter, name.encode().ljust(32, b"\0"), int(value)):  # type: ignore[call-overload]
        chain.create_task(dataclasses.replace(PARAMS, **{term: value}), bond=False)  # type: ignore[arg-type]


def test_an_auction_task_still_needs_its_windows(chain: FedChain) -> None:
    with chain.reverts(bindings.TaskInvalidParameter, b"biddingDuration".ljust(32, b"\0"), 0):
        chain.create_task(dataclasses.replace(TaskParams(), bidding_duration=0), bond=False)


def test_a_self_trained_task_has_no_auction_and_no_fog_challenge(chain: FedChain) -> None:
    task = chain.create_task(PARAMS)
    chain.join(task, CLIENTS[0], params=PARAMS)
    assert chain.view("TaskRegistry", "params", task).self_trained is True
    with chain.reverts(bindings.AuctionSelfTrained, task):
        chain.open_auction(task, CLIENTS[0])
    chain.send("TaskRegistry", "startTask", task, by=PUBLISHER)
    chain.advance(60)
    chain.post_round(task, 1, [(WAD, 30, True, True)], final=False)
    with chain.reverts(bindings.DisputeNoFog, task, 0):
        chain.send(
            "Disputes",
            "openFogChallenge",
            task,
            1,
            0,
            chain.account(FOGS[0]),
            by=CLIENTS[0],
            value=PARAMS.challenge_bond,
        )


def test_rounds_post_the_aggregators_commits_and_pay_like_any_task(chain: FedChain) -> None:
    # Prepare: three clients; in round 1 the third did not reply (posted at once, before the deadline).
    task = started(chain)
    # Execute
    round_1 = chain.post_round(task, 1, [(WAD, 30, True, True), (WAD // 2, 40, True, True), (0, 0, False, False)])
    chain.advance(60)
    chain.post_round(task, 2, [(WAD, 30, True, True), (WAD, 30, True, True), (WAD, 30, True, True)])
    earned = [chain.view("RoundLedger", "client", task, i).earned for i in range(3)]
    settled = chain.send("RoundLedger", "settle", task, by=STRANGER)
    # Assert: no fog was paid, the replies were scored, the missing one skipped, every wei accounted for.
    assert not round_1.events_of(bindings.ClientRemoved)
    assert earned[0] > earned[1] > 0
    assert earned[2] > 0  # round 2 only
    assert [e.deposit_returned for e in settled.events_of(bindings.ClientSettled)] == [PARAMS.client_deposit] * 3
    assert chain.view("FogAuction", "heldFor", task) == 0
    assert chain.view("Treasury", "held", task) == 0
    assert chain.claimable(SINK) == 0
    report = chain.audit(task)
    assert report.passed, report.failed_checks


def test_a_missing_reply_cannot_be_posted_as_accepted(chain: FedChain) -> None:
    task = started(chain, clients=1)
    with chain.reverts(bindings.LedgerUncommittedUpdate, task, 0):
        chain.post_round(task, 1, [(WAD, 0, True, False)])


def test_an_unpaid_update_of_a_self_trained_task_forfeits_to_the_sink(chain: FedChain) -> None:
    # A committed update the aggregator rejects scores quality 0: the client is removed, its deposit burned.
    task = started(chain, clients=2)
    receipts = chain.post_round(task, 1, [(WAD, 30, True, True), (0, 30, False, True)])
    assert [e.client_index for e in receipts.events_of(bindings.ClientRemoved)] == [1]
    assert chain.claimable(SINK) == PARAMS.client_deposit


def test_a_round_time_longer_than_the_round_has_run_or_its_duration_is_refused(chain: FedChain) -> None:
    # The aggregator measures the times of a self-trained round: it cannot post one the round never ran.
    task = started(chain, clients=1)
    elapsed = chain.now() - chain.view("TaskRegistry", "state", task).round_started_at
    with pytest.raises(bindings.LedgerRoundTimeTooLong) as refused:
        chain.post_round(task, 1, [(WAD, elapsed + 30, True, True)])
    posted, limit = refused.value.values[2:]
    assert posted == elapsed + 30 and elapsed <= limit < posted
    chain.advance(PARAMS.round_duration)
    with chain.reverts(bindings.LedgerRoundTimeTooLong, task, 0, PARAMS.round_duration + 1, PARAMS.round_duration):
        chain.post_round(task, 1, [(WAD, PARAMS.round_duration + 1, True, True)])
    chain.post_round(task, 1, [(WAD, PARAMS.round_duration, True, True)])


def test_an_auction_task_needs_its_reveal_window_and_a_self_trained_one_has_no_jobs(chain: FedChain) -> None:
    with chain.reverts(bindings.TaskInvalidParameter, b"revealDuration".ljust(32, b"\0"), 0):
        chain.create_task(dataclasses.replace(TaskParams(), reveal_duration=0), bond=False)
    task = chain.create_task(PARAMS)
    chain.join(task, CLIENTS[0], params=PARAMS)
    with chain.reverts(bindings.AuctionWrongJobStatus, task, 0, bindings.JobStatus.NONE):
        chain.send("FogAuction", "commitBid", task, 0, b"\x01" * 32, by=FOGS[0])
