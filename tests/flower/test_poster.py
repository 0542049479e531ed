"""RoundPoster on a real chain: posts once per (task, round), in order, beside the caller; stops when the task ends."""

from __future__ import annotations

import dataclasses

import pytest

from fedchain.chain.bindings import LedgerRoundTimeTooLong, Measurement, TaskStatus
from fedchain.errors import AgentError
from fedchain.fl.reputation import WAD
from fedchain.flower.client import FedChainClient
from fedchain.flower.poster import RoundPoster
from fedchain.publisher import start_task
from fedchain.publisher.service import post_bond
from tests.aggregator.conftest import CLIENTS, SPEC, TERMS, World, chain_node, deployment_file, world

__all__ = ["chain_node", "deployment_file", "world"]  # the aggregator tests' chain and sessions, used here

SELF_TRAINED = dataclasses.replace(TERMS, rounds=2, self_trained=True, challenge_window=5)
MODEL = b"\x0a" * 32


def started(world: World) -> int:
    """A started self-trained task with two joined clients, its round 1 run for 30 s."""
    task = world.create(SELF_TRAINED, SPEC)
    for client in CLIENTS[:2]:
        FedChainClient(world.session(client), task).join(64)
    post_bond(world.aggregator, task)
    start_task(world.publisher, task)
    world.advance(30)
    return task


def entries(round_time: int = 20) -> tuple[Measurement, ...]:
    """Client 0 replied and was accepted; client 1 did not reply."""
    return (Measurement(WAD, round_time, True, True), Measurement(0, 0, False, False))


def test_rounds_are_posted_once_each_in_order_and_the_end_of_the_task_stops_the_rest(world: World) -> None:
    task = started(world)
    poster = RoundPoster(world.aggregator, task, finalize_every_s=0.2)
    poster.submit(1, MODEL, 0.5, entries())
    poster.submit(2, MODEL, 0.6, entries(round_time=10**6))  # longer than the round ran: cut to what it ran
    poster.submit(3, MODEL, 0.7, entries())  # the task has 2 rounds: dropped, not a failure
    poster.close()
    assert sorted(poster.posted) == [1, 2] and all(poster.posted.values())
    assert poster.task_over
    assert world.publisher.contracts.task_registry.state(task).status == TaskStatus.FINISHED
    # A second poster (a restarted server) finds the rounds on chain and sends nothing.
    again = RoundPoster(world.aggregator, task)
    again.submit(2, MODEL, 0.6, entries())
    again.close()
    assert again.posted == {2: None} and not again.gas


def test_a_post_the_chain_refuses_is_raised_at_close_and_stops_the_later_rounds(world: World) -> None:
    task = started(world)
    poster = RoundPoster(world.session(CLIENTS[5]), task)  # not the task's aggregator: LedgerNotAggregator
    poster.submit(1, MODEL, 0.5, entries())
    poster.submit(2, MODEL, 0.5, entries())
    with pytest.raises(AgentError, match="was not posted"):
        poster.close()
    assert poster.posted == {}
    with pytest.raises(AgentError, match="could not be posted"):
        poster.submit(3, MODEL, 0.5, entries())


def test_the_contract_refuses_a_round_time_the_poster_would_have_cut(world: World) -> None:
    task = started(world)
    ledger = world.aggregator.contracts.round_ledger
    with pytest.raises(LedgerRoundTimeTooLong):
        ledger.post_round(task, 1, MODEL, 0, b"\0" * 32, b"\0" * 32, list(entries(round_time=10**6)))
