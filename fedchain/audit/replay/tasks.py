"""The replay of TaskRegistry's events: a task's life cycle, its round clock and its budget."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fedchain.audit.replay.state import BUDGET_REFUND, H, P, ReplayState, mechanism_of
from fedchain.chain import bindings as b
from fedchain.fl.reputation import ABANDON_GRACE, neutral_finish


def on_task_created(r: ReplayState, e: b.TaskCreated) -> None:
    if not r.tally.require(H, r.created is None, "the task was created twice", e):
        return
    r.created = e
    r.mechanism = r.override or mechanism_of(e.params)
    r.status = "Open"
    r.budget_left = e.budget
    r.expected_deposits[(e.publisher, e.budget)] += 1


def on_task_cancelled(r: ReplayState, e: b.TaskCancelled) -> None:
    r.require_status(e, "Open")
    r.tally.expect(P, "cancellation refund", r.budget_left, e.refund, e)
    r.credit(r.publisher, e.refund, BUDGET_REFUND)
    r.budget_left = 0
    r.status = "Cancelled"


def on_task_abandoned(r: ReplayState, e: b.TaskAbandoned) -> None:
    r.require_status(e, "Running")
    r.tally.expect(H, "abandoned round", r.current_round, e.round, e)
    p = r.params
    after = r.round_started_at + p.round_duration + ABANDON_GRACE
    r.tally.require(
        H,
        e.abandoned_at > after,
        f"task abandoned at {e.abandoned_at}, not after its round's deadline plus the grace ({after})",
        e,
    )
    # The rounds left count as neutral rounds posted at their deadlines (eq. 16's finish).
    finish = neutral_finish(r.round_started_at, r.current_round, p.rounds, p.round_duration)
    r.tally.expect(P, "finish time of the abandoned task's neutral rounds", finish, e.finished_at, e)
    r.status, r.abandoned_at, r.finished_at = "Abandoned", e.abandoned_at, e.finished_at


def on_early_finish_voided(r: ReplayState, e: b.EarlyFinishVoided) -> None:
    expected = r.take_expected(e.transaction_hash, "void")
    r.tally.require(
        H, expected == e.round, f"round {e.round}'s early finish voided without its accuracy found wrong or moot", e
    )
    r.require_status(e, "Finished")
    if r.finished_at is not None:
        finish = r.finished_at + (r.params.rounds - e.round) * r.params.round_duration
        r.tally.expect(P, "finish time of the voided early finish", finish, e.finished_at, e)
    r.finished_at, r.early_finish_voided = e.finished_at, True


def on_task_started(r: ReplayState, e: b.TaskStarted) -> None:
    r.require_status(e, "Open")
    r.tally.expect(H, "clients at start", len(r.clients), e.clients, e)
    r.status, r.current_round = "Running", 1
    r.started_at = r.round_started_at = e.started_at
    r.in_task_at_start = r.in_task()


def on_round_closed(r: ReplayState, e: b.RoundClosed) -> None:
    if not r.tally.require(
        H,
        r.pending_close is not None and r.pending_close[0] == e.round,
        f"round {e.round} closed without being posted",
        e,
    ):
        return
    assert r.pending_close is not None
    _, finished = r.pending_close
    r.pending_close = None
    r.tally.expect(H, f"task finished after round {e.round}", finished, e.next_round_started_at == 0, e)
    if e.next_round_started_at != 0:
        r.posted[e.round].posted_at = e.next_round_started_at
        r.current_round += 1
        r.round_started_at = e.next_round_started_at
        r.in_task_at_start = r.in_task()


def on_task_finished(r: ReplayState, e: b.TaskFinished) -> None:
    r.require_status(e, "Running")
    r.tally.expect(H, "last round", r.current_round, e.last_round, e)
    target = r.params.target_accuracy
    last = r.posted.get(e.last_round)
    reached = last is not None and last.event is not None and target != 0 and last.event.accuracy >= target
    r.tally.expect(H, "target reached", reached, e.target_reached, e)
    if last is not None:
        last.posted_at = e.finished_at
    r.status, r.finished_at, r.target_reached = "Finished", e.finished_at, e.target_reached


def on_budget_spent(r: ReplayState, e: b.BudgetSpent) -> None:
    expected = r.pending_spend
    r.pending_spend = None
    if not r.tally.require(
        H,
        expected is not None and expected[0] == e.round,
        f"budget spent on round {e.round}, which was not finalised",
        e,
    ):
        return
    assert expected is not None
    r.tally.expect(P, f"round {e.round} spent", expected[1], e.spent, e)
    r.tally.expect(P, f"budget left after round {e.round}", r.budget_left - e.spent, e.budget_left, e)
    r.budget_left = e.budget_left


def on_task_settled(r: ReplayState, e: b.TaskSettled) -> None:
    r.require_status(e, "Finished", "Abandoned")
    r.tally.expect(P, "final bonuses", sum(r.expected_bonuses or ()), e.bonuses, e)
    r.tally.expect(P, "budget refund at settlement", r.budget_left - e.bonuses, e.refund, e)
    r.credit(r.publisher, e.refund, BUDGET_REFUND)
    r.settled_bonuses, r.settled_refund = e.bonuses, e.refund
    r.budget_left = 0
    if r.status == "Finished":
        r.status = "Settled"


HANDLERS: dict[type, Callable[[ReplayState, Any], None]] = {
    b.TaskCreated: on_task_created,
    b.TaskCancelled: on_task_cancelled,
    b.TaskAbandoned: on_task_abandoned,
    b.EarlyFinishVoided: on_early_finish_voided,
    b.TaskStarted: on_task_started,
    b.RoundClosed: on_round_closed,
    b.TaskFinished: on_task_finished,
    b.BudgetSpent: on_budget_spent,
    b.TaskSettled: on_task_settled,
}
