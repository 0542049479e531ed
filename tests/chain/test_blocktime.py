"""The block clock: the interval estimated from block timestamps (by hand), and measured on real Anvil nodes."""

from __future__ import annotations

import time

import pytest
from web3 import Web3

from fedchain.chain.blocktime import (
    BlockInterval,
    block_interval,
    estimate_interval,
    expected_next_block_time,
    next_block_time,
)
from fedchain.chain.node import AnvilNode, AnvilSettings

T0 = 1_700_000_000


def test_the_interval_is_the_median_gap_so_a_missed_slot_does_not_move_it() -> None:
    slots = [T0, T0 + 12, T0 + 24, T0 + 48, T0 + 60, T0 + 72]  # the slot at T0 + 36 was missed

    assert estimate_interval(slots) == BlockInterval(seconds=12.0, on_demand=False, gaps=5)


def test_blocks_faster_than_the_timestamps_second_are_counted_by_their_mean() -> None:
    quarter_seconds = [T0, T0, T0, T0, T0 + 1, T0 + 1, T0 + 1, T0 + 1, T0 + 2]  # four blocks a second

    interval = estimate_interval(quarter_seconds)

    assert (interval.seconds, interval.on_demand) == (0.25, False)


def test_a_gap_far_longer_than_the_typical_one_marks_blocks_made_on_demand() -> None:
    automined = [T0, T0, T0 + 1, T0 + 1, T0 + 40, T0 + 40, T0 + 41]  # a burst of transactions, a pause, a burst

    assert estimate_interval(automined).on_demand
    assert not estimate_interval(
        [T0, T0 + 2, T0 + 4, T0 + 6, T0 + 16]
    ).on_demand  # 10 s = 5 gaps of 2 s: a stall, not a pause


def test_what_the_node_says_of_itself_wins_over_the_gaps() -> None:
    regular = [T0, T0 + 1, T0 + 2, T0 + 3]

    assert estimate_interval(regular, automine=True).on_demand
    assert not estimate_interval([T0, T0 + 1, T0 + 90], automine=False).on_demand


def test_a_chain_of_one_block_has_no_interval_and_counts_as_on_demand_unless_the_node_says_otherwise() -> None:
    assert estimate_interval([T0]) == BlockInterval(0.0, True, 0)
    assert estimate_interval([T0], automine=False) == BlockInterval(0.0, False, 0)


def test_the_next_block_comes_one_interval_after_the_latest_on_a_clock_and_at_the_time_now_on_demand() -> None:
    clock, on_demand = BlockInterval(12.0, False, 19), BlockInterval(0.0, True, 19)

    assert expected_next_block_time(T0, clock, now=T0 + 500) == T0 + 12  # the chain's clock, not this machine's
    assert expected_next_block_time(T0, on_demand, now=T0 + 500.7) == T0 + 500
    assert expected_next_block_time(T0, on_demand, now=T0 - 3) == T0  # never before the latest block


def wait_for_block(w3: Web3, number: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while w3.eth.block_number < number:
        assert time.monotonic() < deadline, f"no block {number} within {timeout_s} s"
        time.sleep(0.2)


def test_on_anvil_with_a_1_s_block_time_the_interval_is_1_s_even_with_fewer_blocks_than_the_sample() -> None:
    with AnvilNode(AnvilSettings(block_time=1, accounts=1)) as node:
        w3 = node.web3()
        wait_for_block(w3, 4)

        interval = block_interval(w3, sample=50)
        latest = w3.eth.get_block("latest")

        assert (interval.seconds, interval.on_demand) == (1.0, False)
        assert 4 <= interval.gaps < 50
        assert next_block_time(w3, interval) == latest["timestamp"] + 1 or w3.eth.block_number > latest["number"]


def test_on_an_automining_anvil_blocks_come_on_demand_at_the_time_now(w3: Web3) -> None:
    w3.provider.make_request("evm_mine", [])  # at least two blocks, whatever ran before

    interval = block_interval(w3)
    before = int(time.time())

    assert interval.on_demand
    # No earlier than now, to the second: Anvil stamps its pending block with its own clock in whole seconds, read a
    # moment apart from ours (once in CI a second behind).
    assert next_block_time(w3, interval) >= before - 1


def test_a_sample_without_a_gap_is_refused(w3: Web3) -> None:
    with pytest.raises(ValueError, match="at least 2"):
        block_interval(w3, sample=1)
