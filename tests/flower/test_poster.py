"""RoundPoster on a real chain: posts once per (task, round), in order, beside the caller, with whether and when
each client delivered as the chain has it (the clients' own commits); waits for the deadline while a client may
still commit; stops when the task ends."""

from __future__ import annotations

import dataclasses
import time

import pytest

from fedchain.chain.bindings import Measurement, RoundPosted, TaskStatus
from fedchain.chain.events import task_events
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
    """A started self-trained task with two joined clients."""
    task = world.create(SELF_TRAINED, SPEC)
    for client in CLIENTS[:2]:
        FedChainClient(world.session(client), task).join(64)
    post_bond(world.aggregator, task)
    start_task(world.publisher, task)
    return task


def commit(world: World, task: int, client: int, round_number: int) -> int:
    """``CLIENTS[client]`` commits an update of ``round_number``; returns the commit's block time."""
    ledger = world.session(CLIENTS[client]).contracts.round_ledger
    ledger.commit_own_update(task, round_number, bytes([client + 1]) * 32)
    return int(ledger.own_commit(task, round_number, client)[1])


def scored(committed: tuple[bool, bool]) -> tuple[Measurement, ...]:
    """What the strategy scored: each client it saw committed was accepted (round times are the poster's)."""
    return tuple(Measurement(WAD, 0, True, True) if c else Measurement(0, 0, False, False) for c in committed)


def posted(world: World, task: int) -> dict[int, tuple[Measurement, ...]]:
    ledger = world.publisher.contracts.round_ledger.address
    events = task_events(world.publisher.w3, ledger, RoundPosted, task, from_block=0)
    return {e.round: tuple(Measurement(*m) for m in e.measurements) for e in events}


def wait_until(condition: object, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_rounds_are_posted_once_each_in_order_with_the_chains_commits_and_the_end_stops_the_rest(world: World) -> None:
    # Prepare: client 1 committed round 1 after the strategy looked (it scored it as missing), and never round 2;
    # client 0 committed rounds 1 and 2 (round 2 ahead of the chain, once round 1 was whole: its time counts from
    # then).
    task = started(world)
    started_at = world.publisher.contracts.task_registry.state(task).round_started_at
    first = commit(world, task, 0, 1)
    late = commit(world, task, 1, 1)
    ahead = commit(world, task, 0, 2)
    poster = RoundPoster(world.aggregator, task, finalize_every_s=0.2)
    # Execute
    poster.submit(1, MODEL, 0.5, scored((True, False)))
    wait_until(lambda: 1 in poster.posted)
    world.advance(SELF_TRAINED.round_duration + 1)  # round 2's deadline passes without client 1's commit
    poster.submit(2, MODEL, 0.6, scored((True, False)))
    poster.submit(3, MODEL, 0.7, scored((True, True)))  # the task has 2 rounds: dropped, not a failure
    poster.close()
    # Assert: the late commit is posted committed and unaccepted, the early one with its time from round 1's last commit
    rounds = posted(world, task)
    assert rounds[1] == (
        Measurement(WAD, first - started_at, True, True),
        Measurement(0, late - started_at, False, True),
    )
    assert rounds[2] == (Measurement(WAD, ahead - late, True, True), Measurement(0, 0, False, False))
    assert sorted(poster.posted) == [1, 2] and all(poster.posted.values()) and poster.task_over
    assert world.publisher.contracts.task_registry.state(task).status == TaskStatus.FINISHED
    # A second poster (a restarted server) finds the rounds on chain and sends nothing.
    again = RoundPoster(world.aggregator, task)
    again.submit(2, MODEL, 0.6, scored((True, False)))
    again.close()
    assert again.posted == {2: None} and not again.gas


def test_a_client_that_did_not_commit_holds_the_post_until_the_deadline(world: World) -> None:
    task = started(world)
    commit(world, task, 0, 1)
    poster = RoundPoster(world.aggregator, task, finalize_every_s=0.2)
    poster.submit(1, MODEL, 0.5, scored((True, True)))  # the strategy saw a reply whose commit never came
    time.sleep(1.5)
    assert world.publisher.contracts.round_ledger.rounds(task)[0] == 0  # client 1 may still commit
    world.advance(SELF_TRAINED.round_duration + 1)
    wait_until(lambda: 1 in poster.posted)
    assert posted(world, task)[1][1] == Measurement(0, 0, False, False)
    poster.close()


def test_a_post_the_chain_refuses_is_raised_at_close_and_stops_the_later_rounds(world: World) -> None:
    task = started(world)
    commit(world, task, 0, 1)
    commit(world, task, 1, 1)
    poster = RoundPoster(world.session(CLIENTS[5]), task)  # not the task's aggregator: LedgerNotAggregator
    poster.submit(1, MODEL, 0.5, scored((True, True)))
    poster.submit(2, MODEL, 0.5, scored((True, True)))
    with pytest.raises(AgentError, match="was not posted"):
        poster.close()
    assert poster.posted == {}
    with pytest.raises(AgentError, match="could not be posted"):
        poster.submit(3, MODEL, 0.5, scored((True, True)))
