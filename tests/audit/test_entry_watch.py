"""A client watching its own entries (:class:`fedchain.disputes.watch.EntryWatcher`) on the scored task.

In the scored task (``conftest.drive_scored_task``) the aggregator scored
every round with its own code, so each entry is as it should be; client 2's
update is malformed (NaN) and rejected, so client 2 is screened out. A
client in committee mode (``--watch committee``) does not re-execute: a
screened-out entry makes it blame the fog node that committed, and the
arbiters re-execute.
"""

from __future__ import annotations

import dataclasses

from fedchain.agent.session import open_session
from fedchain.audit import audit_task
from fedchain.chain.bindings import UpdateCommitted
from fedchain.disputes.judging import scored_commit
from fedchain.disputes.watch import EntryWatcher
from tests.audit.conftest import DrivenTask


def watcher(task: DrivenTask, *, reexecute: bool) -> EntryWatcher:
    session = open_session(
        task.deployment_file, rpc_url=task.node.rpc_url, store_url=str(task.store_url), read_only=True
    )
    return EntryWatcher(session, task.task_id, reexecute=reexecute)


def test_in_committee_mode_a_screened_out_client_blames_its_fog_node_and_nobody_else_does(
    scored_task: DrivenTask,
) -> None:
    committee = watcher(scored_task, reexecute=False)
    [commit] = [
        e
        for e in scored_task.readings.events
        if isinstance(e, UpdateCommitted) and e.task_id == scored_task.task_id and e.round == 1 and e.client_index == 2
    ]

    grievance = committee.review(1, 2, own_job=True)

    assert grievance is not None
    assert (grievance.kind, grievance.round, grievance.client_index, grievance.fog) == ("fog", 1, 2, commit.fog)
    assert "left to the arbiters" in grievance.reason
    # an entry scored as it should be gives no grievance; nor does another's screened-out job
    assert committee.review(1, 0, own_job=True) is None
    assert committee.review(1, 2, own_job=False) is None


def test_the_update_a_round_scored_is_the_jobs_commit_unless_a_fraud_verdict_withdrew_it(
    scored_task: DrivenTask,
) -> None:
    # A fog node slashed for fraud after committing the open round has that commit withdrawn (the round scores no
    # update of the job, and no other commit replaces it): a challenge of the round must not name it.
    history = audit_task(scored_task.task_id, scored_task.readings.events).history
    first = scored_commit(history, 1, 2)
    assert first is not None and first.fog == next(
        c.fog for c in history.commits if (c.client_index, c.round) == (2, 1)
    )
    withdrawn = dataclasses.replace(
        history, commits=tuple(dataclasses.replace(c, withdrawn=c == first) for c in history.commits)
    )

    assert scored_commit(withdrawn, 1, 2) is None
    assert scored_commit(withdrawn, 1, 0) == scored_commit(history, 1, 0)
    assert scored_commit(history, 9, 2) is None
