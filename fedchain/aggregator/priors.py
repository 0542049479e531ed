"""The cross-task priors of a task (eq. 6, :mod:`fedchain.fl.crosstask`) from the chain's views.

Before round 1 the aggregator reads every earlier finished or settled task of
the deployment (its finish time and its clients' final loss reputations, from
``TaskRegistry.state`` and ``RoundLedger.client``), computes each current
client's history term H_i, and posts them once (``RoundLedger.postPriors``),
all zeros included, so the auditor sees the decision and can re-check it.
"""

from __future__ import annotations

from fedchain.chain.bindings import RoundLedger, TaskRegistry, TaskState, TaskStatus
from fedchain.fl.crosstask import CrossTaskPriors, FinishedTask, history_priors

#: The statuses of a task whose final reputations count as history.
FINISHED_STATUSES = (TaskStatus.FINISHED, TaskStatus.SETTLED)


def finished_tasks(registry: TaskRegistry, ledger: RoundLedger, *, before: int, exclude: int) -> list[FinishedTask]:
    """Every finished or settled task other than ``exclude`` that finished at or before ``before`` (seconds)."""
    tasks = []
    for task_id in range(1, registry.task_count() + 1):
        if task_id == exclude:
            continue
        state = registry.state(task_id)
        if state.status not in FINISHED_STATUSES or state.finished_at > before:
            continue
        clients = (ledger.client(task_id, i) for i in range(ledger.client_count(task_id)))
        tasks.append(FinishedTask(task_id, state.finished_at, {c.account: c.loss_reputation for c in clients}))
    return tasks


def chain_priors(registry: TaskRegistry, ledger: RoundLedger, task_id: int, state: TaskState) -> CrossTaskPriors:
    """The priors of task ``task_id`` (running, with ``state``) from the earlier tasks on the chain."""
    clients = [ledger.client(task_id, i).account for i in range(ledger.client_count(task_id))]
    earlier = finished_tasks(registry, ledger, before=state.started_at, exclude=task_id)
    cap = registry.params(task_id).reputation_cap
    return history_priors(clients, current_task_id=task_id, started_at=state.started_at, earlier=earlier,
                          reputation_cap=cap)
