"""The ``reputation.cross_task`` check over hand-made event lists: two tasks sharing clients.

Task 1 (one round, the parameters of test_replay's task): clients A and B score
quality 1.2 and 0.6 in its only round, so they finish with r_a = 1.2 and 0.6;
it finishes at t = 1060. Task 2 starts at t = 2000 with A, B and a newcomer C.
Their latest known reputations are 1.2, 0.6 and 1.0 (C's initial one), whose
adjusted cosine with task 1's over A and B is sqrt(0.18 / 0.18667) > 0, so U =
{task 1} and the priors are H = (1.2, 0.6, 0): each client's final r_a in
task 1, and 0 for C, who was not in it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fedchain.audit import CheckName, CheckStatus, audit_task
from fedchain.chain import bindings as b
from fedchain.fl.reputation import WAD
from tests.audit.test_replay import PARAMS, PRICE, EventLog

A, B, C, FOG = (f"0x{n:040x}" for n in (0xC1, 0xC2, 0xC3, 0xF1))
PUBLISHER, AGGREGATOR = (f"0x{n:040x}" for n in (0xA1, 0xA2))


def task_events(log: EventLog, task_id: int, qualities: Mapping[str, int | None], started_at: int) -> None:
    """Task ``task_id`` from creation to its start at ``started_at``; each client of ``qualities`` wins a job."""
    t = {"task_id": task_id}
    log.tx(
        (b.TaskCreated, dict(t, publisher=PUBLISHER, aggregator=AGGREGATOR, budget=10**18, params=PARAMS)),
    )
    for index, client in enumerate(qualities):
        joined = dict(t, client=client, client_index=index, data_commitment=b"\x03" * 32, deposit=10**16)
        log.tx(
            (b.ClientJoined, joined),
        )
        log.tx(
            (
                b.AuctionOpened,
                dict(
                    t, client_index=index, data_size=600, bidding_deadline=started_at - 100, reveal_deadline=started_at
                ),
            ),
        )
        log.tx(
            (b.BidCommitted, dict(t, client_index=index, bidder=FOG, bid_index=0, commitment=b"\x04" * 32)),
        )
        log.tx(
            (b.BidRevealed, dict(t, client_index=index, bidder=FOG, bid_index=0, frequency=5000, price=PRICE)),
        )
        log.tx(
            (b.AuctionClosed, dict(t, client_index=index, winner=0, price=PRICE, escrow=PRICE)),
        )
    log.tx(
        (b.TaskStarted, dict(t, started_at=started_at, clients=len(qualities))),
    )


def post_round(
    log: EventLog,
    task_id: int,
    qualities: dict[str, int],
    started_at: int,
    *,
    finish: bool,
    removed: Mapping[int, int] | None = None,
    finalise: bool = True,
) -> None:
    """Round 1 of task ``task_id``: every fog commits 50 s after the start; posted (and the task finishes), then,
    in a later transaction, finalised (the post is pending until then: it changes no reputation).

    ``removed`` maps the index of each client the round removes to its r_a (its r_t is 2: T = 100 s, t = 50 s).
    Like the rest of these event lists, the money events are left out (``paid`` is 0).
    """
    t = {"task_id": task_id}
    for index in range(len(qualities)):
        log.tx(
            (
                b.UpdateCommitted,
                dict(
                    t,
                    client_index=index,
                    round=1,
                    fog=FOG,
                    update_hash=b"\x05" * 32,
                    committed_at=started_at + 50,
                    payment=PRICE,
                    transcript_root=b"\x07" * 32,
                ),
            ),
        )
    measurements = tuple(
        b.Measurement(quality=q, round_time=50, accepted=True, committed=True) for q in qualities.values()
    )
    post: list[tuple[type, dict[str, Any]]] = [
        (b.RoundPosted, dict(t, round=1, model_hash=b"\x06" * 32, accuracy=WAD // 2, measurements=measurements)),
    ]
    if finish:
        post.append((b.RoundClosed, dict(t, round=1, next_round_started_at=0)))
        post.append((b.TaskFinished, dict(t, last_round=1, finished_at=started_at + 60, target_reached=False)))
    log.tx(*post)
    if finalise:
        finalise_round(log, task_id, removed)


def finalise_round(log: EventLog, task_id: int, removed: Mapping[int, int] | None = None) -> None:
    """Round 1 of task ``task_id`` is finalised; ``removed`` as in :func:`post_round`."""
    t = {"task_id": task_id}
    removals: list[tuple[type, dict[str, Any]]] = [
        (b.ClientRemoved, dict(t, client_index=index, round=1, loss_reputation=loss_rep, time_reputation=2 * WAD))
        for index, loss_rep in (removed or {}).items()
    ]
    forfeited = len(removals) * PARAMS.client_deposit
    log.tx(
        *removals,
        (b.RoundFinalized, dict(t, round=1, paid=0, forfeited=forfeited)),
        (b.BudgetSpent, dict(t, round=1, spent=0, budget_left=10**18)),
    )


def two_tasks(
    priors: tuple[int, ...] | None,
    *,
    round_1: bool = False,
    quality_a: int = WAD,
    removed: Mapping[int, int] | None = None,
) -> list[Any]:
    """Task 1 finished with A 1.2 and B 0.6; task 2 started with A, B, C and posted ``priors`` (None: no post).

    In task 2's round 1 (when ``round_1``) A scores ``quality_a``, B and C 1.0; ``removed`` as in :func:`post_round`.
    """
    log = EventLog()
    first = {A: 12 * WAD // 10, B: 6 * WAD // 10}
    task_events(log, 1, first, started_at=1000)
    post_round(log, 1, first, 1000, finish=True)
    second = {A: quality_a, B: WAD, C: WAD}
    task_events(log, 2, {A: WAD, B: WAD, C: WAD}, started_at=2000)
    if priors is not None:
        log.tx(
            (b.PriorsPosted, {"task_id": 2, "priors": priors, "posted_at": 2001}),
        )
    if round_1:
        post_round(log, 2, second, 2000, finish=False, removed=removed)
    return log.events


def cross_task(report: Any) -> Any:
    return next(check for check in report.checks if check.name is CheckName.CROSS_TASK)


def test_priors_recomputed_from_the_earlier_task_pass_the_cross_task_check() -> None:
    # prepare
    events = two_tasks((12 * WAD // 10, 6 * WAD // 10, 0), round_1=True)
    # execute
    report = audit_task(2, events)
    # assert: the check passed, and the round's r_a carries the prior (A: 1.2 + 1.0 = 2.2)
    assert cross_task(report).status is CheckStatus.PASS, cross_task(report).findings
    assert report.history.clients[0].loss_reputation == 22 * WAD // 10
    statuses = {c.name: c.status for c in report.checks}
    assert statuses[CheckName.REPUTATION] is not CheckStatus.FAIL


def test_a_round_below_q_min_is_recomputed_without_the_prior_so_the_client_must_be_removed() -> None:
    # prepare: A (prior 1.2) sends garbage in task 2's round 1: quality 0.1 < q_min 0.5, so r_a = 0.1 * 0.1 = 0.01
    # without the prior (below r_a_min 0.1: removed); with it r_a would be 1.21 and A would stay
    priors = (12 * WAD // 10, 6 * WAD // 10, 0)
    removed = two_tasks(priors, round_1=True, quality_a=WAD // 10, removed={0: WAD // 100})
    kept = two_tasks(priors, round_1=True, quality_a=WAD // 10)
    # execute
    honest, prior_applied = audit_task(2, removed), audit_task(2, kept)
    # assert: the chain that removes A agrees with the audit; one that kept A (the prior applied) fails it
    statuses = {c.name: c.status for c in honest.checks}
    assert statuses[CheckName.REPUTATION] is not CheckStatus.FAIL, honest.check(CheckName.REPUTATION).findings
    assert statuses[CheckName.CROSS_TASK] is CheckStatus.PASS
    a = honest.history.clients[0]
    assert (a.loss_reputation, a.status, a.removed_round) == (WAD // 100, "removed", 1)
    [finding] = prior_applied.check(CheckName.REPUTATION).findings
    assert "removal of client 0 in round 1" in finding.message


def test_priors_that_differ_from_the_recomputed_ones_fail_the_cross_task_check() -> None:
    # prepare: the aggregator posted zeros although task 1 is similar
    events = two_tasks((0, 0, 0))
    # execute
    report = audit_task(2, events)
    # assert
    check = cross_task(report)
    assert check.status is CheckStatus.FAIL
    assert "task 1" in check.findings[0].message


def test_a_round_posted_without_priors_counts_as_all_zeros_and_fails_when_history_says_otherwise() -> None:
    # prepare
    events = two_tasks(None, round_1=True)
    # execute
    report = audit_task(2, events)
    # assert
    assert cross_task(report).status is CheckStatus.FAIL


def test_an_earlier_task_whose_last_round_was_still_pending_when_this_one_started_does_not_count() -> None:
    # prepare: task 1 finished before task 2 started, but its round was finalised only after (its reputations
    # could still change by a verdict then): task 2's priors are all zeros, whatever task 1 became later
    def events(priors: tuple[int, ...]) -> list[Any]:
        log = EventLog()
        first = {A: 12 * WAD // 10, B: 6 * WAD // 10}
        task_events(log, 1, first, started_at=1000)
        post_round(log, 1, first, 1000, finish=True, finalise=False)
        task_events(log, 2, {A: WAD, B: WAD, C: WAD}, started_at=2000)
        finalise_round(log, 1)
        log.tx(
            (b.PriorsPosted, {"task_id": 2, "priors": priors, "posted_at": 2001}),
        )
        return log.events

    # execute
    zeros, from_the_late_finalisation = (
        audit_task(2, events((0, 0, 0))),
        audit_task(2, events((12 * WAD // 10, 6 * WAD // 10, 0))),
    )
    # assert
    assert cross_task(zeros).status is CheckStatus.PASS, cross_task(zeros).findings
    assert cross_task(from_the_late_finalisation).status is CheckStatus.FAIL


def test_the_cross_task_check_is_skipped_before_priors_or_round_1() -> None:
    report = audit_task(2, two_tasks(None))
    assert cross_task(report).status is CheckStatus.SKIPPED
