"""TaskRegistry: creating, cancelling and starting tasks; the escrowed budget; the deployment's wiring."""

from __future__ import annotations

import dataclasses

from fedchain.chain import bindings
from fedchain.fl.reputation import minimum_aggregator_bond
from tests.contracts.conftest import (
    AGGREGATOR,
    ARBITERS,
    CLIENTS,
    PUBLISHER,
    QUORUM,
    SINK,
    STRANGER,
    VERDICT_WINDOW,
    FedChain,
    TaskParams,
)


def test_deployment_wires_every_contract_to_the_others(chain: FedChain) -> None:
    a = chain.addresses
    assert chain.view("Treasury", "modules") == (a["TaskRegistry"], a["RoundLedger"], a["FogAuction"], a["Disputes"])
    assert chain.view("TaskRegistry", "dependencies") == (a["Treasury"], a["RoundLedger"], a["Disputes"])
    assert chain.view("RoundLedger", "dependencies") == (
        a["TaskRegistry"],
        a["Treasury"],
        a["FogAuction"],
        a["Disputes"],
    )
    assert chain.view("FogAuction", "dependencies") == (
        a["TaskRegistry"],
        a["RoundLedger"],
        a["Treasury"],
        a["Disputes"],
    )
    assert chain.view("Disputes", "dependencies") == (
        a["TaskRegistry"],
        a["RoundLedger"],
        a["FogAuction"],
        a["Treasury"],
        a["ArbiterCommittee"],
    )


def test_the_committee_and_the_sink_are_fixed_at_deployment(chain: FedChain) -> None:
    members = [chain.account(index) for index in ARBITERS]
    assert chain.view("ArbiterCommittee", "members") == members
    assert (chain.view("ArbiterCommittee", "quorum"), chain.view("ArbiterCommittee", "verdictWindow")) == (
        QUORUM,
        VERDICT_WINDOW,
    )
    assert chain.view("Treasury", "sink") == chain.account(SINK)
    # Nothing can change them: no function of either contract writes state.
    for name in ("ArbiterCommittee", "Treasury"):
        writers = {
            f["name"]
            for f in chain.artifacts[name].abi
            if f["type"] == "function" and f["stateMutability"] in ("nonpayable", "payable")
        }
        assert writers <= {"bindToken", "deposit", "usePermit", "credit", "creditSink", "withdraw", "withdrawTo"}, (
            writers
        )


def test_create_task_escrows_the_budget_and_records_every_parameter(chain: FedChain) -> None:
    params = TaskParams(rounds=7, second_price=True)
    # Execute
    receipt = chain.send(
        "TaskRegistry", "createTask", params.as_tuple(), chain.account(AGGREGATOR), by=PUBLISHER, value=5 * 10**17
    )
    # Assert: the event, the stored parameters and state, and the money in the treasury's pool.
    created = receipt.events_of(bindings.TaskCreated)[0]
    assert (created.task_id, created.publisher, created.aggregator, created.budget) == (
        1,
        chain.account(PUBLISHER),
        chain.account(AGGREGATOR),
        5 * 10**17,
    )
    assert tuple(created.params) == params.as_tuple()
    stored = chain.view("TaskRegistry", "params", 1)
    assert stored.rounds == 7 and stored.second_price is True
    state = chain.view("TaskRegistry", "state", 1)
    assert (state.status, state.budget, state.budget_left, state.current_round) == (1, 5 * 10**17, 5 * 10**17, 0)
    assert chain.view("Treasury", "held", 1) == 5 * 10**17
    assert chain.view("TaskRegistry", "taskCount") == 1
    assert chain.view("Disputes", "bonded", 1) is False


def test_create_task_rejects_out_of_range_parameters(chain: FedChain) -> None:
    aggregator = chain.account(AGGREGATOR)
    cases = {
        "rounds": dataclasses.replace(TaskParams(), rounds=0),
        "reputationCap": dataclasses.replace(TaskParams(), reputation_cap=11 * 10**18),
        "maxClients": dataclasses.replace(TaskParams(), max_clients=501),
        "roundDuration": dataclasses.replace(TaskParams(), round_duration=0),
    }
    for field, params in cases.items():
        value = {"rounds": 0, "reputationCap": 11 * 10**18, "maxClients": 501, "roundDuration": 0}[field]
        with chain.reverts(bindings.TaskInvalidParameter, field.encode().ljust(32, b"\0"), value):
            chain.send("TaskRegistry", "createTask", params.as_tuple(), aggregator, by=PUBLISHER, value=1)
    with chain.reverts(bindings.TaskInvalidParameter, b"budget".ljust(32, b"\0"), 0):
        chain.send("TaskRegistry", "createTask", TaskParams().as_tuple(), aggregator, by=PUBLISHER, value=0)
    with chain.reverts(bindings.TaskInvalidAggregator, "0x0000000000000000000000000000000000000000"):
        chain.send("TaskRegistry", "createTask", TaskParams().as_tuple(), "0x" + "00" * 20, by=PUBLISHER, value=1)
    for name, params in (
        ("challengeWindow", dataclasses.replace(TaskParams(), challenge_window=0)),
        ("challengeBond", dataclasses.replace(TaskParams(), challenge_bond=0)),
    ):
        with chain.reverts(bindings.TaskInvalidParameter, name.encode().ljust(32, b"\0"), 0):
            chain.send("TaskRegistry", "createTask", params.as_tuple(), aggregator, by=PUBLISHER, value=1)


def test_the_aggregator_bond_must_cover_what_one_round_can_move(chain: FedChain) -> None:
    # max_clients * d + min(budget, max_clients * psi * cap^3), computed in Python and by the contract.
    aggregator = chain.account(AGGREGATOR)
    params = TaskParams()
    for budget in (
        10**15,
        10**18,
        5 * 10**19,
    ):  # the budget bounds one round's pay (50 clients * 1e18 wei at most), then not
        floor = minimum_aggregator_bond(
            params.max_clients, params.client_deposit, params.psi, params.reputation_cap, budget
        )
        assert chain.view("TaskRegistry", "minimumBond", params.as_tuple(), budget) == floor
        short = dataclasses.replace(params, aggregator_bond=floor - 1)
        with chain.reverts(bindings.TaskBondTooSmall, floor - 1, floor):
            chain.send("TaskRegistry", "createTask", short.as_tuple(), aggregator, by=PUBLISHER, value=budget)
        exact = dataclasses.replace(params, aggregator_bond=floor)
        chain.send("TaskRegistry", "createTask", exact.as_tuple(), aggregator, by=PUBLISHER, value=budget)


def test_a_task_starts_only_with_its_bond_which_anyone_posts_once_and_exactly(chain: FedChain) -> None:
    task = chain.create_task(bond=False)
    chain.join(task, CLIENTS[0])
    with chain.reverts(bindings.TaskNotBonded, task):
        chain.send("TaskRegistry", "startTask", task, by=PUBLISHER)
    bond = TaskParams().aggregator_bond
    with chain.reverts(bindings.DisputeWrongValue, bond - 1, bond):
        chain.send("Disputes", "postBond", task, by=PUBLISHER, value=bond - 1)
    # The publisher may post it on the aggregator's behalf; it gets it back at settlement.
    receipt = chain.send("Disputes", "postBond", task, by=PUBLISHER, value=bond)
    posted = receipt.events_of(bindings.BondPosted)[0]
    assert (posted.task_id, posted.bonder, posted.amount) == (task, chain.account(PUBLISHER), bond)
    assert chain.view("Disputes", "bond", task) == (bond, chain.account(PUBLISHER))
    assert chain.view("Disputes", "heldFor", task) == bond
    with chain.reverts(bindings.DisputeAlreadyBonded, task):
        chain.send("Disputes", "postBond", task, by=AGGREGATOR, value=bond)
    chain.send("TaskRegistry", "startTask", task, by=PUBLISHER)
    with chain.reverts(bindings.TaskUnknown, task + 1):
        chain.send("Disputes", "postBond", task + 1, by=AGGREGATOR, value=bond)
    cancelled = chain.create_task(bond=False)
    chain.send("TaskRegistry", "cancelTask", cancelled, by=PUBLISHER)
    with chain.reverts(bindings.DisputeWrongTaskStatus, cancelled, bindings.TaskStatus.CANCELLED):
        chain.send("Disputes", "postBond", cancelled, by=AGGREGATOR, value=bond)


def test_a_cancelled_task_returns_the_bond_to_whoever_posted_it_at_settlement(chain: FedChain) -> None:
    task = chain.create_task()
    chain.send("TaskRegistry", "cancelTask", task, by=PUBLISHER)
    receipt = chain.send("RoundLedger", "settle", task, by=STRANGER)
    released = receipt.events_of(bindings.BondReleased)[0]
    assert (released.bonder, released.amount) == (chain.account(AGGREGATOR), TaskParams().aggregator_bond)
    assert chain.view("Treasury", "claimable", chain.account(AGGREGATOR)) == TaskParams().aggregator_bond
    assert chain.view("Treasury", "held", task) == 0


def test_cancel_refunds_the_whole_budget_to_the_publisher(chain: FedChain) -> None:
    task = chain.create_task(budget=10**18, bond=False)
    receipt = chain.send("TaskRegistry", "cancelTask", task, by=PUBLISHER)
    assert receipt.events_of(bindings.TaskCancelled)[0].refund == 10**18
    assert chain.view("Treasury", "claimable", chain.account(PUBLISHER)) == 10**18
    assert chain.view("TaskRegistry", "state", task).status == 5
    assert chain.view("Treasury", "held", task) == 0


def test_only_the_publisher_cancels_and_only_before_start(chain: FedChain) -> None:
    task = chain.create_task()
    with chain.reverts(bindings.TaskNotPublisher, task, chain.account(STRANGER)):
        chain.send("TaskRegistry", "cancelTask", task, by=STRANGER)
    chain.join(task, CLIENTS[0])
    chain.send("TaskRegistry", "startTask", task, by=PUBLISHER)
    with chain.reverts(bindings.TaskWrongStatus, task, bindings.TaskStatus.RUNNING, bindings.TaskStatus.OPEN):
        chain.send("TaskRegistry", "cancelTask", task, by=PUBLISHER)


def test_start_needs_a_client_and_the_publisher(chain: FedChain) -> None:
    task = chain.create_task()
    with chain.reverts(bindings.TaskHasNoClients, task):
        chain.send("TaskRegistry", "startTask", task, by=PUBLISHER)
    chain.join(task, CLIENTS[0])
    with chain.reverts(bindings.TaskNotPublisher, task, chain.account(STRANGER)):
        chain.send("TaskRegistry", "startTask", task, by=STRANGER)
    receipt = chain.send("TaskRegistry", "startTask", task, by=PUBLISHER)
    started = receipt.events_of(bindings.TaskStarted)[0]
    state = chain.view("TaskRegistry", "state", task)
    assert (state.status, state.current_round, started.clients) == (2, 1, 1)
    assert state.started_at == state.round_started_at == started.started_at
    assert chain.view("TaskRegistry", "roundDeadline", task) == state.started_at + TaskParams().round_duration


def test_unknown_tasks_are_refused_by_name(chain: FedChain) -> None:
    with chain.reverts(bindings.TaskUnknown, 99):
        chain.view("TaskRegistry", "state", 99)
    with chain.reverts(bindings.TaskUnknown, 99):
        chain.send("TaskRegistry", "startTask", 99, by=PUBLISHER)


def test_only_the_ledger_moves_the_round_clock_and_spends_budget(chain: FedChain) -> None:
    task = chain.create_task()
    with chain.reverts(bindings.TaskNotLedger, chain.account(STRANGER)):
        chain.send("TaskRegistry", "closeRound", task, False, by=STRANGER)
    with chain.reverts(bindings.TaskNotLedger, chain.account(STRANGER)):
        chain.send("TaskRegistry", "spendBudget", task, 1, 1, by=STRANGER)
    with chain.reverts(bindings.TaskNotLedger, chain.account(STRANGER)):
        chain.send("TaskRegistry", "settleBudget", task, 0, by=STRANGER)
