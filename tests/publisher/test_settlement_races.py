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

from web3 import Web3

from fedchain.chain.bindings import JobStatus, TaskStatus
from fedchain.publisher.service import Settlement, cancel_task, settle_task
from tests.aggregator.conftest import CLIENTS, FOGS, World

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


def test_a_client_and_the_aggregator_settling_in_the_same_block_both_succeed(world: World) -> None:
    # prepare: a cancelled task with two awarded jobs
    task_id = world.staffed_task({0: [(FOGS[0], 10**12)], 1: [(FOGS[1], 10**12)]}, start=False)
    cancel_task(world.publisher, task_id)
    client, aggregator = world.session(CLIENTS[0]), world.aggregator
    w3 = world.publisher.w3
    first_block = int(w3.eth.block_number) + 1

    # execute: both settle the clients at once (one block), then both settle their jobs at once (one block)
    results: list[object] = []
    with manual_mining(w3) as mine:
        threads = [
            in_thread(lambda: settle_task(client, task_id, jobs=[0]), results),
            in_thread(lambda: settle_task(aggregator, task_id), results),
        ]
        mine(2)
        mine(2)
        for thread in threads:
            thread.join(timeout=POOL_TIMEOUT_S)

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
