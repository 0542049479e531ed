"""The commitment book an agent keeps of a task's reward roots: recorded from events, forgotten after a reorg."""

from __future__ import annotations

import json

from fedchain.chain.bindings import RewardsCommitted
from fedchain.rewards import Commitment, CommitmentBook


def committed(task_id: int, round_number: int, block: int) -> RewardsCommitted:
    return RewardsCommitted(
        block_number=block,
        log_index=0,
        transaction_hash="0x" + "ab" * 32,
        address="0x" + "00" * 20,
        task_id=task_id,
        round=round_number,
        rewards_root=bytes([round_number]) * 32,
        reward_list=bytes([block]) * 32,
    )


def test_the_book_keeps_its_tasks_commitments_by_round_in_json_and_rebuilds_them() -> None:
    # prepare
    table: dict = {}
    book = CommitmentBook(7, table)

    # execute: rounds out of order, another task's event, a state saved and loaded as JSON
    for event in (committed(7, 2, 20), committed(8, 1, 15), committed(7, 1, 10)):
        book.record(event)
    again = CommitmentBook(7, json.loads(json.dumps(table)))

    # assert: only task 7's, by round, as the events said
    assert [c.round for c in again.commitments()] == [1, 2]
    assert again.get(2) == Commitment(7, 2, bytes([2]) * 32, bytes([20]) * 32, 20)
    assert again.get(3) is None


def test_the_book_forgets_the_commitments_of_blocks_after_the_common_ancestor() -> None:
    # prepare
    book = CommitmentBook(7, {})
    for event in (committed(7, 1, 10), committed(7, 2, 20), committed(7, 3, 30)):
        book.record(event)

    # execute
    gone = book.forget_after(20)

    # assert: round 3 (block 30) is gone; round 2, mined in the ancestor itself, stays
    assert gone == [3]
    assert [c.round for c in book.commitments()] == [1, 2]
    assert book.forget_after(25) == []
