"""A whole task on a real chain: three clients, four fog nodes, three rounds, a removal, a slash, settlement, withdrawals."""

from __future__ import annotations

from collections import Counter

from fedchain.fl.reputation import WAD, ClientReputation, scale_pro_rata, score_round
from tests.contracts.conftest import AGGREGATOR, CLIENTS, FOGS, PUBLISHER, SINK, STRANGER, FedChain, TaskParams

PARAMS = TaskParams(rounds=3, expected_duration=900)  # T = 300 s
PRICE = 10**14
BUDGET = 10**17


def test_a_task_runs_end_to_end_and_every_wei_is_accounted_for(chain: FedChain) -> None:
    # ---- prepare: publish, join, auctions (client 2's first winner will miss a round; fog 3 is on standby).
    task = chain.create_task(PARAMS, budget=BUDGET)
    clients = CLIENTS[:3]
    for client in clients:
        chain.join(task, client, params=PARAMS)
        chain.open_auction(task, client)
    for index in range(3):
        chain.commit_bid(task, index, FOGS[index], 10**6, PRICE, PARAMS)
    chain.commit_bid(task, 2, FOGS[3], 2000, PRICE // 2, PARAMS)
    chain.advance(PARAMS.bidding_duration + 1)
    for index in range(3):
        chain.reveal_bid(task, index, FOGS[index], 10**6, PRICE)
    chain.reveal_bid(task, 2, FOGS[3], 2000, PRICE // 2)
    chain.advance(PARAMS.reveal_duration + 1)
    for index, client in enumerate(clients):
        chain.close_auction(task, index, client)
    chain.send("TaskRegistry", "startTask", task, by=PUBLISHER)
    paid_to: Counter[int | tuple[str, int]] = Counter()  # wei by fog account, and by ("earned", client index)
    mechanism = PARAMS.mechanism()
    model = [ClientReputation.joined(mechanism) for _ in clients]
    active = [True, True, True]
    budget_left = BUDGET
    # Per round: (quality, seconds after the round start) per client; None: the fog does not commit.
    plan: dict[int, list[tuple[int, int] | None]] = {
        1: [(WAD, 120), (WAD * 9 // 10, 200), (WAD * 11 // 10, 250)],
        2: [(WAD * 12 // 10, 100), (0, 150), None],  # client 1's update is rejected (removed); client 2's fog is late
        3: [(WAD, 310), None, (WAD, 90)],
    }
    for round_, row in plan.items():
        start = chain.view("TaskRegistry", "state", task).round_started_at
        fogs = {0: FOGS[0], 1: FOGS[1], 2: FOGS[2] if round_ < 2 else FOGS[3]}
        commits = sorted(
            (seconds, index) for index, entry in enumerate(row) if entry is not None for seconds in [entry[1]]
        )
        for seconds, index in commits:
            chain.set_next_timestamp(start + seconds)
            chain.commit_update(task, index, fogs[index], round_)
            paid_to[fogs[index]] += PRICE if fogs[index] != FOGS[3] else PRICE // 2
        if round_ == 2:
            chain.advance(start + PARAMS.round_duration + 1 - chain.now())
            chain.send("FogAuction", "reportMissedRound", task, 2, by=CLIENTS[2])
        measurements = []
        scores = []
        for index, entry in enumerate(row):
            if entry is None or not active[index]:
                measurements.append((0, 0, False))
                continue
            quality, seconds = entry
            accepted = quality > 0
            measurements.append((quality, seconds, accepted))
            score = score_round(model[index], mechanism, quality, seconds, accepted)
            scores.append((index, score))
        chain.post_round(task, round_, measurements)
        payments = scale_pro_rata([s.payment for _, s in scores], budget_left)
        for (index, score), payment in zip(scores, payments, strict=True):
            model[index] = score.reputation
            paid_to[("earned", index)] += payment
            active[index] = active[index] and not score.removed
        budget_left -= sum(payments)
        # ---- assert after every round: the chain's reputations equal the model's.
        for index in range(3):
            info = chain.view("RoundLedger", "client", task, index)
            assert (info.loss_reputation, info.time_reputation, info.rounds) == (
                model[index].loss_reputation,
                model[index].time_reputation,
                model[index].rounds,
            )
            assert info.earned == paid_to[("earned", index)]
            assert (info.status == 1) == active[index]

    # ---- settle the clients and every job.
    state = chain.view("TaskRegistry", "state", task)
    chain.send("RoundLedger", "settle", task, by=STRANGER)
    for index in range(3):
        chain.send("FogAuction", "settleJob", task, index, by=STRANGER)
    bonuses = scale_pro_rata(
        [
            m.bonus(mechanism, state.finished_at - state.started_at) if a else 0
            for m, a in zip(model, active, strict=True)
        ],
        budget_left,
    )
    expected = {
        CLIENTS[0]: paid_to[("earned", 0)] + bonuses[0] + PARAMS.client_deposit,
        # Removed after round 2: no bonus, deposit forfeited; its fog earned 2 rounds of the escrow.
        CLIENTS[1]: paid_to[("earned", 1)] + PRICE * PARAMS.rounds - 2 * PRICE,
        CLIENTS[2]: paid_to[("earned", 2)]
        + bonuses[2]
        + PARAMS.client_deposit
        + PARAMS.fog_deposit  # fog 2's slashed deposit
        + PRICE * PARAMS.rounds
        - PRICE
        - PRICE // 2,  # escrow not earned by fog 2 (round 1) or fog 3 (round 3)
        PUBLISHER: BUDGET - sum(paid_to[("earned", i)] for i in range(3)) - sum(bonuses),
        # Client 1's forfeited deposit: to the sink, never to the publisher who appoints the aggregator.
        SINK: PARAMS.client_deposit,
        # Nobody challenged a round: the aggregator's bond comes back whole.
        AGGREGATOR: PARAMS.aggregator_bond,
        FOGS[0]: paid_to[FOGS[0]] + PARAMS.fog_deposit,
        FOGS[1]: paid_to[FOGS[1]] + PARAMS.fog_deposit,
        FOGS[2]: paid_to[FOGS[2]],
        FOGS[3]: paid_to[FOGS[3]] + PARAMS.fog_deposit,
    }
    for account, amount in expected.items():
        assert chain.view("Treasury", "claimable", chain.account(account)) == amount, account
    # ---- everyone withdraws; the treasury ends empty and its books balance to the wei.
    for account in expected:
        chain.send("Treasury", "withdraw", by=account)
    totals = chain.solvency()
    assert (totals.held, totals.claimable, totals.balance) == (0, 0, 0)
    assert (
        totals.deposited
        == totals.withdrawn
        == (
            BUDGET
            + PARAMS.aggregator_bond
            + 3 * PARAMS.client_deposit
            + 4 * PARAMS.fog_deposit
            + 3 * PRICE * PARAMS.rounds
        )
    )
    assert chain.view("TaskRegistry", "state", task).status == 4
