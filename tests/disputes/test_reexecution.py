"""Re-executing a job: the reference execution every judge shares, and the fog node's CPU engines match it."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import pytest
import torch

from fedchain.client.handoff import JobData, JobDataMeta
from fedchain.data import ImageDataset
from fedchain.data.faults import disguised_free_ride
from fedchain.disputes.reexecution import REFERENCE_THREADS, reexecute, trained_as_committed, update_distance
from fedchain.fl.params import flatten, unflatten
from fedchain.taskspec import TaskSpec
from fedchain.trainer.trainer import Trainer

#: The README rehearsal's training: the CNN at lr 0.1, batches of 10.
SPEC = TaskSpec(dataset="mnist", model="cnn", lr=0.1, batch_size=10)


@pytest.fixture
def two_threads() -> Iterator[None]:
    """The caller runs two torch threads (a judge on a multi-core machine)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(previous)


def skewed_job(mnist_test: ImageDataset) -> JobData:
    """200 samples of two classes, mostly one: the kind of job whose training drifts most between thread counts."""
    ones = (mnist_test.labels == 1).nonzero().flatten()[:170]
    sevens = (mnist_test.labels == 7).nonzero().flatten()[:30]
    index = torch.cat([ones, sevens])
    meta = JobDataMeta(task_id=1, client_index=0, dataset="mnist")
    return JobData(mnist_test.images[index], mnist_test.labels[index], meta, hashlib.sha256(b"skewed").digest())


def test_a_reexecution_is_the_reference_whatever_threads_its_caller_runs(
    mnist_test: ImageDataset, two_threads: None
) -> None:
    job = skewed_job(mnist_test)
    start = SPEC.initial_params()

    judged = reexecute(SPEC, start, job, 1, 0)
    with Trainer(SPEC.model_spec(), engine="sequential", threads=REFERENCE_THREADS) as trainer:
        begin = flatten(start, SPEC.param_spec())[0]
        result = trainer.train(begin, [(job.images, job.labels)], client_ids=[0], config=SPEC.train_config(1))
        reference = result.updates(begin.unsqueeze(0)).cpu()[0]

    assert torch.equal(judged, reference)
    assert torch.get_num_threads() == 2  # the caller's count is restored


@pytest.mark.slow
def test_a_fog_node_training_on_worker_processes_commits_the_reexecution_bit_for_bit(
    mnist_test: ImageDataset, two_threads: None
) -> None:
    job = skewed_job(mnist_test)
    start = SPEC.initial_params()
    begin = flatten(start, SPEC.param_spec())[0]

    with Trainer(SPEC.model_spec(), engine="process") as fog:
        committed = fog.train(begin, [(job.images, job.labels)], client_ids=[0], config=SPEC.train_config(1))
    update = committed.updates(begin.unsqueeze(0)).cpu()[0]

    assert update_distance(update, reexecute(SPEC, start, job, 1, 0)) == 0.0


def balanced_job(mnist_test: ImageDataset, first: int, client_index: int) -> JobData:
    """200 consecutive test samples from ``first`` (every class)."""
    index = torch.arange(first, first + 200)
    meta = JobDataMeta(task_id=1, client_index=client_index, dataset="mnist")
    digest = hashlib.sha256(f"balanced {first}".encode()).digest()
    return JobData(mnist_test.images[index], mnist_test.labels[index], meta, digest)


@pytest.mark.parametrize("noise", [0.0, 0.5, 2.0])
def test_a_fog_node_that_resends_the_last_global_step_is_convicted_by_reexecution(
    mnist_test: ImageDataset, noise: float
) -> None:
    """The disguised free rider as a fog node (`fog run --lazy disguised`): what every client sees, no training."""
    job = balanced_job(mnist_test, 0, 0)
    start = SPEC.initial_params()
    param_spec = SPEC.param_spec()
    # round 1's global step: another client's honest update; round 2 starts from the model it moved
    step = reexecute(SPEC, start, balanced_job(mnist_test, 200, 1), 1, 1)
    moved = unflatten(flatten(start, param_spec)[0] + step, param_spec)
    honest = reexecute(SPEC, moved, job, 2, 0)

    rider = disguised_free_ride(step, noise=noise, generator=torch.Generator().manual_seed(0))

    assert trained_as_committed(update_distance(reexecute(SPEC, moved, job, 2, 0), honest))
    assert not trained_as_committed(update_distance(rider, honest))
