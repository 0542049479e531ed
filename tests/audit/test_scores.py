"""``--verify-scores``: the posted qualities are reproduced from the chain and the store, or the round is flagged."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from fedchain.audit import CheckName, audit_task, replay_task
from fedchain.audit.scores import verify_scores
from fedchain.chain.abi import ChainEvent
from fedchain.chain.bindings import (
    ChallengeKind,
    ChallengeOpened,
    ChallengeResolved,
    ChallengeStatus,
    CommitteeFormed,
    Fate,
    RoundFinalized,
    RoundPosted,
)
from fedchain.fl.reputation import WAD
from tests.audit.conftest import DrivenTask


def test_scores_posted_by_the_aggregators_scoring_are_reproduced(scored_task: DrivenTask) -> None:
    readings = scored_task.readings

    scores = verify_scores(scored_task.task_id, readings.events, scored_task.store())
    report = audit_task(
        scored_task.task_id, readings.events, views=readings.views, store=scored_task.store(), scores=scores
    )

    assert report.passed, {c.name.value: [f.message for f in c.findings] for c in report.checks if c.failed}
    assert report.check(CheckName.SCORES).compared > 0
    assert [s.round for s in report.scores] == [1, 2]
    assert all(s.within_tolerance for s in report.scores)
    assert report.scores[0].reproduced[2] == 0  # the NaN update: rejected, quality 0, as posted
    assert report.scores[0].rejections == (None, None, "non_finite")
    assert report.scores[1].reproduced[2] is None  # removed after round 1: not scored


def test_a_round_posted_with_a_quality_it_cannot_reproduce_is_flagged(scored_task: DrivenTask) -> None:
    readings = scored_task.readings
    posted = next(
        e for e in readings.events if isinstance(e, RoundPosted) and e.task_id == scored_task.task_id and e.round == 2
    )
    inflated = (
        posted.measurements[0]._replace(quality=posted.measurements[0].quality + 10**16),
        *posted.measurements[1:],
    )
    events = tuple(dataclasses.replace(e, measurements=inflated) if e is posted else e for e in readings.events)

    found = verify_scores(scored_task.task_id, events, scored_task.store())

    [finding] = found.tally.findings[CheckName.SCORES]
    assert finding.message.startswith(f"round 2 client 0: quality {inflated[0].quality / WAD:.6f}, reproduced ")
    assert [r.within_tolerance for r in found.rounds] == [True, False]


def test_reproducing_with_another_strategy_than_the_aggregator_ran_flags_the_rounds(scored_task: DrivenTask) -> None:
    readings = scored_task.readings

    found = verify_scores(scored_task.task_id, readings.events, scored_task.store(), strategy="cgsv")

    assert found.tally.findings[CheckName.SCORES]
    assert not all(r.within_tolerance for r in found.rounds)


def test_a_round_still_pending_is_reproduced_before_it_is_final(scored_task: DrivenTask) -> None:
    # The chain as it was between round 2's post and its finalisation: the round is posted, not final.
    events = scored_task.readings.events
    finalized = next(
        e for e in events if isinstance(e, RoundFinalized) and e.task_id == scored_task.task_id and e.round == 2
    )
    before = tuple(e for e in events if e < finalized)
    assert [p.final for p in replay_task(scored_task.task_id, before).history.posted] == [True, False]

    found = verify_scores(scored_task.task_id, before, scored_task.store())

    assert not found.tally.findings, found.tally.findings
    assert [(r.round, r.within_tolerance) for r in found.rounds] == [(1, True), (2, True)]


def inflated_and_challenged(task: DrivenTask, status: ChallengeStatus, fate: Fate) -> tuple[ChainEvent, ...]:
    """The scored task's events with round 2 client 0's posted quality 0.01 too high, and an entry challenge of it
    by the client, proposing the entry as the aggregator's scoring gave it, opened and closed with ``status`` (and
    the entry's ``fate``) right after the post, before the round was finalised."""
    events = task.readings.events
    posted = next(e for e in events if isinstance(e, RoundPosted) and e.task_id == task.task_id and e.round == 2)
    honest = posted.measurements[0]
    inflated = (honest._replace(quality=honest.quality + 10**16), *posted.measurements[1:])
    events = tuple(dataclasses.replace(e, measurements=inflated) if e is posted else e for e in events)
    history = replay_task(task.task_id, events).history
    window = next(e.verdict_window for e in events if isinstance(e, CommitteeFormed))
    opened_at = history.posted[1].posted_at
    assert opened_at is not None
    where: dict[str, Any] = {
        "block_number": posted.block_number,
        "transaction_hash": posted.transaction_hash,
        "address": posted.address,
        "task_id": task.task_id,
        "challenge_id": 10**6,
        "round": 2,
        "client_index": 0,
    }
    challenge = (
        ChallengeOpened(
            **where,
            log_index=10**4,
            kind=ChallengeKind.ENTRY,
            challenger=history.clients[0].account,
            accused=history.task.aggregator,
            proposed=honest,
            value=0,
            bond=10**15,
            verdict_deadline=opened_at + window,
        ),
        ChallengeResolved(**where, log_index=10**4 + 1, status=status, fate=fate),
    )
    return tuple(sorted((*events, *challenge)))


@pytest.mark.parametrize(
    ("status", "fate", "compared", "flagged"),
    [
        (ChallengeStatus.UPHELD, Fate.CORRECTED, True, False),  # compared as the verdict corrected it: as reproduced
        (ChallengeStatus.REJECTED, Fate.POSTED, True, True),  # the posted entry stands, and it is off
        (
            ChallengeStatus.EXPIRED,
            Fate.NEUTRAL,
            False,
            False,
        ),  # no verdict in time: the entry is not scored, not compared
    ],
)
def test_a_challenged_entry_is_compared_as_its_fate_made_it(
    scored_task: DrivenTask, status: ChallengeStatus, fate: Fate, compared: bool, flagged: bool
) -> None:
    events = inflated_and_challenged(scored_task, status, fate)

    found = verify_scores(scored_task.task_id, events, scored_task.store())

    assert (found.rounds[1].reproduced[0] is not None) == compared
    messages = [f.message for f in found.tally.findings.get(CheckName.SCORES, [])]
    assert bool(messages) == flagged, messages
    assert [r.within_tolerance for r in found.rounds] == [True, not flagged]
    if flagged:
        assert [m.split(":")[0] for m in messages] == ["round 2 client 0"]
