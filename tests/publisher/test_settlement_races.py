"""Settling is idempotent by nature: an account that loses the race to settle, in the same block, is done, not dead.

On a chain with a block time, a task's client, its aggregator and its fog
nodes all see the task end in the same block and settle in the next one; the
transactions after the first revert. The chain here mines only when the test
says so, so both settlements land in one block for certain.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace

import pytest
from eth_utils import keccak
from web3 import Web3

from fedchain.chain.bindings import ClientSettled, JobStatus, Measurement, RoundFinalized, TaskStatus
from fedchain.chain.merkle import ZERO_ROOT
from fedchain.fl.reputation import WAD
from fedchain.publisher.service import Settlement, cancel_task, settle_task
from fedchain.system.progress import EventLog
from tests.aggregator.conftest import CLIENTS, FOGS, PUBLISHER, TERMS, World
from tests.publisher.test_task_commands import run_cli

#: Seconds to wait for the racing transactions to reach the node's pool.
POOL_TIMEOUT_S = 20.0


@contextmanager
def manual_mining(w3: Web3) -> Iterator[Callable[[int], None]]:
    """Stop automining; yields ``mine(n)``: wait until ``n`` transactions are pending, then mine them in one block."""

    def mine(pending: int) -> None:
        deadline = time.monotonic() + POOL_TIMEOUT_S
        while int(w3.provider.make_request("txpool_status", [])["result"]["pending"], 16) < pending:
            assert time.monotonic() < deadline, f"fewer than {pending} transactions reached the pool"
            time.sleep(0.02)
        w3.provider.make_request("evm_mine", [])

    w3.provider.make_request("evm_setAutomine", [False])
    try:
        yield mine
    finally:
        w3.provider.make_request("evm_setAutomine", [True])


def in_thread(work: Callable[[], Settlement], results: list[object]) -> threading.Thread:
    def run() -> None:
        try:
            results.append(work())
        except Exception as err:  # noqa: BLE001 - the test asserts on it
            results.append(err)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def race_client_and_aggregator(world: World, task_id: int, blocks: int) -> tuple[list[object], int]:
    """Client 0 (its job 0) and the aggregator settle ``task_id`` at once in threads while ``blocks`` blocks are mined
    by hand, two seconds apart; their results (a Settlement or the exception) and the first block mined."""
    client, aggregator = world.session(CLIENTS[0]), world.aggregator
    w3 = world.publisher.w3
    first_block = int(w3.eth.block_number) + 1
    results: list[object] = []
    with manual_mining(w3) as mine:
        threads = [
            in_thread(lambda: settle_task(client, task_id, jobs=[0]), results),
            in_thread(lambda: settle_task(aggregator, task_id), results),
        ]
        for _ in range(blocks):
            mine(2)
        for thread in threads:
            thread.join(timeout=POOL_TIMEOUT_S)
    return results, first_block


def test_a_client_and_the_aggregator_settling_in_the_same_block_both_succeed(world: World) -> None:
    # prepare: a cancelled task with two awarded jobs
    task_id = world.staffed_task({0: [(FOGS[0], 10**12)], 1: [(FOGS[1], 10**12)]}, start=False)
    cancel_task(world.publisher, task_id)
    w3 = world.publisher.w3

    # execute: both settle the clients at once (one block), then both settle their jobs at once (one block)
    results, first_block = race_client_and_aggregator(world, task_id, blocks=2)

    # assert: neither raised; the clients' race really happened (the second settle reverted; the contract skips a
    # job settled first instead of reverting), and everything is settled once
    assert all(isinstance(result, Settlement) for result in results), results
    receipts = [
        w3.eth.get_transaction_receipt(tx["hash"])
        for number in range(first_block, int(w3.eth.block_number) + 1)
        for tx in w3.eth.get_block(number, full_transactions=True)["transactions"]
    ]
    assert [r["status"] for r in receipts] == [1, 0, 1, 1]
    contracts = world.publisher.contracts
    assert contracts.task_registry.state(task_id).status == TaskStatus.CANCELLED
    assert contracts.round_ledger.settled(task_id)
    assert all(contracts.fog_auction.job(task_id, i).status == JobStatus.SETTLED for i in (0, 1))


def post_committed_round(world: World, task_id: int, indices: tuple[int, ...]) -> None:
    """Round 1 of ``task_id`` as its aggregator posts it: each job's fog committed an update, scored quality 1."""
    contracts = world.aggregator.contracts
    for index in indices:
        fog = world.session(FOGS[index])
        fog.contracts.fog_auction.commit_update(
            task_id, index, 1, keccak(text=f"update {task_id} {index}"), keccak(text=f"transcript {task_id} {index}")
        )
    started = contracts.task_registry.state(task_id).round_started_at
    times = contracts.fog_auction.commit_times(task_id, 1, len(indices))
    measurements = [Measurement(WAD, commit - started, True, True) for commit in times]
    contracts.round_ledger.post_round(
        task_id, 1, keccak(text=f"model {task_id}"), 0, ZERO_ROOT, ZERO_ROOT, measurements
    )


def test_a_task_settles_only_once_its_posted_rounds_are_final_and_the_rounds_money_moves_then(
    world: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    # prepare: a one-round task whose round is posted (which finishes it), pending for its challenge window
    task_id = world.staffed_task({0: [(FOGS[0], 10**12)]}, terms=replace(TERMS, rounds=1))
    post_committed_round(world, task_id, (0,))
    contracts = world.publisher.contracts
    nonce = world.publisher.w3.eth.get_transaction_count(world.publisher.address)
    client_account = world.session(CLIENTS[0]).address
    claimable = contracts.treasury.claimable(client_account)

    # execute: settle during the window (the service, then the command), then after it
    early = settle_task(world.publisher, task_id)
    early_status = run_cli(world, PUBLISHER, "task", "settle", "--task", str(task_id), monkeypatch=monkeypatch)
    early_out = capsys.readouterr().out
    sent_early = world.publisher.w3.eth.get_transaction_count(world.publisher.address) - nonce
    scored_while_pending = contracts.round_ledger.client(task_id, 0).rounds
    claimable_while_pending = contracts.treasury.claimable(client_account)
    world.pass_challenge_window(task_id)
    later = run_cli(world, PUBLISHER, "task", "settle", "--task", str(task_id), monkeypatch=monkeypatch)
    later_out = capsys.readouterr().out

    # assert: nothing sent or settled while the round was pending, and it said which round it waits for; after the
    # window the round was finalised (the client scored and paid) and the task settled
    assert early == Settlement(None, (), (1,)) and sent_early == 0
    assert early_status == 0 and f"task {task_id}: round(s) 1 not final yet" in early_out
    assert scored_while_pending == 0 and claimable_while_pending == claimable
    assert later == 0 and f"task {task_id} settled (tx 0x" in later_out and "jobs settled: 0" in later_out
    assert contracts.round_ledger.rounds(task_id) == (1, 1)
    assert contracts.round_ledger.client(task_id, 0).rounds == 1
    log = EventLog(world.publisher)
    log.refresh()
    (final,) = log.of(RoundFinalized, task_id)
    (settled,) = log.of(ClientSettled, task_id)
    assert final.round == 1 and final.paid > 0 and settled.earned == final.paid  # the round's pay, credited once final
    assert settled.deposit_returned == TERMS.client_deposit
    assert (
        contracts.treasury.claimable(client_account)
        == claimable + settled.earned + settled.bonus + settled.deposit_returned
    )
    assert contracts.task_registry.state(task_id).status == TaskStatus.SETTLED


def test_a_client_and_the_aggregator_finalising_the_same_round_in_one_block_both_go_on_to_settle(world: World) -> None:
    # prepare: a finished one-round task whose round's challenge window has just passed
    task_id = world.staffed_task({0: [(FOGS[0], 10**12)], 1: [(FOGS[1], 10**12)]}, terms=replace(TERMS, rounds=1))
    post_committed_round(world, task_id, (0, 1))
    world.pass_challenge_window(task_id)
    w3 = world.publisher.w3

    # execute: both finalise at once (one block), then settle the clients, then the jobs
    results, first_block = race_client_and_aggregator(world, task_id, blocks=3)

    # assert: neither raised; each race really happened; the round is final once and the task settled once
    assert all(isinstance(result, Settlement) and result.pending == () for result in results), results
    receipts = [
        w3.eth.get_transaction_receipt(tx["hash"])
        for number in range(first_block, int(w3.eth.block_number) + 1)
        for tx in w3.eth.get_block(number, full_transactions=True)["transactions"]
    ]
    assert [r["status"] for r in receipts] == [1, 0, 1, 0, 1, 1]
    contracts = world.publisher.contracts
    assert contracts.round_ledger.rounds(task_id) == (1, 1)
    assert contracts.task_registry.state(task_id).status == TaskStatus.SETTLED
    assert all(contracts.fog_auction.job(task_id, i).status == JobStatus.SETTLED for i in (0, 1))
