"""The pure audit over hand-made event lists: numbers checked against values computed by hand from the formulas.

The task: one round, T_ex = 100 s (T = 100 s), psi = 1e15 wei, phi = 1e12 wei/s,
q_min = 0.5, t_max = 300 s, cap 10, a challenge window of 100 s. The deployment's
sink is its own account (``SinkSet``) and its committee answers within 600 s
(``CommitteeFormed``). The aggregator bonds 2 ETH. One client (deposit 0.01 ETH,
600 samples) whose only bid (5000 Hz, 1e14 wei per round, fog deposit 0.02 ETH)
wins. The round starts at t = 1000, the fog commits at t = 1050 (t = 50 s), the
aggregator posts quality 0.8 and the task finishes at t = 1060 (the post is
pending: it moves no money); once the window has passed, the round is finalised
(the payment is credited to the client's earnings, the budget spent). By hand:

* r_a = 2 * (1 * 0.8) / (1 * 2) = 0.8 (0.8 >= q_min: no decay);
* r_t = 2 * (1 * T / t) / 2 = 100 / 50 = 2 (t <= t_max: no penalty);
* P = psi * r_t^2 * r_a = 1e15 * 4 * 0.8 = 3.2e15 wei;
* bonus = phi * (T_ex - T_r) * r_a * r_t = 1e12 * (100 - 60) * 1.6 = 6.4e13 wei;
* refund = 1e18 - 3.2e15 - 6.4e13 = 996_736_000_000_000_000 wei;
* at settlement the bond goes back to the aggregator, whole.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from fedchain.audit import CheckName, CheckStatus, audit_task, replay_task
from fedchain.chain import bindings as b
from fedchain.fl.reputation import ABANDON_GRACE, WAD
from fedchain.units import ETHER

PUBLISHER, AGGREGATOR, CLIENT, FOG, STRANGER = (f"0x{n:040x}" for n in (0xA1, 0xA2, 0xC1, 0xF1, 0xEE))
SINK, ARBITER = (f"0x{n:040x}" for n in (0x51, 0xAB))
ZERO_ADDRESS = "0x" + "00" * 20
#: Field order of ITaskRegistry.TaskParams: modelId, datasetId, rounds, targetAccuracy, expectedDuration, psi, phi,
#: r_a_min, r_t_min, q_min, t_max, cap, d, r, c, roundDuration, biddingDuration, revealDuration, tolerance, maxClients,
#: secondPrice, challengeWindow, challengeBond, aggregatorBond, selfTrained.
PARAMS = b.TaskParams(
    b"\x01" * 32,
    b"\x02" * 32,
    1,
    0,
    100,
    10**15,
    10**12,
    WAD // 10,
    WAD // 10,
    WAD // 2,
    300,
    10 * WAD,
    10**16,
    2 * 10**16,
    1000,
    400,
    100,
    100,
    5,
    10,
    False,
    100,
    5 * 10**15,
    2 * 10**18,
    False,
)
BUDGET, PRICE, BOND, CHALLENGE_BOND = 10**18, 10**14, PARAMS.aggregator_bond, PARAMS.challenge_bond
PAYMENT, BONUS = 3_200_000_000_000_000, 64_000_000_000_000
REFUND = BUDGET - PAYMENT - BONUS
#: The committee's verdict window, seconds.
VERDICT_WINDOW = 600
#: Block time of the post (the task finishes with it); the challenge window closes 100 s later.
POSTED_AT = 1060


def reason(code: str) -> bytes:
    return code.encode().ljust(32, b"\0")


class EventLog:
    """Events in chain order, one block per transaction; the Treasury's pool of each task is tracked for ``held``."""

    def __init__(self) -> None:
        self.events: list[Any] = []
        self.pools: dict[int, int] = {}

    def tx(self, *entries: tuple[type, dict[str, Any]]) -> None:
        """One transaction's events; a credit of 0 wei emits nothing, as in the Treasury, and a deposit without
        ``held`` gets the pool after it."""
        block = len({e.block_number for e in self.events}) + 1
        entries = tuple((cls, fields) for cls, fields in entries if not (cls is b.Credited and fields["amount"] == 0))
        for index, (cls, fields) in enumerate(entries):
            if cls is b.Deposited:
                self.pools[fields["task_id"]] = self.pools.get(fields["task_id"], 0) + fields["amount"]
                fields = {"held": self.pools[fields["task_id"]], **fields}
            elif cls is b.Credited:
                self.pools[fields["task_id"]] = self.pools.get(fields["task_id"], 0) - fields["amount"]
            self.events.append(
                cls(
                    block_number=block,
                    log_index=index,
                    transaction_hash=f"0x{block:064x}",
                    address="0x" + "00" * 20,
                    **fields,
                )
            )


def deployed(*, sink: bool = True) -> EventLog:
    """The deployment's own events: the Treasury's sink (unless ``sink`` is false) and the committee."""
    log = EventLog()
    entries: list[tuple[type, dict[str, Any]]] = [(b.SinkSet, {"sink": SINK})] if sink else []
    entries.append((b.CommitteeFormed, {"members": (ARBITER,), "quorum": 1, "verdict_window": VERDICT_WINDOW}))
    log.tx(*entries)
    return log


def started_task(budget: int, *, sink: bool = True) -> EventLog:
    """The module docstring's task from creation to the fog's commit of round 1 (t = 1050)."""
    t = {"task_id": 1}
    log = deployed(sink=sink)
    log.tx(
        (b.TaskCreated, dict(t, publisher=PUBLISHER, aggregator=AGGREGATOR, budget=budget, params=PARAMS)),
        (b.Deposited, dict(t, from_=PUBLISHER, amount=budget)),
    )
    log.tx(
        (b.BondPosted, dict(t, bonder=AGGREGATOR, amount=BOND)), (b.Deposited, dict(t, from_=AGGREGATOR, amount=BOND))
    )
    log.tx(
        (b.ClientJoined, dict(t, client=CLIENT, client_index=0, data_commitment=b"\x03" * 32, deposit=10**16)),
        (b.Deposited, dict(t, from_=CLIENT, amount=10**16)),
    )
    log.tx(
        (b.AuctionOpened, dict(t, client_index=0, data_size=600, bidding_deadline=900, reveal_deadline=1000)),
    )
    log.tx(
        (b.BidCommitted, dict(t, client_index=0, bidder=FOG, bid_index=0, commitment=b"\x04" * 32)),
        (b.Deposited, dict(t, from_=FOG, amount=2 * 10**16)),
    )
    log.tx(
        (b.BidRevealed, dict(t, client_index=0, bidder=FOG, bid_index=0, frequency=5000, price=PRICE)),
    )
    log.tx(
        (b.AuctionClosed, dict(t, client_index=0, winner=0, price=PRICE, escrow=PRICE)),
        (b.Deposited, dict(t, from_=CLIENT, amount=PRICE)),
    )
    log.tx(
        (b.TaskStarted, dict(t, started_at=1000, clients=1)),
    )
    log.tx(
        (
            b.UpdateCommitted,
            dict(
                t,
                client_index=0,
                round=1,
                fog=FOG,
                update_hash=b"\x05" * 32,
                committed_at=1050,
                payment=PRICE,
                transcript_root=b"\x07" * 32,
            ),
        ),
        (b.Credited, dict(t, to=FOG, amount=PRICE, reason=reason("FOG_PAYMENT"))),
    )
    return log


def post_last_round(log: EventLog, measurement: b.Measurement) -> None:
    """The aggregator posts round 1 with ``measurement`` at t = 1060: pending, the task finishes, no money moves."""
    t = {"task_id": 1}
    log.tx(
        (b.RoundPosted, dict(t, round=1, model_hash=b"\x06" * 32, accuracy=WAD // 2, measurements=(measurement,))),
        (b.RoundClosed, dict(t, round=1, next_round_started_at=0)),
        (b.TaskFinished, dict(t, last_round=1, finished_at=POSTED_AT, target_reached=False)),
    )


def finalize_round(
    log: EventLog,
    *,
    paid: int,
    budget_left: int,
    removed: tuple[tuple[int, int, int], ...] = (),
    forfeited: int | None = None,
    forfeit_to: str = SINK,
) -> None:
    """Anyone finalises round 1 once its window has passed: ``removed`` holds (client, r_a, r_t) of each client it
    removes, whose deposits go to ``forfeit_to`` (the sink, as the contracts do); ``forfeited`` defaults to theirs."""
    t = {"task_id": 1}
    forfeited = len(removed) * PARAMS.client_deposit if forfeited is None else forfeited
    log.tx(
        *[
            (b.ClientRemoved, dict(t, client_index=i, round=1, loss_reputation=r_a, time_reputation=r_t))
            for i, r_a, r_t in removed
        ],
        (b.RoundFinalized, dict(t, round=1, paid=paid, forfeited=forfeited)),
        (b.BudgetSpent, dict(t, round=1, spent=paid, budget_left=budget_left)),
        (b.Credited, dict(t, to=forfeit_to, amount=forfeited, reason=reason("DEPOSIT_FORFEIT"))),
    )


def settle(
    log: EventLog, *, earned: int, bonus: int, deposit_returned: int, refund: int, bond_forfeited: bool = False
) -> None:
    """Anyone settles the task (the client, the budget, the bond back to the aggregator, or to the sink when
    ``bond_forfeited``: the task was abandoned), then the job."""
    t = {"task_id": 1}
    bond = (
        (
            (b.BondForfeited, dict(t, amount=BOND)),
            (b.Credited, dict(t, to=SINK, amount=BOND, reason=reason("BOND_FORFEIT"))),
        )
        if bond_forfeited
        else (
            (b.BondReleased, dict(t, bonder=AGGREGATOR, amount=BOND)),
            (b.Credited, dict(t, to=AGGREGATOR, amount=BOND, reason=reason("BOND_REFUND"))),
        )
    )
    log.tx(
        (b.ClientSettled, dict(t, client_index=0, earned=earned, bonus=bonus, deposit_returned=deposit_returned)),
        (b.Credited, dict(t, to=CLIENT, amount=earned + bonus, reason=reason("CLIENT_REWARD"))),
        (b.Credited, dict(t, to=CLIENT, amount=deposit_returned, reason=reason("DEPOSIT_RETURN"))),
        (b.TaskSettled, dict(t, bonuses=bonus, refund=refund)),
        (b.Credited, dict(t, to=PUBLISHER, amount=refund, reason=reason("BUDGET_REFUND"))),
        *bond,
    )
    log.tx(
        (b.JobSettled, dict(t, client_index=0, escrow_refund=0, deposits_refunded=2 * 10**16, deposits_forfeited=0)),
        (b.Credited, dict(t, to=FOG, amount=2 * 10**16, reason=reason("BID_REFUND"))),
    )


def one_round_task(
    *, budget: int = BUDGET, paid: int | None = None, quality: int = 8 * WAD // 10, sink: bool = True
) -> list[Any]:
    """The module docstring's task, from creation to withdrawals, as the contracts would emit it.

    A budget below the payment scales it down to the budget (pro rata), and the bonus to what is left.
    ``paid`` is what the finalisation says it paid (and spent); without ``sink`` the deployment's SinkSet is missing.
    """
    earned = min(PAYMENT, budget)
    paid = earned if paid is None else paid
    bonus = min(BONUS, budget - earned)
    refund = budget - earned - bonus
    log = started_task(budget, sink=sink)
    post_last_round(log, b.Measurement(quality=quality, round_time=50, accepted=True, committed=True))
    finalize_round(log, paid=paid, budget_left=budget - paid)
    settle(log, earned=earned, bonus=bonus, deposit_returned=10**16, refund=refund)
    log.tx(
        (b.Withdrawn, {"account": CLIENT, "token": ETHER, "to": CLIENT, "amount": earned + bonus + 10**16}),
    )
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
    assert (replay.history.rounds[0].paid, replay.history.rounds[0].forfeited) == (PAYMENT, 0)
    assert replay.history.rounds[0].fates == ("posted",)
    assert [(p.round, p.posted_at, p.final) for p in replay.history.posted] == [(1, POSTED_AT, True)]
    assert replay.history.task.status == "Settled" and replay.history.task.refund == REFUND
    assert (replay.history.task.bond, replay.history.task.bond_returned, replay.history.task.sink) == (BOND, BOND, SINK)
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
    for check in (
        CheckName.HISTORY,
        CheckName.AUCTIONS,
        CheckName.REPUTATION,
        CheckName.PAYMENTS,
        CheckName.WITHDRAWALS,
        CheckName.DISPUTES,
        CheckName.SINK,
    ):
        assert statuses[check] is CheckStatus.PASS
    assert report.check(CheckName.SINK).notes == ()  # the sink was read from the deployment's SinkSet
    assert statuses[CheckName.STORE_UPDATES] is CheckStatus.SKIPPED


def test_a_round_that_paid_one_wei_too_much_fails_the_payment_check() -> None:
    # The finalisation (RoundFinalized, and the BudgetSpent it causes) says one wei more than eq. 15 gives.
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
    forged = b.Credited(
        block_number=last.block_number + 1,
        log_index=0,
        transaction_hash="0x" + "ff" * 32,
        address=last.address,
        task_id=1,
        to=STRANGER,
        amount=1,
        reason=reason("CLIENT_REWARD"),
    )

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

    assert list(data) == [
        "format",
        "task_id",
        "block_number",
        "passed",
        "checks",
        "task",
        "clients",
        "fog_nodes",
        "auctions",
        "commits",
        "slashes",
        "challenges",
        "sink",
        "rounds",
        "budget",
        "accounts",
        "score_tolerance",
        "scores",
        "asset",
    ]
    assert data["asset"] == {"address": "0x" + "00" * 20, "symbol": "ETH", "decimals": 18}
    assert data["clients"][0]["earned"] == str(PAYMENT)
    assert data["rounds"][0]["payments"] == [str(PAYMENT)]
    assert data["task"]["refund"] == str(REFUND)
    assert [c["name"] for c in data["checks"]] == [name.value for name in CheckName]


def test_a_cancelled_task_returns_budget_and_deposits_and_passes() -> None:
    t = {"task_id": 1}
    log = deployed()
    log.tx(
        (b.TaskCreated, dict(t, publisher=PUBLISHER, aggregator=AGGREGATOR, budget=BUDGET, params=PARAMS)),
        (b.Deposited, dict(t, from_=PUBLISHER, amount=BUDGET, held=BUDGET)),
    )
    log.tx(
        (b.ClientJoined, dict(t, client=CLIENT, client_index=0, data_commitment=b"\x03" * 32, deposit=10**16)),
        (b.Deposited, dict(t, from_=CLIENT, amount=10**16, held=BUDGET + 10**16)),
    )
    log.tx(
        (b.TaskCancelled, dict(t, refund=BUDGET)),
        (b.Credited, dict(t, to=PUBLISHER, amount=BUDGET, reason=reason("BUDGET_REFUND"))),
    )
    # Cancelled before the aggregator bonded: settlement returns the deposit and releases no bond.
    log.tx(
        (b.ClientSettled, dict(t, client_index=0, earned=0, bonus=0, deposit_returned=10**16)),
        (b.Credited, dict(t, to=CLIENT, amount=10**16, reason=reason("DEPOSIT_RETURN"))),
    )

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


def abandoned_task(
    *, abandoned_at: int = 1000 + 400 + ABANDON_GRACE + 1, refund: int = BUDGET, finished_at: int = 1400
) -> list[Any]:
    """The module docstring's task up to the fog's commit of round 1; the aggregator never posts and a stranger
    abandons the task after the round's deadline (t = 1400) plus the grace (no money moves; the rounds left count
    as neutral rounds posted at their deadlines: the task finishes at t = 1400); then the task settles (the client's
    deposit, no bonus: it was scored in no round, the budget to the publisher as ``refund``, the silent aggregator's
    bond to the sink) and the job."""
    t = {"task_id": 1}
    log = started_task(BUDGET)
    log.tx(
        (b.TaskAbandoned, dict(t, round=1, abandoned_at=abandoned_at, finished_at=finished_at)),
    )
    settle(log, earned=0, bonus=0, deposit_returned=10**16, refund=refund, bond_forfeited=True)
    return log.events


def test_an_abandoned_task_refunds_the_budget_returns_the_deposits_forfeits_the_bond_and_passes() -> None:
    events = abandoned_task()

    report = audit_task(1, events)

    assert report.passed, [f.message for c in report.checks for f in c.findings]
    task = report.history.task
    assert (task.status, task.abandoned_at, task.finished_at, task.last_round) == (
        "Abandoned",
        1000 + 400 + ABANDON_GRACE + 1,
        1400,
        0,
    )
    assert (task.bonuses, task.refund, task.bond_returned, task.bond_forfeited) == (0, BUDGET, None, BOND)
    assert report.history.to_sink == {"BOND_FORFEIT": BOND}
    client = report.history.clients[0]
    assert (client.earned, client.bonus, client.deposit_returned) == (0, 0, 10**16)
    pool = replay_task(1, events).pool
    assert pool.held == 0 and pool.parts == 0


def test_an_abandoned_task_that_finishes_before_its_neutral_rounds_fails_the_payment_check() -> None:
    events = abandoned_task(finished_at=1399)

    report = audit_task(1, events)

    assert CheckName.PAYMENTS in report.failed_checks
    assert "finish time of the abandoned task's neutral rounds: recomputed 1400, chain has 1399" in [
        f.message for f in report.check(CheckName.PAYMENTS).findings
    ]


def test_a_task_abandoned_within_the_grace_period_fails_the_history_check() -> None:
    events = abandoned_task(abandoned_at=1000 + 400 + ABANDON_GRACE)

    report = audit_task(1, events)

    assert failed(report) == {CheckName.HISTORY.value}


def test_an_abandonment_that_keeps_one_wei_of_the_budget_fails_the_payment_check() -> None:
    events = abandoned_task(refund=BUDGET - 1)

    report = audit_task(1, events)

    assert CheckName.PAYMENTS in report.failed_checks
    assert f"budget refund at settlement: recomputed {BUDGET}, chain has {BUDGET - 1}" in [
        f.message for f in report.check(CheckName.PAYMENTS).findings
    ]


# --------------------------------------------------------------------------- accountable rounds: pending posts,
# finalisation, forfeits to the sink, challenges


def test_a_posted_round_changes_no_reputation_and_pays_nothing_until_it_is_final() -> None:
    log = started_task(BUDGET)
    post_last_round(log, b.Measurement(quality=8 * WAD // 10, round_time=50, accepted=True, committed=True))

    replay = replay_task(1, log.events)

    assert not replay.tally.findings, replay.tally.findings
    history = replay.history
    assert [(p.round, p.posted_at, p.final) for p in history.posted] == [(1, POSTED_AT, False)]
    assert history.rounds == () and (history.task.posted_rounds, history.task.final_rounds) == (1, 0)
    client = history.clients[0]
    assert (client.rounds, client.loss_reputation, client.time_reputation, client.earned) == (0, WAD, WAD, 0)
    assert replay.pool.budget_left == BUDGET and replay.pool.rewards_held == 0
    assert replay.pool.held == replay.pool.parts


def test_a_settlement_while_a_posted_round_is_pending_fails_the_history_check() -> None:
    # The chain settles as if round 1 had never been posted: the post is skipped rather than finalised.
    log = started_task(BUDGET)
    post_last_round(log, b.Measurement(quality=8 * WAD // 10, round_time=50, accepted=True, committed=True))
    settle(log, earned=0, bonus=0, deposit_returned=10**16, refund=BUDGET)

    report = audit_task(1, log.events)

    assert CheckName.HISTORY in report.failed_checks
    assert "client 0 settled while round(s) [1] were pending" in [
        f.message for f in report.check(CheckName.HISTORY).findings
    ]


def removed_client_task(*, forfeit_to: str = SINK, forfeited: int | None = None, sink: bool = True) -> list[Any]:
    """The module docstring's task, but the client's update is posted as rejected: the finalisation scores it
    quality 0 (r_a = 0 < r_a_min 0.1, r_t = 2), removes it, pays nothing and forfeits its deposit (to ``forfeit_to``;
    ``forfeited`` is what RoundFinalized says, the deposit by default). The whole budget goes back to the publisher
    at settlement, the deposit does not go back to the client, and there is no bonus."""
    log = started_task(BUDGET, sink=sink)
    post_last_round(log, b.Measurement(quality=0, round_time=50, accepted=False, committed=True))
    finalize_round(
        log, paid=0, budget_left=BUDGET, removed=((0, 0, 2 * WAD),), forfeited=forfeited, forfeit_to=forfeit_to
    )
    settle(log, earned=0, bonus=0, deposit_returned=0, refund=BUDGET)
    log.tx(
        (b.Withdrawn, {"account": PUBLISHER, "token": ETHER, "to": PUBLISHER, "amount": BUDGET}),
    )
    return log.events


def test_a_client_removed_at_finalisation_forfeits_its_deposit_to_the_sink_and_the_audit_passes() -> None:
    events = removed_client_task()

    report = audit_task(1, events)

    assert report.passed, [f.message for c in report.checks for f in c.findings]
    history = report.history
    assert [(c.status, c.removed_round, c.deposit_returned) for c in history.clients] == [("removed", 1, 0)]
    assert (history.rounds[0].removed, history.rounds[0].forfeited) == ((0,), 10**16)
    assert history.to_sink == {"DEPOSIT_FORFEIT": 10**16}
    assert history.credited_to(PUBLISHER) == {"BUDGET_REFUND": BUDGET}  # no forfeit for the publisher
    assert report.check(CheckName.SINK).status is CheckStatus.PASS


def test_a_forfeited_deposit_credited_to_the_publisher_fails_the_sink_check() -> None:
    events = removed_client_task(forfeit_to=PUBLISHER)

    report = audit_task(1, events)

    assert CheckName.SINK in report.failed_checks
    messages = [f.message for f in report.check(CheckName.SINK).findings]
    assert f"DEPOSIT_FORFEIT of {10**16} wei went to {PUBLISHER}, not to the sink {SINK}" in messages
    assert f"the publisher received forfeits: {[('DEPOSIT_FORFEIT', 10**16)]}" in messages
    assert f"DEPOSIT_FORFEIT credit of {10**16} wei to {SINK} is missing" in [
        f.message for f in report.check(CheckName.PAYMENTS).findings
    ]


def test_a_finalisation_that_keeps_a_removed_clients_deposit_fails_the_payment_check() -> None:
    events = removed_client_task(forfeited=0)

    report = audit_task(1, events)

    assert CheckName.PAYMENTS in report.failed_checks
    assert f"round 1 forfeited deposits: recomputed {10**16}, chain has 0" in [
        f.message for f in report.check(CheckName.PAYMENTS).findings
    ]


def test_without_the_deployments_sink_set_event_the_zero_address_is_assumed_with_a_note() -> None:
    clean, forfeiting = audit_task(1, one_round_task(sink=False)), audit_task(1, removed_client_task(sink=False))

    # Nothing forfeited: the audit passes and says what it assumed.
    assert clean.passed, [f.message for c in clean.checks for f in c.findings]
    assert clean.history.task.sink == ZERO_ADDRESS
    [note] = clean.check(CheckName.SINK).notes
    assert "SinkSet" in note and "zero address" in note
    # A deposit forfeited to an account the deployment never announced as its sink fails the check.
    assert CheckName.SINK in forfeiting.failed_checks
    assert f"DEPOSIT_FORFEIT of {10**16} wei went to {SINK}, not to the sink {ZERO_ADDRESS}" in [
        f.message for f in forfeiting.check(CheckName.SINK).findings
    ]


def challenged_task(*, rejected_before_finalisation: bool) -> list[Any]:
    """The module docstring's task; at t = 1070, within round 1's window, a stranger challenges the client's entry
    (quality 0.9, it says); the committee rejects the challenge (half its bond to the aggregator, half to the sink),
    before or after the round is finalised. The entry stands as posted, so every number is the docstring's."""
    t = {"task_id": 1}
    log = started_task(BUDGET)
    measurement = b.Measurement(quality=8 * WAD // 10, round_time=50, accepted=True, committed=True)
    post_last_round(log, measurement)
    log.tx(
        (
            b.ChallengeOpened,
            dict(
                t,
                challenge_id=1,
                round=1,
                client_index=0,
                kind=b.ChallengeKind.ENTRY,
                challenger=STRANGER,
                accused=AGGREGATOR,
                proposed=measurement._replace(quality=9 * WAD // 10),
                value=0,
                bond=CHALLENGE_BOND,
                verdict_deadline=1070 + VERDICT_WINDOW,
            ),
        ),
        (b.Deposited, dict(t, from_=STRANGER, amount=CHALLENGE_BOND)),
    )
    rejection = (
        (
            b.ChallengeResolved,
            dict(t, challenge_id=1, round=1, client_index=0, status=b.ChallengeStatus.REJECTED, fate=b.Fate.POSTED),
        ),
        (b.Credited, dict(t, to=AGGREGATOR, amount=CHALLENGE_BOND // 2, reason=reason("CHALLENGE_FORFEIT"))),
        (b.Credited, dict(t, to=SINK, amount=CHALLENGE_BOND - CHALLENGE_BOND // 2, reason=reason("CHALLENGE_FORFEIT"))),
    )
    if rejected_before_finalisation:
        log.tx(*rejection)
    finalize_round(log, paid=PAYMENT, budget_left=BUDGET - PAYMENT)
    if not rejected_before_finalisation:
        log.tx(*rejection)
    settle(log, earned=PAYMENT, bonus=BONUS, deposit_returned=10**16, refund=REFUND)
    return log.events


def test_a_challenge_rejected_before_its_round_is_finalised_passes_and_its_bond_goes_to_the_accused_and_the_sink() -> (
    None
):
    events = challenged_task(rejected_before_finalisation=True)

    report = audit_task(1, events)

    assert report.passed, [f.message for c in report.checks for f in c.findings]
    history = report.history
    assert [(c.kind, c.status, c.fate) for c in history.challenges] == [("entry", "rejected", "posted")]
    assert history.rounds[0].fates == ("posted",) and history.clients[0].earned == PAYMENT
    assert history.to_sink == {"CHALLENGE_FORFEIT": CHALLENGE_BOND - CHALLENGE_BOND // 2}
    assert history.credited_to(AGGREGATOR) == {"CHALLENGE_FORFEIT": CHALLENGE_BOND // 2, "BOND_REFUND": BOND}
    assert report.check(CheckName.DISPUTES).status is CheckStatus.PASS


def test_a_round_finalised_while_a_challenge_of_it_is_open_fails_the_disputes_check() -> None:
    events = challenged_task(rejected_before_finalisation=False)

    report = audit_task(1, events)

    assert failed(report) == {CheckName.DISPUTES.value}
    assert [f.message for f in report.check(CheckName.DISPUTES).findings] == [
        "round 1 finalised with 1 challenge(s) open"
    ]


def test_an_entry_is_taken_as_its_final_fate_decides_whatever_order_its_challenges_resolved_in() -> None:
    """Three challenges of the one entry: the first expires (neutral), the third is upheld (0.7), then the second
    (0.9): the correction of the earliest-opened upheld challenge stands (the first challenge opened wins). The
    replay keeps the entry as the contract does (corrected, quality 0.9), not as the last verdict or the expired
    one would have it. Only the disputes' fates are replayed here: the money events of the verdicts are left out."""
    t = {"task_id": 1}
    log = started_task(BUDGET)
    measurement = b.Measurement(quality=8 * WAD // 10, round_time=50, accepted=True, committed=True)
    post_last_round(log, measurement)
    resolved = (
        (1, b.ChallengeStatus.EXPIRED, b.Fate.NEUTRAL),
        (3, b.ChallengeStatus.UPHELD, b.Fate.CORRECTED),
        (2, b.ChallengeStatus.UPHELD, b.Fate.CORRECTED),
    )
    for challenge_id, quality in ((1, 9), (2, 9), (3, 7)):
        log.tx(
            (
                b.ChallengeOpened,
                dict(
                    t,
                    challenge_id=challenge_id,
                    round=1,
                    client_index=0,
                    kind=b.ChallengeKind.ENTRY,
                    challenger=STRANGER,
                    accused=AGGREGATOR,
                    proposed=measurement._replace(quality=quality * WAD // 10),
                    value=0,
                    bond=CHALLENGE_BOND,
                    verdict_deadline=1070 + VERDICT_WINDOW,
                ),
            )
        )
    for challenge_id, status, fate in resolved:
        log.tx(
            (b.ChallengeResolved, dict(t, challenge_id=challenge_id, round=1, client_index=0, status=status, fate=fate))
        )

    history = replay_task(1, log.events).history

    assert [(c.status, c.fate) for c in history.challenges] == [
        ("expired", "neutral"),
        ("upheld", "corrected"),
        ("upheld", "corrected"),
    ]
    [posted] = history.posted
    assert posted.measurements == (measurement,)
    assert posted.effective == (measurement._replace(quality=9 * WAD // 10),)
