"""Self-trained tasks (``TaskParams.selfTrained``): each client trains its own job, no fog auction.

contracts/README.md, "Tasks trained by their own clients": no auction terms, no jobs, no fog challenges; each
client commits its own update on chain (``commitOwnUpdate``) and the round post is checked against those commits
as an auction task's is against its fog commits; everything else (bond, window, finalisation, settlement) is every
task's.
"""

from __future__ import annotations

import dataclasses

import pytest

from fedchain.chain import bindings
from fedchain.fl.reputation import WAD
from tests.contracts.conftest import CLIENTS, FOGS, PUBLISHER, SINK, STRANGER, FedChain, TaskParams

PARAMS = TaskParams(rounds=2).self_trained_task()


def started(chain: FedChain, clients: int = 3) -> int:
    """A started self-trained task with ``clients`` clients."""
    task = chain.create_task(PARAMS)
    for client in CLIENTS[:clients]:
        chain.join(task, client, params=PARAMS)
    chain.send("TaskRegistry", "startTask", task, by=PUBLISHER)
    return task


def committed_after(chain: FedChain, task: int, client: int, round_: int, seconds: int) -> int:
    """``client`` commits ``round_`` ``seconds`` after the chain's round started; returns that round time."""
    started_at = chain.view("TaskRegistry", "state", task).round_started_at
    chain.set_next_timestamp(started_at + seconds)
    chain.commit_own(task, client, round_)
    return seconds


def past_deadline(chain: FedChain, task: int) -> None:
    started_at = chain.view("TaskRegistry", "state", task).round_started_at
    chain.advance(started_at + PARAMS.round_duration + 1 - chain.now())


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
    seconds = committed_after(chain, task, CLIENTS[0], 1, 30)
    chain.post_round(task, 1, [(WAD, seconds, True)], final=False)
    with chain.reverts(bindings.DisputeNoFog, task, 0):
        chain.send(
            "Disputes",
            "openFogChallenge",
            task,
            1,
            0,
            chain.account(FOGS[0]),
            0,
            by=CLIENTS[0],
            value=PARAMS.challenge_bond,
        )


def test_rounds_post_the_clients_commits_and_pay_like_any_task(chain: FedChain) -> None:
    # Prepare: three clients; in round 1 the third did not commit, so the round waits for its deadline.
    task = started(chain)
    first = [committed_after(chain, task, CLIENTS[0], 1, 30), committed_after(chain, task, CLIENTS[1], 1, 40)]
    deadline = chain.view("TaskRegistry", "state", task).round_started_at + PARAMS.round_duration
    entries = [(WAD, first[0], True), (WAD // 2, first[1], True), (0, 0, False)]
    # Execute
    with chain.reverts(bindings.LedgerRoundNotReady, task, 2, deadline):
        chain.post_round(task, 1, entries)
    past_deadline(chain, task)
    round_1 = chain.post_round(task, 1, entries)
    second = [committed_after(chain, task, client, 2, 20 + k) for k, client in enumerate(CLIENTS[:3])]
    chain.post_round(task, 2, [(WAD, seconds, True) for seconds in second])  # every commit in: no wait
    earned = [chain.view("RoundLedger", "client", task, i).earned for i in range(3)]
    settled = chain.send("RoundLedger", "settle", task, by=STRANGER)
    # Assert: no fog was paid, the commits were scored, the missing one skipped, every wei accounted for.
    assert not round_1.events_of(bindings.ClientRemoved)
    assert earned[0] > earned[1] > 0
    assert earned[2] > 0  # round 2 only
    assert [e.deposit_returned for e in settled.events_of(bindings.ClientSettled)] == [PARAMS.client_deposit] * 3
    assert chain.view("FogAuction", "heldFor", task) == 0
    assert chain.view("Treasury", "held", task) == 0
    assert chain.claimable(SINK) == 0
    report = chain.audit(task)
    assert report.passed, report.failed_checks


def test_a_commit_is_recorded_with_its_time_and_announced(chain: FedChain) -> None:
    task = started(chain, clients=2)
    digest = b"\x07" * 32
    receipt = chain.commit_own(task, CLIENTS[1], 1, digest)
    (event,) = receipt.events_of(bindings.OwnUpdateCommitted)
    assert (event.task_id, event.client_index, event.round, event.update_hash) == (task, 1, 1, digest)
    assert event.client == chain.account(CLIENTS[1]) and event.committed_at == chain.now()
    started_at = chain.view("TaskRegistry", "state", task).round_started_at
    assert event.round_time == event.committed_at - started_at
    assert tuple(chain.view("RoundLedger", "ownCommit", task, 1, 1)) == (digest, event.committed_at, event.round_time)
    assert list(chain.view("RoundLedger", "ownCommitTimes", task, 1, 2)) == [0, event.committed_at]


def test_the_post_must_say_what_the_commits_say(chain: FedChain) -> None:
    # The aggregator can neither post an honest client as missing nor credit one that never committed.
    task = started(chain, clients=2)
    seconds = committed_after(chain, task, CLIENTS[0], 1, 30)
    past_deadline(chain, task)
    with chain.reverts(bindings.LedgerCommitMismatch, task, 0, True):
        chain.post_round(task, 1, [(0, 0, False, False), (0, 0, False, False)])
    with chain.reverts(bindings.LedgerCommitMismatch, task, 1, False):
        chain.post_round(task, 1, [(WAD, seconds, True, True), (WAD, seconds, True, True)])
    with chain.reverts(bindings.LedgerUncommittedUpdate, task, 1):
        chain.post_round(task, 1, [(WAD, seconds, True, True), (WAD, 0, True, False)])
    off = seconds + PARAMS.time_tolerance + 1
    with chain.reverts(bindings.LedgerRoundTimeMismatch, task, 0, off, seconds):
        chain.post_round(task, 1, [(WAD, off, True, True), (0, 0, False, False)])
    chain.post_round(task, 1, [(WAD, seconds + PARAMS.time_tolerance, True, True), (0, 0, False, False)])


def test_a_client_may_commit_one_round_ahead_once_its_work_could_start_and_its_time_counts_from_then(
    chain: FedChain,
) -> None:
    # The Flower loop starts round 2 before round 1's post is mined: a commit of round 2 comes before the chain's
    # round 2. Its work could start once every active client had committed round 1: its time counts from then.
    task = started(chain, clients=2)
    seconds = committed_after(chain, task, CLIENTS[0], 1, 30)
    with chain.reverts(bindings.LedgerCommitTooEarly, task, 2, 1):
        chain.commit_own(task, CLIENTS[0], 2)
    last = committed_after(chain, task, CLIENTS[1], 1, 40)
    started_at = chain.view("TaskRegistry", "state", task).round_started_at
    chain.set_next_timestamp(started_at + last + 25)
    chain.commit_own(task, CLIENTS[0], 2)
    assert chain.view("RoundLedger", "ownCommit", task, 2, 0)[2] == 25
    chain.post_round(task, 1, [(WAD, seconds, True), (WAD, last, True)])
    chain.commit_own(task, CLIENTS[1], 2)
    own = chain.view("RoundLedger", "ownCommit", task, 2, 1)[2]
    with chain.reverts(bindings.LedgerRoundTimeMismatch, task, 0, 25 + PARAMS.time_tolerance + 1, 25):
        chain.post_round(task, 2, [(WAD, 25 + PARAMS.time_tolerance + 1, True), (WAD, own, True)])
    chain.post_round(task, 2, [(WAD, 25, True), (WAD, own, True)])


def test_no_round_can_be_committed_two_ahead_of_the_chain(chain: FedChain) -> None:
    # Committing every later round at once would score each as a 1-second round.
    task = started(chain, clients=1)
    with chain.reverts(bindings.LedgerWrongRound, task, 3, 1):
        chain.commit_own(task, CLIENTS[0], 3)


def test_commit_own_update_refuses_every_commit_out_of_place(chain: FedChain) -> None:
    auction = chain.create_task(TaskParams())
    with chain.reverts(bindings.LedgerNotSelfTrained, auction):
        chain.commit_own(auction, CLIENTS[0], 1)
    task = chain.create_task(PARAMS)
    for client in CLIENTS[:2]:
        chain.join(task, client, params=PARAMS)
    with chain.reverts(bindings.LedgerWrongTaskStatus, task, bindings.TaskStatus.OPEN):
        chain.commit_own(task, CLIENTS[0], 1)
    chain.send("TaskRegistry", "startTask", task, by=PUBLISHER)
    with chain.reverts(bindings.LedgerNotClient, task, chain.account(STRANGER)):
        chain.commit_own(task, STRANGER, 1)
    with chain.reverts(bindings.LedgerWrongRound, task, PARAMS.rounds + 1, 1):
        chain.commit_own(task, CLIENTS[0], PARAMS.rounds + 1)
    chain.commit_own(task, CLIENTS[0], 1)
    with chain.reverts(bindings.LedgerAlreadyCommitted, task, 1, 0):
        chain.commit_own(task, CLIENTS[0], 1)
    # Client 1 sends garbage as its update: quality 0, removed by round 1; it commits no more.
    chain.commit_own(task, CLIENTS[1], 1)
    chain.post_round(task, 1, [(WAD, 0, True), (0, 0, False)])
    with chain.reverts(bindings.LedgerWrongRound, task, 1, 2):
        chain.commit_own(task, CLIENTS[0], 1)
    with chain.reverts(bindings.LedgerClientInactive, task, 1):
        chain.commit_own(task, CLIENTS[1], 2)
    started_at = chain.view("TaskRegistry", "state", task).round_started_at
    deadline = started_at + PARAMS.round_duration
    chain.set_next_timestamp(deadline + 1)
    with chain.reverts(bindings.LedgerCommitTooLate, task, 2, deadline, deadline + 1):
        chain.commit_own(task, CLIENTS[0], 2)


def test_a_missing_reply_cannot_be_posted_as_accepted(chain: FedChain) -> None:
    task = started(chain, clients=1)
    past_deadline(chain, task)
    with chain.reverts(bindings.LedgerUncommittedUpdate, task, 0):
        chain.post_round(task, 1, [(WAD, 0, True, False)])


def test_an_unpaid_update_of_a_self_trained_task_forfeits_to_the_sink(chain: FedChain) -> None:
    # A committed update the aggregator rejects scores quality 0: the client is removed, its deposit burned.
    task = started(chain, clients=2)
    times = [committed_after(chain, task, client, 1, 30 + client) for client in CLIENTS[:2]]
    receipts = chain.post_round(task, 1, [(WAD, times[0], True), (0, times[1], False)])
    assert [e.client_index for e in receipts.events_of(bindings.ClientRemoved)] == [1]
    assert chain.claimable(SINK) == PARAMS.client_deposit


def test_an_auction_task_needs_its_reveal_window_and_a_self_trained_one_has_no_jobs(chain: FedChain) -> None:
    with chain.reverts(bindings.TaskInvalidParameter, b"revealDuration".ljust(32, b"\0"), 0):
        chain.create_task(dataclasses.replace(TaskParams(), reveal_duration=0), bond=False)
    task = chain.create_task(PARAMS)
    chain.join(task, CLIENTS[0], params=PARAMS)
    with chain.reverts(bindings.AuctionWrongJobStatus, task, 0, bindings.JobStatus.NONE):
        chain.send("FogAuction", "commitBid", task, 0, b"\x01" * 32, by=FOGS[0])
