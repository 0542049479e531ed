"""The ``reputation.cross_task`` check: the posted priors of eq. 8, recomputed from earlier tasks' events.

The aggregator posts each task's cross-task priors H_i once, before round 1
(``PriorsPosted``), from the chain as it stood at the end of the block in which
the task started (:mod:`fedchain.aggregator.priors`). The auditor rebuilds every
earlier task of the deployment from its own events up to that block
(:func:`fedchain.audit.replay.replay_task`: loss reputations and finish times,
not the aggregator's word), keeps those that had finished then with all their
posted rounds final, recomputes H_i with
:func:`fedchain.fl.crosstask.history_priors` and flags any difference. A task
that posted a round without posting priors counts as having posted all zeros.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from fedchain.audit.checks import CheckName, Tally
from fedchain.audit.history import TaskHistory
from fedchain.audit.replay import replay_task
from fedchain.chain import bindings as b
from fedchain.chain.abi import ChainEvent
from fedchain.fl.crosstask import CrossTaskPriors, FinishedTask, history_priors

C = CheckName.CROSS_TASK

#: The statuses of a replayed task whose final reputations count as history.
FINISHED_STATUSES = ("Finished", "Settled")


def earlier_tasks(events: Sequence[ChainEvent], *, block: int, exclude: int) -> list[FinishedTask]:
    """Every task of ``events`` other than ``exclude`` that, at the end of ``block``, had finished (or settled)
    with all its posted rounds final, replayed from its events up to that block.

    The events are split by task once and each task is replayed from its own
    events only (withdrawals, which name no task, do not move reputations), so
    the check reads the deployment's events once rather than once per task.
    """
    by_task: dict[int, list[ChainEvent]] = defaultdict(list)
    for event in events:
        task_id = getattr(event, "task_id", None)
        if task_id is not None and task_id != exclude and event.block_number <= block:
            by_task[task_id].append(event)
    created = sorted(task_id for task_id, own in by_task.items() if any(isinstance(e, b.TaskCreated) for e in own))
    tasks = []
    for task_id in created:
        history = replay_task(task_id, by_task[task_id]).history
        finished_at = history.task.finished_at
        if history.task.status not in FINISHED_STATUSES or finished_at is None:
            continue
        if not all(p.final for p in history.posted):
            continue  # its last reputations were still open to challenge
        tasks.append(FinishedTask(task_id, finished_at, {c.account: c.loss_reputation for c in history.clients}))
    return tasks


def expected_priors(history: TaskHistory, events: Sequence[ChainEvent]) -> CrossTaskPriors | None:
    """The priors the task should have posted, recomputed from the earlier tasks' events; None when the task has not
    started or its ``TaskStarted`` event is not among ``events``."""
    task = history.task
    if task.started_at is None or task.params is None:
        return None
    started = [e for e in events if isinstance(e, b.TaskStarted) and e.task_id == task.task_id]
    if not started:
        return None
    earlier = earlier_tasks(events, block=started[0].block_number, exclude=task.task_id)
    return history_priors(
        [c.account for c in history.clients],
        current_task_id=task.task_id,
        started_at=task.started_at,
        earlier=earlier,
        reputation_cap=task.params.reputation_cap,
    )


def check_cross_task(history: TaskHistory, events: Sequence[ChainEvent]) -> Tally:
    """Compare the task's posted priors with those recomputed from the earlier tasks' events."""
    tally = Tally()
    task = history.task
    if task.started_at is None or task.params is None:
        tally.skip(C, "the task has not started")
        return tally
    posted_events = [e for e in events if isinstance(e, b.PriorsPosted) and e.task_id == task.task_id]
    if not posted_events and not history.posted:
        tally.skip(C, "no priors posted yet (they are posted before round 1)")
        return tally
    expected = expected_priors(history, events)
    if expected is None:
        tally.skip(C, "the task's TaskStarted event is not among the events read")
        return tally
    posted = tuple(posted_events[0].priors) if posted_events else (0,) * len(history.clients)
    at = posted_events[0] if posted_events else None
    similar = ", ".join(f"task {t} (sim {s / 10**18:.4f})" for t, s in expected.similar) or "none"
    tally.expect(C, f"priors (similar earlier tasks: {similar})", expected.priors, posted, at)
    return tally
