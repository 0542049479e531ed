"""The DataHandoff contract on a real chain: only the job's client, only an awarded job, one non-zero hash, once."""

from __future__ import annotations

import pytest
from eth_utils import keccak

from fedchain.chain import bindings as b
from tests.aggregator.conftest import CLIENTS, FOGS, TERMS, World

DATA = keccak(text="job data")


def awarded_job(world: World) -> int:
    """A task whose client 0 (account CLIENTS[0]) auctioned its job to fog FOGS[0]; the job is awarded."""
    task_id = world.create()
    world.join_and_auction(task_id, CLIENTS[0], 64)
    world.bid(task_id, 0, FOGS[0], 10**9, 10**12)
    world.advance(TERMS.bidding_duration + 1)
    world.reveal(task_id, 0, FOGS[0], 10**9, 10**12)
    world.advance(TERMS.reveal_duration + 1)
    world.close(task_id, 0, CLIENTS[0])
    return task_id


def test_the_client_commits_its_data_hash_once_and_everyone_reads_it(world: World) -> None:
    task_id = awarded_job(world)
    handoff = world.session(CLIENTS[0]).contracts.data_handoff

    receipt = handoff.commit_data(task_id, 0, DATA)

    (event,) = receipt.events_of(b.DataCommitted)
    assert (event.task_id, event.client_index, event.data_hash) == (task_id, 0, DATA)
    assert world.publisher.contracts.data_handoff.data_hash(task_id, 0) == DATA
    with pytest.raises(b.HandoffAlreadyCommitted) as refused:
        handoff.commit_data(task_id, 0, keccak(text="other data"))
    assert refused.value.values == (task_id, 0, DATA)


def test_nobody_but_the_jobs_client_commits_its_data(world: World) -> None:
    task_id = awarded_job(world)
    fog = world.session(FOGS[0])

    with pytest.raises(b.HandoffNotClient) as refused:
        fog.contracts.data_handoff.commit_data(task_id, 0, DATA)

    assert refused.value.values == (task_id, 0, fog.address)


def test_data_cannot_be_committed_before_the_job_is_awarded(world: World) -> None:
    task_id = world.create()
    world.join_and_auction(task_id, CLIENTS[0], 64)

    with pytest.raises(b.HandoffJobNotAwarded) as refused:
        world.session(CLIENTS[0]).contracts.data_handoff.commit_data(task_id, 0, DATA)

    assert refused.value.values == (task_id, 0, b.JobStatus.BIDDING)
    assert "status=JobStatus.BIDDING" in str(refused.value)  # named, not a bare number


def test_the_zero_hash_is_refused(world: World) -> None:
    task_id = awarded_job(world)

    with pytest.raises(b.HandoffZeroHash):
        world.session(CLIENTS[0]).contracts.data_handoff.commit_data(task_id, 0, bytes(32))

    assert world.publisher.contracts.data_handoff.data_hash(task_id, 0) == bytes(32)
