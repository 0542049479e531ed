"""Re-executing a job: the reference execution every judge shares, and the fog node's CPU engines match it."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import pytest
import torch

from fedchain.client.handoff import JobData, JobDataMeta
from fedchain.data import ImageDataset
from fedchain.disputes.reexecution import REFERENCE_THREADS, reexecute, update_distance
from fedchain.fl.params import flatten
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
