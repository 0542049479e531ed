"""The aggregator's bond: who posts it, once, and a task that cannot start without it (a real Anvil)."""

from __future__ import annotations

import pytest

from fedchain.chain.bindings import BondPosted, BondReleased, TaskNotBonded, TaskStatus
from fedchain.publisher import PublishConfig, create_task, start_task
from fedchain.publisher.service import cancel_task, post_bond, settle_task
from fedchain.system.progress import EventLog
from tests.aggregator.conftest import CLIENTS, FOGS, PUBLISHER, SPEC, TERMS, World
from tests.publisher.test_task_commands import create_with_cli, run_cli


def bond_events(world: World, task_id: int) -> list[BondPosted]:
    log = EventLog(world.publisher)
    log.refresh()
    return log.of(BondPosted, task_id)


def test_post_bond_escrows_the_tasks_bond_once_and_a_second_call_sends_nothing(world: World) -> None:
    # prepare: a task whose aggregator is another account and who has not posted its bond yet
    task_id = world.create()
    contracts = world.publisher.contracts
    bond = contracts.task_registry.params(task_id).aggregator_bond
    held = contracts.treasury.held(task_id)
    unbonded = contracts.disputes.bonded(task_id)

    # execute: the aggregator posts it, then again; then the publisher tries too
    first = post_bond(world.aggregator, task_id)
    nonces = {s.address: s.w3.eth.get_transaction_count(s.address) for s in (world.aggregator, world.publisher)}
    again = post_bond(world.aggregator, task_id)
    by_publisher = post_bond(world.publisher, task_id)

    # assert: one escrow of exactly the task's bond, by the aggregator; the later calls sent no transaction
    assert not unbonded and first is not None
    assert again is None and by_publisher is None
    assert {s.address: s.w3.eth.get_transaction_count(s.address) for s in (world.aggregator, world.publisher)} == nonces
    assert contracts.disputes.bonded(task_id)
    assert contracts.disputes.bond(task_id) == (bond, world.aggregator.address)
    assert contracts.treasury.held(task_id) == held + bond
    assert [(e.bonder, e.amount) for e in bond_events(world, task_id)] == [(world.aggregator.address, bond)]


def test_a_task_whose_aggregator_has_not_bonded_cannot_start(world: World) -> None:
    # prepare: a client with its job awarded, but no bond
    task_id = world.staffed_task({0: [(FOGS[0], 10**12)]}, start=False, bond=False)

    # execute / assert: the contract refuses the start, naming the task; with the bond it starts
    with pytest.raises(TaskNotBonded) as refused:
        start_task(world.publisher, task_id, force=True)  # no data handed off here
    assert refused.value.task_id == task_id
    post_bond(world.aggregator, task_id)
    start_task(world.publisher, task_id, force=True)
    assert world.publisher.contracts.task_registry.state(task_id).status == TaskStatus.RUNNING


def test_a_publisher_that_is_its_own_aggregator_posts_the_bond_when_it_creates_the_task(world: World) -> None:
    created = create_task(world.publisher, PublishConfig(terms=TERMS, spec=SPEC, budget=10**18))

    contracts = world.publisher.contracts
    bond = contracts.task_registry.params(created.task_id).aggregator_bond
    assert contracts.disputes.bond(created.task_id) == (bond, world.publisher.address)
    assert bond == TERMS.minimum_bond(10**18)  # no bond named: the least the contract accepts


def test_a_publisher_funding_the_bond_posts_it_for_another_aggregator_and_gets_it_back_at_settlement(
    world: World,
) -> None:
    # prepare: the publisher funds its aggregator's bond at creation; a client joins; the task is cancelled
    config = PublishConfig(terms=TERMS, spec=SPEC, budget=10**18, aggregator=world.aggregator.address, fund_bond=True)
    task_id = create_task(world.publisher, config).task_id
    contracts = world.publisher.contracts
    bond = contracts.task_registry.params(task_id).aggregator_bond
    bonded_by = contracts.disputes.bond(task_id)
    world.join_and_auction(task_id, CLIENTS[0], data_size=64)
    before = {s.address: contracts.treasury.claimable(s.address) for s in (world.publisher, world.aggregator)}

    # execute
    cancel_task(world.publisher, task_id)
    settlement = settle_task(world.publisher, task_id)

    # assert: posted by the publisher; at settlement the bond and the budget go back to it, nothing to the aggregator
    assert bonded_by == (bond, world.publisher.address) and settlement.pending == ()
    log = EventLog(world.publisher)
    log.refresh()
    assert [(e.bonder, e.amount) for e in log.of(BondReleased, task_id)] == [(world.publisher.address, bond)]
    assert contracts.treasury.claimable(world.publisher.address) == before[world.publisher.address] + 10**18 + bond
    assert contracts.treasury.claimable(world.aggregator.address) == before[world.aggregator.address]
    assert contracts.disputes.bond(task_id)[0] == 0


def test_task_create_with_fund_bond_posts_it_and_task_show_says_whether_it_is_posted(
    world: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    # execute: one task without the flag (another account aggregates: not posted yet), one with it
    waiting = create_with_cli(world, monkeypatch, capsys)
    funded = create_with_cli(world, monkeypatch, capsys, "--fund-bond")
    shown = {}
    for task_id in (waiting, funded):
        assert run_cli(world, PUBLISHER, "task", "show", "--task", str(task_id), monkeypatch=monkeypatch) == 0
        shown[task_id] = " ".join(capsys.readouterr().out.split())

    # assert
    disputes = world.publisher.contracts.disputes
    bond = world.publisher.contracts.task_registry.params(funded).aggregator_bond
    assert not disputes.bonded(waiting)
    assert disputes.bond(funded) == (bond, world.publisher.address)
    assert "not posted yet" in shown[waiting]
    assert f"{bond} wei (posted)" in shown[funded]
