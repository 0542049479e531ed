"""The pure audit over hand-made event lists: numbers checked against values computed by hand from the formulas.

The task: one round, T_ex = 100 s (T = 100 s), psi = 1e15 wei, phi = 1e12 wei/s,
q_min = 0.5, t_max = 300 s, cap 10. One client (deposit 0.01 ETH, 600 samples)
whose only bid (5000 Hz, 1e14 wei per round, fog deposit 0.02 ETH) wins. The
round starts at t = 1000, the fog commits at t = 1050 (t = 50 s), the
aggregator posts quality 0.8, and the task finishes at t = 1060. By hand:

* r_a = 2 * (1 * 0.8) / (1 * 2) = 0.8 (0.8 >= q_min: no decay);
* r_t = 2 * (1 * T / t) / 2 = 100 / 50 = 2 (t <= t_max: no penalty);
* P = psi * r_t^2 * r_a = 1e15 * 4 * 0.8 = 3.2e15 wei;
* bonus = phi * (T_ex - T_r) * r_a * r_t = 1e12 * (100 - 60) * 1.6 = 6.4e13 wei;
* refund = 1e18 - 3.2e15 - 6.4e13 = 996_736_000_000_000_000 wei.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from fedchain.audit import CheckName, CheckStatus, audit_task, replay_task
from fedchain.chain import bindings as b
from fedchain.fl.reputation import ABANDON_GRACE, WAD

PUBLISHER, AGGREGATOR, CLIENT, FOG, STRANGER = (f"0x{n:040x}" for n in (0xA1, 0xA2, 0xC1, 0xF1, 0xEE))
#: Field order of ITaskRegistry.TaskParams: modelId, datasetId, rounds, targetAccuracy, expectedDuration, psi, phi,
#: r_a_min, r_t_min, q_min, t_max, cap, d, r, c, roundDuration, biddingDuration, revealDuration, tolerance, maxClients, secondPrice.
PARAMS = b.TaskParams(
    b"\x01" * 32, b"\x02" * 32, 1, 0, 100, 10**15, 10**12, WAD // 10, WAD // 10, WAD // 2, 300, 10 * WAD, 10**16,
    2 * 10**16, 1000, 400, 100, 100, 5, 10, False,
)
BUDGET, PRICE = 10**18, 10**14
PAYMENT, BONUS = 3_200_000_000_000_000, 64_000_000_000_000
REFUND = BUDGET - PAYMENT - BONUS


def reason(code: str) -> bytes:
    return code.encode().ljust(32, b"\0")


class EventLog:
    """Events in chain order, one block per transaction."""

    def __init__(self) -> None:
        self.events: list[Any] = []

    def tx(self, *entries: tuple[type, dict[str, Any]]) -> None:
        """One transaction's events; a credit of 0 wei emits nothing, as in the Treasury."""
        block = len({e.block_number for e in self.events}) + 1
        entries = tuple((cls, fields) for cls, fields in entries if not (cls is b.Credited and fields["amount"] == 0))
        for index, (cls, fields) in enumerate(entries):
            self.events.append(cls(block_number=block, log_index=index, transaction_hash=f"0x{block:064x}",
                                   address="0x" + "00" * 20, **fields))


def started_task(budget: int) -> EventLog:
    """The module docstring's task from creation to the fog's commit of round 1 (t = 1050)."""
    t = {"task_id": 1}
    log = EventLog()
    log.tx((b.TaskCreated, dict(t, publisher=PUBLISHER, aggregator=AGGREGATOR, budget=budget, params=PARAMS)),
           (b.Deposited, dict(t, from_=PUBLISHER, amount=budget, held=budget)))
    log.tx((b.ClientJoined, dict(t, client=CLIENT, client_index=0, data_commitment=b"\x03" * 32, deposit=10**16)),
           (b.Deposited, dict(t, from_=CLIENT, amount=10**16, held=budget + 10**16)))
    log.tx((b.AuctionOpened, dict(t, client_index=0, data_size=600, bidding_deadline=900, reveal_deadline=1000)),)
    log.tx((b.BidCommitted, dict(t, client_index=0, bidder=FOG, bid_index=0, commitment=b"\x04" * 32)),
           (b.Deposited, dict(t, from_=FOG, amount=2 * 10**16, held=budget + 3 * 10**16)))
    log.tx((b.BidRevealed, dict(t, client_index=0, bidder=FOG, bid_index=0, frequency=5000, price=PRICE)),)
    log.tx((b.AuctionClosed, dict(t, client_index=0, winner=0, price=PRICE, escrow=PRICE)),
           (b.Deposited, dict(t, from_=CLIENT, amount=PRICE, held=budget + 3 * 10**16 + PRICE)))
    log.tx((b.TaskStarted, dict(t, started_at=1000, clients=1)),)
    log.tx((b.UpdateCommitted, dict(t, client_index=0, round=1, fog=FOG, update_hash=b"\x05" * 32, committed_at=1050, payment=PRICE)),
           (b.Credited, dict(t, to=FOG, amount=PRICE, reason=reason("FOG_PAYMENT"))))
    return log


def one_round_task(*, budget: int = BUDGET, paid: int | None = None, quality: int = 8 * WAD // 10) -> list[Any]:
    """The module docstring's task, from creation to withdrawals, as the contracts would emit it.

    A budget below the payment scales it down to the budget (pro rata), and the bonus to what is left.
    """
    earned = min(PAYMENT, budget)
    paid = earned if paid is None else paid
    bonus = min(BONUS, budget - earned)
    refund = budget - earned - bonus
    t = {"task_id": 1}
    log = started_task(budget)
    measurement = b.Measurement(quality=quality, round_time=50, accepted=True)
    log.tx((b.RoundPosted, dict(t, round=1, model_hash=b"\x06" * 32, accuracy=WAD // 2, measurements=(measurement,), paid=paid)),
           (b.RoundClosed, dict(t, round=1, spent=paid, budget_left=budget - paid, next_round_started_at=0)),
           (b.TaskFinished, dict(t, last_round=1, finished_at=1060, target_reached=False)))
    log.tx((b.ClientSettled, dict(t, client_index=0, earned=earned, bonus=bonus, deposit_returned=10**16)),
           (b.Credited, dict(t, to=CLIENT, amount=earned + bonus, reason=reason("CLIENT_REWARD"))),
           (b.Credited, dict(t, to=CLIENT, amount=10**16, reason=reason("DEPOSIT_RETURN"))),
           (b.TaskSettled, dict(t, bonuses=bonus, refund=refund)),
           (b.Credited, dict(t, to=PUBLISHER, amount=refund, reason=reason("BUDGET_REFUND"))))
    log.tx((b.JobSettled, dict(t, client_index=0, escrow_refund=0, deposits_refunded=2 * 10**16, deposits_forfeited=0)),
           (b.Credited, dict(t, to=FOG, amount=2 * 10**16, reason=reason("BID_REFUND"))))
    log.tx((b.Withdrawn, {"account": CLIENT, "amount": earned + bonus + 10**16}),)
    return log.events


def failed(report: Any) -> set[str]:
    return {name.value for name in report.failed_checks}


def test_replay_recomputes_the_hand_computed_reputation_payment_and_bonus() -> None:
    events = one_round_task()

    replay = replay_task(1, events)

    client = replay.history.clients[0]
    assert (client.loss_reputation, client.time_reputation) == (8 * WAD // 10, 2 * WAD)
    assert (client.earned, client.bonus, client.deposit_returned) == (PAYMENT, BONUS, 10**16)
    assert replay.history.rounds[0].payments == (PAYMENT,)
    assert replay.history.task.status == "Settled" and replay.history.task.refund == REFUND
    assert replay.history.auctions[0].winner == 0 and replay.history.auctions[0].price == PRICE
    assert replay.pool.held == 0 and replay.pool.parts == 0


def test_a_budget_short_of_the_payment_pays_it_pro_rata_and_no_bonus() -> None:
    events = one_round_task(budget=10**15)

    report = audit_task(1, events)

    assert report.passed, [f.message for c in report.checks for f in c.findings]
    client = report.history.clients[0]
    assert (client.earned, client.bonus, report.history.task.refund) == (10**15, 0, 0)


def test_audit_of_the_consistent_event_list_passes() -> None:
    events = one_round_task()

    report = audit_task(1, events)

    assert report.passed, [f.message for c in report.checks for f in c.findings]
    statuses = {c.name: c.status for c in report.checks}
    for check in (CheckName.HISTORY, CheckName.AUCTIONS, CheckName.REPUTATION, CheckName.PAYMENTS, CheckName.WITHDRAWALS):
        assert statuses[check] is CheckStatus.PASS
    assert statuses[CheckName.STORE_UPDATES] is CheckStatus.SKIPPED


def test_a_round_that_paid_one_wei_too_much_fails_the_payment_check() -> None:
    events = one_round_task(paid=PAYMENT + 1)

    report = audit_task(1, events)

    assert CheckName.PAYMENTS in report.failed_checks
    messages = [f.message for f in report.check(CheckName.PAYMENTS).findings]
    assert f"round 1 paid: recomputed {PAYMENT}, chain has {PAYMENT + 1}" in messages


def test_a_posted_quality_that_does_not_explain_the_payments_fails() -> None:
    events = one_round_task(quality=9 * WAD // 10)

    report = audit_task(1, events)

    assert CheckName.PAYMENTS in report.failed_checks


@pytest.mark.parametrize("drop", ["Credited", "Deposited"])
def test_a_missing_money_event_breaks_the_task_escrow(drop: str) -> None:
    events = one_round_task()
    victim = next(e for e in events if type(e).__name__ == drop)
    events.remove(victim)

    report = audit_task(1, events)

    assert CheckName.ESCROW_TASK in report.failed_checks


def test_a_credit_from_nowhere_breaks_conservation_and_is_unexplained() -> None:
    events = one_round_task()
    last = events[-1]
    forged = b.Credited(block_number=last.block_number + 1, log_index=0, transaction_hash="0x" + "ff" * 32,
                        address=last.address, task_id=1, to=STRANGER, amount=1, reason=reason("CLIENT_REWARD"))

    report = audit_task(1, [*events, forged])

    assert {CheckName.ESCROW_TASK.value, CheckName.ESCROW_TREASURY.value, CheckName.PAYMENTS.value} <= failed(report)


def test_a_withdrawal_larger_than_the_credits_is_flagged() -> None:
    events = one_round_task()
    greedy = dataclasses.replace(events[-1], log_index=1, account=FOG, amount=PRICE + 2 * 10**16 + 1)

    report = audit_task(1, [*events, greedy])

    assert CheckName.WITHDRAWALS in report.failed_checks
    assert CheckName.ESCROW_TASK not in report.failed_checks


def test_events_of_an_unknown_task_fail_the_history_check() -> None:
    report = audit_task(2, one_round_task())

    assert report.check(CheckName.HISTORY).failed
    assert "no TaskCreated event for task 2" in report.check(CheckName.HISTORY).findings[0].message


def test_the_json_report_keeps_stable_keys_and_wei_as_strings() -> None:
    report = audit_task(1, one_round_task())

    data = report.to_dict()

    assert list(data) == ["format", "task_id", "block_number", "passed", "checks", "task", "clients", "fog_nodes",
                          "auctions", "commits", "slashes", "rounds", "accounts", "score_tolerance", "scores"]
    assert data["clients"][0]["earned"] == str(PAYMENT)
    assert data["rounds"][0]["payments"] == [str(PAYMENT)]
    assert data["task"]["refund"] == str(REFUND)
    assert [c["name"] for c in data["checks"]] == [name.value for name in CheckName]


def test_a_cancelled_task_returns_budget_and_deposits_and_passes() -> None:
    t = {"task_id": 1}
    log = EventLog()
    log.tx((b.TaskCreated, dict(t, publisher=PUBLISHER, aggregator=AGGREGATOR, budget=BUDGET, params=PARAMS)),
           (b.Deposited, dict(t, from_=PUBLISHER, amount=BUDGET, held=BUDGET)))
    log.tx((b.ClientJoined, dict(t, client=CLIENT, client_index=0, data_commitment=b"\x03" * 32, deposit=10**16)),
           (b.Deposited, dict(t, from_=CLIENT, amount=10**16, held=BUDGET + 10**16)))
    log.tx((b.TaskCancelled, dict(t, refund=BUDGET)),
           (b.Credited, dict(t, to=PUBLISHER, amount=BUDGET, reason=reason("BUDGET_REFUND"))))
    log.tx((b.ClientSettled, dict(t, client_index=0, earned=0, bonus=0, deposit_returned=10**16)),
           (b.Credited, dict(t, to=CLIENT, amount=10**16, reason=reason("DEPOSIT_RETURN"))))

    report = audit_task(1, log.events)

    assert report.passed, [f.message for c in report.checks for f in c.findings]
    assert report.history.task.status == "Cancelled"
    assert report.history.clients[0].deposit_returned == 10**16


def test_the_html_report_is_one_self_contained_page_with_the_tables_and_two_plots() -> None:
    from fedchain.audit.render import html_report

    page = html_report(audit_task(1, one_round_task()))

    assert page.startswith("<!DOCTYPE html>") and page.count('src="data:image/png;base64,') == 2
    for section in ("Checks", "Clients", "Fog nodes", "Auctions", "Slashes", "Rounds", "Money by account"):
        assert f"<h2>{section}</h2>" in page
    assert "http" not in page.replace("http-equiv", "")  # nothing fetched from elsewhere


def abandoned_task(*, abandoned_at: int = 1000 + 400 + ABANDON_GRACE + 1, refund: int = BUDGET) -> list[Any]:
    """The module docstring's task up to the fog's commit of round 1; the aggregator never posts and a stranger
    abandons the task after the round's deadline (t = 1400) plus the grace; then the client and the job settle."""
    t = {"task_id": 1}
    log = started_task(BUDGET)
    log.tx((b.TaskAbandoned, dict(t, round=1, abandoned_at=abandoned_at, refund=refund)),
           (b.Credited, dict(t, to=PUBLISHER, amount=refund, reason=reason("BUDGET_REFUND"))))
    log.tx((b.ClientSettled, dict(t, client_index=0, earned=0, bonus=0, deposit_returned=10**16)),
           (b.Credited, dict(t, to=CLIENT, amount=10**16, reason=reason("DEPOSIT_RETURN"))))
    log.tx((b.JobSettled, dict(t, client_index=0, escrow_refund=0, deposits_refunded=2 * 10**16, deposits_forfeited=0)),
           (b.Credited, dict(t, to=FOG, amount=2 * 10**16, reason=reason("BID_REFUND"))))
    return log.events


def test_an_abandoned_task_refunds_budget_and_deposits_without_bonus_and_passes() -> None:
    events = abandoned_task()

    report = audit_task(1, events)

    assert report.passed, [f.message for c in report.checks for f in c.findings]
    task = report.history.task
    assert (task.status, task.abandoned_at, task.last_round) == ("Abandoned", 1000 + 400 + ABANDON_GRACE + 1, 0)
    client = report.history.clients[0]
    assert (client.earned, client.bonus, client.deposit_returned) == (0, 0, 10**16)
    pool = replay_task(1, events).pool
    assert pool.held == 0 and pool.parts == 0


def test_a_task_abandoned_within_the_grace_period_fails_the_history_check() -> None:
    events = abandoned_task(abandoned_at=1000 + 400 + ABANDON_GRACE)

    report = audit_task(1, events)

    assert failed(report) == {CheckName.HISTORY.value}


def test_an_abandonment_that_keeps_one_wei_of_the_budget_fails_the_payment_check() -> None:
    events = abandoned_task(refund=BUDGET - 1)

    report = audit_task(1, events)

    assert CheckName.PAYMENTS in report.failed_checks
    assert f"refund at abandonment: recomputed {BUDGET}, chain has {BUDGET - 1}" in [
        f.message for f in report.check(CheckName.PAYMENTS).findings
    ]
