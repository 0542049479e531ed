"""Treasury: only the modules move money, withdraw pays exactly once, re-entrancy gains nothing."""

from __future__ import annotations

from fedchain.chain import bindings
from fedchain.chain.contract import Contract
from tests.contracts.conftest import CLIENTS, PUBLISHER, SINK, STRANGER, FedChain, TaskParams, data_commitment


def test_only_the_modules_deposit_or_credit(chain: FedChain) -> None:
    stranger = chain.account(STRANGER)
    with chain.reverts(bindings.TreasuryUnauthorized, stranger):
        chain.send("Treasury", "deposit", 1, stranger, 1, by=STRANGER, value=1)
    with chain.reverts(bindings.TreasuryUnauthorized, stranger):
        chain.send("Treasury", "credit", 1, stranger, 1, b"\0" * 32, by=STRANGER)
    with chain.reverts(bindings.TreasuryUnauthorized, stranger):
        chain.send("Treasury", "creditSink", 1, 1, b"\0" * 32, by=STRANGER)


def test_a_module_cannot_pay_out_more_than_the_task_pool_holds(chain: FedChain) -> None:
    # Prepare: a Treasury of its own whose "modules" are the stranger's account, so that it can call credit directly.
    stranger = chain.account(STRANGER)
    artifact = chain.artifacts["Treasury"]
    sink = chain.account(SINK)
    treasury = Contract.deploy(
        chain.transactor(STRANGER), artifact.bytecode, stranger, stranger, stranger, stranger, sink, abi=artifact.abi
    )
    treasury.transact("deposit", 7, stranger, 100, value=100)
    # Execute / assert
    with chain.reverts(bindings.TreasuryPoolExhausted, 7, 101, 100):
        treasury.transact("credit", 7, stranger, 101, b"\0" * 32)
    with chain.reverts(bindings.TreasuryPoolExhausted, 7, 101, 100):
        treasury.transact("creditSink", 7, 101, b"\0" * 32)
    receipt = treasury.transact("creditSink", 7, 40, b"FORFEIT".ljust(32, b"\0"))
    assert receipt.events_of(bindings.Credited)[0].to == sink
    treasury.transact("credit", 7, stranger, 60, b"\0" * 32)
    assert treasury.call("claimable", stranger) == 60 and treasury.call("claimable", sink) == 40
    assert treasury.call("held", 7) == 0


def test_withdraw_pays_the_whole_claimable_balance_once(chain: FedChain) -> None:
    task = chain.create_task(budget=10**18, bond=False)
    chain.send("TaskRegistry", "cancelTask", task, by=PUBLISHER)
    before = chain.balance(PUBLISHER)
    receipt = chain.send("Treasury", "withdraw", by=PUBLISHER)
    assert receipt.events_of(bindings.Withdrawn)[0].amount == 10**18
    assert chain.balance(PUBLISHER) == before + 10**18 - receipt.fee_wei
    assert chain.view("Treasury", "claimable", chain.account(PUBLISHER)) == 0
    with chain.reverts(bindings.TreasuryNothingToWithdraw, chain.account(PUBLISHER)):
        chain.send("Treasury", "withdraw", by=PUBLISHER)
    totals = chain.solvency()
    assert (totals.deposited, totals.withdrawn, totals.held, totals.claimable, totals.balance) == (
        10**18,
        10**18,
        0,
        0,
        0,
    )


def test_a_reentrant_withdrawer_gains_nothing(chain: FedChain) -> None:
    # Prepare: the attacker joins as a client and gets its deposit back as claimable.
    artifact = chain.artifacts["ReentrantWithdrawer"]
    chain.registry.add_abi(artifact.abi)
    attacker = Contract.deploy(
        chain.transactor(STRANGER), artifact.bytecode, chain.addresses["Treasury"], abi=artifact.abi
    )
    task = chain.create_task()
    deposit = TaskParams().client_deposit
    attacker.transact("join", chain.addresses["RoundLedger"], task, data_commitment(1, b"\0" * 32), value=deposit)
    chain.send("TaskRegistry", "cancelTask", task, by=PUBLISHER)
    chain.send("RoundLedger", "settle", task, by=CLIENTS[0])
    assert chain.view("Treasury", "claimable", attacker.address) == deposit
    treasury_before = chain.solvency()
    # Execute: withdraw, re-entering from receive().
    with chain.reverts(bindings.TreasuryTransferFailed, attacker.address, deposit):
        attacker.transact("attack")
    # Assert: nothing moved.
    assert int(chain.w3.eth.get_balance(attacker.address)) == 0
    assert chain.view("Treasury", "claimable", attacker.address) == deposit
    assert chain.solvency() == treasury_before
