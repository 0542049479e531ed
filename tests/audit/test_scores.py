"""``--verify-scores``: the posted qualities are reproduced from the chain and the store, or the round is flagged."""

from __future__ import annotations

import dataclasses

from fedchain.audit import CheckName, audit_task
from fedchain.audit.scores import verify_scores
from fedchain.chain.bindings import RoundPosted
from tests.audit.conftest import DrivenTask


def test_scores_posted_by_the_aggregators_scoring_are_reproduced(scored_task: DrivenTask) -> None:
    readings = scored_task.readings

    scores = verify_scores(scored_task.task_id, readings.events, scored_task.store())
    report = audit_task(scored_task.task_id, readings.events, views=readings.views, store=scored_task.store(), scores=scores)

    assert report.passed, {c.name.value: [f.message for f in c.findings] for c in report.checks if c.failed}
    assert report.check(CheckName.SCORES).compared > 0
    assert [s.round for s in report.scores] == [1, 2]
    assert all(s.within_tolerance for s in report.scores)
    assert report.scores[0].reproduced[2] == 0  # the NaN update: rejected, quality 0, as posted
    assert report.scores[0].rejections == (None, None, "non_finite")
    assert report.scores[1].reproduced[2] is None  # removed after round 1: not scored


def test_a_round_posted_with_a_quality_it_cannot_reproduce_is_flagged(scored_task: DrivenTask) -> None:
    readings = scored_task.readings
    posted = next(e for e in readings.events if isinstance(e, RoundPosted) and e.task_id == scored_task.task_id and e.round == 2)
    inflated = (posted.measurements[0]._replace(quality=posted.measurements[0].quality + 10**16), *posted.measurements[1:])
    events = tuple(dataclasses.replace(e, measurements=inflated) if e is posted else e for e in readings.events)

    found = verify_scores(scored_task.task_id, events, scored_task.store())

    [finding] = found.tally.findings[CheckName.SCORES]
    assert finding.message.startswith("round 2 client 0: posted quality")
    assert [r.within_tolerance for r in found.rounds] == [True, False]



def test_reproducing_with_another_strategy_than_the_aggregator_ran_flags_the_rounds(scored_task: DrivenTask) -> None:
    readings = scored_task.readings

    found = verify_scores(scored_task.task_id, readings.events, scored_task.store(), strategy="cgsv")

    assert found.tally.findings[CheckName.SCORES]
    assert not all(r.within_tolerance for r in found.rounds)
