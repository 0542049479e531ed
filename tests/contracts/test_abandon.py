"""A running task whose aggregator vanishes: anyone abandons it after the grace period and no wei stays locked.

The silent aggregator pays for it, not the clients: its bond goes to the sink, and the clients are paid as if
every remaining round had been posted neutral at its deadline (eq. 16's bonus of that finish).
"""

from __future__ import annotations

from fedchain.audit import CheckName, CheckStatus
from fedchain.chain import bindings
from fedchain.fl.reputation import ABANDON_GRACE, WAD, ClientReputation, neutral_finish, scale_pro_rata
from tests.contracts.conftest import AGGREGATOR, CLIENTS, FOGS, PUBLISHER, SINK, STRANGER, FedChain, TaskParams

#: T = 500 s a round: the rounds of 100 s earn r_t = 5, and three rounds at their 400 s deadlines still finish
#: before T_ex, so the neutral rounds' bonus is not 0.
PARAMS = TaskParams(rounds=3, expected_duration=1500)
PRICE = 10**14
BUDGET = 10**17
ABANDONED = bindings.TaskStatus.ABANDONED


def _run_one_round_then_vanish(chain: FedChain, *, final: bool = True) -> int:
    """Two clients; round 1 posted (and, with ``final``, finalised); in round 2 only client 0's fog commits and the
    aggregator never posts."""
    task = chain.staffed_task(PARAMS, budget=BUDGET, price=PRICE)
    chain.send("TaskRegistry", "startTask", task, by=PUBLISHER)
    start = chain.view("TaskRegistry", "state", task).round_started_at
    for index in range(2):
        chain.set_next_timestamp(start + 100 + index)
        chain.commit_update(task, index, FOGS[index], 1)
    chain.post_round(task, 1, [(WAD, 100, True), (WAD, 101, True)], final=final)
    chain.commit_update(task, 0, FOGS[0], 2)
    return task


def _abandonable_after(chain: FedChain, task: int) -> int:
    return chain.view("TaskRegistry", "roundDeadline", task) + chain.view("TaskRegistry", "ABANDON_GRACE")


def _advance_to(chain: FedChain, timestamp: int) -> None:
    """Mine a block at ``timestamp``: calls are checked (gas estimation) at the latest block's time."""
    chain.set_next_timestamp(timestamp)
    chain.advance(0)


def test_an_abandoned_task_pays_the_clients_as_for_neutral_rounds_and_sends_the_bond_to_the_sink(
    chain: FedChain,
) -> None:
    # ---- prepare: a task whose aggregator stopped after round 1, past its round 2 deadline plus the grace.
    task = _run_one_round_then_vanish(chain)
    earned = [chain.view("RoundLedger", "client", task, i).earned for i in range(2)]
    before = chain.view("TaskRegistry", "state", task)
    budget_left = before.budget_left
    after = _abandonable_after(chain, task)
    _advance_to(chain, after + 1)

    # ---- execute: a stranger abandons it; anyone settles the clients and the jobs.
    receipt = chain.send("TaskRegistry", "abandonTask", task, by=STRANGER)
    settled = chain.send("RoundLedger", "settle", task, by=STRANGER)
    for index in range(2):
        chain.send("FogAuction", "settleJob", task, index, by=STRANGER)

    # ---- assert: the event, the terminal status, and every account's claim to the wei.
    event = receipt.events_of(bindings.TaskAbandoned)[0]
    mined_at = chain.w3.eth.get_block(receipt.block_number)["timestamp"]
    finish = neutral_finish(before.round_started_at, 2, PARAMS.rounds, PARAMS.round_duration)
    assert (event.task_id, event.round, event.abandoned_at, event.finished_at) == (task, 2, mined_at, finish)
    # The bonus of a task finished when its rounds 2 and 3 would have been posted at their deadlines.
    mechanism = PARAMS.mechanism()
    reputations = [chain.view("RoundLedger", "client", task, i) for i in range(2)]
    raw = [
        ClientReputation(r.rounds, r.sum_quality, r.sum_time_ratio, r.loss_reputation, r.time_reputation).bonus(
            mechanism, finish - before.started_at
        )
        for r in reputations
    ]
    bonuses = scale_pro_rata(raw, budget_left)
    assert all(bonus > 0 for bonus in bonuses)
    refund = settled.events_of(bindings.TaskSettled)[0]
    assert (refund.bonuses, refund.refund) == (sum(bonuses), budget_left - sum(bonuses))
    (forfeited,) = settled.events_of(bindings.BondForfeited)
    assert forfeited.amount == PARAMS.aggregator_bond
    assert mined_at > after
    state = chain.view("TaskRegistry", "state", task)
    assert (state.status, state.budget_left, state.current_round) == (ABANDONED, 0, 2)
    assert chain.view("RoundLedger", "settled", task)
    assert earned[0] > 0 and earned[1] > 0
    expected = {
        # earnings of round 1 + the neutral rounds' bonus + deposit back + escrow of the rounds its fog did not train.
        CLIENTS[0]: earned[0] + bonuses[0] + PARAMS.client_deposit + PRICE * (PARAMS.rounds - 2),
        CLIENTS[1]: earned[1] + bonuses[1] + PARAMS.client_deposit + PRICE * (PARAMS.rounds - 1),
        PUBLISHER: BUDGET - earned[0] - earned[1] - sum(bonuses),
        # the silent aggregator's bond goes to the sink, not back to it
        AGGREGATOR: 0,
        SINK: PARAMS.aggregator_bond,
        # a fog that missed round 2 of an abandoned task is not slashed at settlement.
        FOGS[0]: 2 * PRICE + PARAMS.fog_deposit,
        FOGS[1]: PRICE + PARAMS.fog_deposit,
    }
    for account, amount in expected.items():
        assert chain.view("Treasury", "claimable", chain.account(account)) == amount, account
    assert budget_left == BUDGET - earned[0] - earned[1]
    totals = chain.solvency()
    assert totals.held == 0
    assert totals.claimable == totals.balance == sum(expected.values())


def test_a_silent_aggregator_strands_no_money_even_with_its_last_round_pending(chain: FedChain) -> None:
    # ---- prepare: round 1 posted but not final when the aggregator vanishes; the task is abandoned.
    task = _run_one_round_then_vanish(chain, final=False)
    _advance_to(chain, _abandonable_after(chain, task) + 1)
    chain.send("TaskRegistry", "abandonTask", task, by=STRANGER)

    # ---- execute / assert: settlement waits for round 1; anyone finalises it; then everything settles.
    with chain.reverts(bindings.LedgerRoundsPending, task, 1, 0):
        chain.send("RoundLedger", "settle", task, by=STRANGER)
    with chain.reverts(bindings.AuctionRoundsPending, task, 1, 0):
        chain.send("FogAuction", "settleJob", task, 0, by=STRANGER)
    finalized = chain.finalize(task, 1, by=CLIENTS[0])
    earned = [chain.view("RoundLedger", "client", task, i).earned for i in range(2)]
    assert finalized.events_of(bindings.RoundFinalized)[0].paid == sum(earned) > 0
    chain.send("RoundLedger", "settle", task, by=STRANGER)
    chain.send("FogAuction", "settleJobs", task, [0, 1], by=STRANGER)
    for account in (PUBLISHER, SINK, *CLIENTS[:2], *FOGS[:2]):
        chain.send("Treasury", "withdraw", by=account)
    assert chain.view("Treasury", "held", task) == 0
    totals = chain.solvency()
    assert totals.held == totals.claimable == totals.balance == 0


def test_abandon_reverts_until_the_grace_period_after_the_deadline_has_passed(chain: FedChain) -> None:
    # ---- prepare: the last second of the grace period.
    task = _run_one_round_then_vanish(chain)
    after = _abandonable_after(chain, task)
    _advance_to(chain, after)

    # ---- execute / assert
    with chain.reverts(bindings.TaskAbandonTooEarly, task, after, after):
        chain.send("TaskRegistry", "abandonTask", task, by=STRANGER)


def test_abandon_reverts_for_a_task_that_is_not_running(chain: FedChain) -> None:
    # ---- prepare: an open task, long past any deadline.
    task = chain.staffed_task(PARAMS, budget=BUDGET, price=PRICE)
    chain.advance(PARAMS.round_duration + ABANDON_GRACE + 1)

    # ---- execute / assert: Open (1) is not Running (2); nor is an unknown task.
    with chain.reverts(bindings.TaskWrongStatus, task, bindings.TaskStatus.OPEN, bindings.TaskStatus.RUNNING):
        chain.send("TaskRegistry", "abandonTask", task, by=STRANGER)
    with chain.reverts(bindings.TaskUnknown, task + 1):
        chain.send("TaskRegistry", "abandonTask", task + 1, by=STRANGER)


def test_abandon_reverts_once_the_task_is_abandoned_and_the_aggregator_can_no_longer_post(chain: FedChain) -> None:
    # ---- prepare: an abandoned task.
    task = _run_one_round_then_vanish(chain)
    _advance_to(chain, _abandonable_after(chain, task) + 1)
    chain.send("TaskRegistry", "abandonTask", task, by=STRANGER)

    # ---- execute / assert: a second abandon, the aggregator's late post and a late fog commit all revert.
    with chain.reverts(bindings.TaskWrongStatus, task, ABANDONED, bindings.TaskStatus.RUNNING):
        chain.send("TaskRegistry", "abandonTask", task, by=STRANGER)
    with chain.reverts(bindings.LedgerWrongTaskStatus, task, ABANDONED):
        chain.post_round(task, 2, [(WAD, 100, True), (0, 0, False)])
    with chain.reverts(bindings.AuctionWrongTaskStatus, task, ABANDONED):
        chain.commit_update(task, 1, FOGS[1], 2)


def test_the_python_model_knows_the_contract_grace_period(chain: FedChain) -> None:
    assert chain.view("TaskRegistry", "ABANDON_GRACE") == ABANDON_GRACE


def test_an_abandoned_task_audits_clean_from_the_chain_events_and_views(chain: FedChain) -> None:
    # ---- prepare: abandon, settle everything, everyone withdraws.
    task = _run_one_round_then_vanish(chain)
    _advance_to(chain, _abandonable_after(chain, task) + 1)
    chain.send("TaskRegistry", "abandonTask", task, by=STRANGER)
    chain.send("RoundLedger", "settle", task, by=STRANGER)
    for index in range(2):
        chain.send("FogAuction", "settleJob", task, index, by=STRANGER)
    for account in (PUBLISHER, SINK, *CLIENTS[:2], *FOGS[:2]):
        chain.send("Treasury", "withdraw", by=account)

    # ---- execute
    report = chain.audit(task)

    # ---- assert: every check that applies passes; the history ends Abandoned.
    assert {c.name.value: [f.message for f in c.findings] for c in report.checks if c.failed} == {}
    statuses = {c.name: c.status for c in report.checks}
    assert statuses[CheckName.PAYMENTS] is CheckStatus.PASS and statuses[CheckName.HISTORY] is CheckStatus.PASS
    assert report.history.task.status == "Abandoned"
    assert report.history.to_sink == {"BOND_FORFEIT": PARAMS.aggregator_bond}
