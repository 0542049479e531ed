"""TaskRegistry: creating, cancelling and starting tasks; the escrowed budget; the deployment's wiring."""

from __future__ import annotations

import dataclasses

from fedchain.chain import bindings
from tests.contracts.conftest import AGGREGATOR, CLIENTS, PUBLISHER, STRANGER, FedChain, TaskParams


def test_deployment_wires_every_contract_to_the_others(chain: FedChain) -> None:
    a = chain.addresses
    assert chain.view("Treasury", "modules") == (a["TaskRegistry"], a["RoundLedger"], a["FogAuction"])
    assert chain.view("TaskRegistry", "dependencies") == (a["Treasury"], a["RoundLedger"])
    assert chain.view("RoundLedger", "dependencies") == (a["TaskRegistry"], a["Treasury"], a["FogAuction"])
    assert chain.view("FogAuction", "dependencies") == (a["TaskRegistry"], a["RoundLedger"], a["Treasury"])


def test_create_task_escrows_the_budget_and_records_every_parameter(chain: FedChain) -> None:
    params = TaskParams(rounds=7, second_price=True)
    # Execute
    receipt = chain.send("TaskRegistry", "createTask", params.as_tuple(), chain.account(AGGREGATOR), by=PUBLISHER, value=5 * 10**17)
    # Assert: the event, the stored parameters and state, and the money in the treasury's pool.
    created = receipt.events_of(bindings.TaskCreated)[0]
    assert (created.task_id, created.publisher, created.aggregator, created.budget) == (
        1, chain.account(PUBLISHER), chain.account(AGGREGATOR), 5 * 10**17)
    assert tuple(created.params) == params.as_tuple()
    stored = chain.view("TaskRegistry", "params", 1)
    assert stored.rounds == 7 and stored.second_price is True
    state = chain.view("TaskRegistry", "state", 1)
    assert (state.status, state.budget, state.budget_left, state.current_round) == (1, 5 * 10**17, 5 * 10**17, 0)
    assert chain.view("Treasury", "held", 1) == 5 * 10**17
    assert chain.view("TaskRegistry", "taskCount") == 1


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


def test_cancel_refunds_the_whole_budget_to_the_publisher(chain: FedChain) -> None:
    task = chain.create_task(budget=10**18)
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
        chain.send("TaskRegistry", "closeRound", task, 1, False, by=STRANGER)
    with chain.reverts(bindings.TaskNotLedger, chain.account(STRANGER)):
        chain.send("TaskRegistry", "settleBudget", task, 0, by=STRANGER)
