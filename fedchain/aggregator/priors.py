"""The cross-task priors of a task (eq. 6, :mod:`fedchain.fl.crosstask`) from the chain's views.

Before round 1 the aggregator reads the chain as it stood at the end of the
block in which the task started (``TaskStarted``): every earlier task that had
finished then with all its posted rounds final (its finish time and its clients'
loss reputations, from ``TaskRegistry.state``, ``RoundLedger.rounds`` and
``RoundLedger.client``). It computes each current client's history term H_i
and posts them once (``RoundLedger.postPriors``), all zeros included, so the
auditor sees the decision and can re-check it from the events up to the same
block (:mod:`fedchain.audit.crosstask`).

The block is fixed, not "now": a round of an earlier task finalised while the
priors are on their way changes that task's reputations, and the priors would
then depend on which transaction the chain took first. Reading the state of a
past block needs a node that still holds it: any node does for the last 128
blocks, and the priors are posted within the task's first round.
"""

from __future__ import annotations

from web3 import Web3

from fedchain.chain.bindings import RoundLedger, TaskRegistry, TaskStarted, TaskState, TaskStatus
from fedchain.chain.events import task_events
from fedchain.errors import AgentError
from fedchain.fl.crosstask import CrossTaskPriors, FinishedTask, history_priors

#: The statuses of a task whose final reputations count as history.
FINISHED_STATUSES = (TaskStatus.FINISHED, TaskStatus.SETTLED)


def finished_tasks(registry: TaskRegistry, ledger: RoundLedger, *, block: int, exclude: int) -> list[FinishedTask]:
    """Every task other than ``exclude`` that, at the end of ``block``, had finished (or settled) with all its
    posted rounds final."""
    tasks = []
    for task_id in range(1, registry.task_count(block=block) + 1):
        if task_id == exclude:
            continue
        state = registry.state(task_id, block=block)
        if state.status not in FINISHED_STATUSES:
            continue
        posted, finalized = ledger.rounds(task_id, block=block)
        if finalized < posted:
            continue  # its last reputations are still open to challenge
        clients = (ledger.client(task_id, i, block=block) for i in range(ledger.client_count(task_id, block=block)))
        tasks.append(FinishedTask(task_id, state.finished_at, {c.account: c.loss_reputation for c in clients}))
    return tasks


def start_block(w3: Web3, registry: TaskRegistry, task_id: int, *, from_block: int) -> int:
    """The block in which task ``task_id`` started (its ``TaskStarted`` event), searched from ``from_block``."""
    for event in task_events(w3, registry.address, TaskStarted, task_id, from_block=from_block):
        return event.block_number
    raise AgentError(
        f"task {task_id} has no TaskStarted event since block {from_block}: it has not started yet, "
        "or the deployment file names the wrong first block"
    )


def chain_priors(
    registry: TaskRegistry, ledger: RoundLedger, task_id: int, state: TaskState, *, block: int
) -> CrossTaskPriors:
    """The priors of task ``task_id`` (running, with ``state``; started in ``block``) from the earlier tasks."""
    clients = [ledger.client(task_id, i).account for i in range(ledger.client_count(task_id))]
    earlier = finished_tasks(registry, ledger, block=block, exclude=task_id)
    cap = registry.params(task_id).reputation_cap
    return history_priors(
        clients, current_task_id=task_id, started_at=state.started_at, earlier=earlier, reputation_cap=cap
    )
