"""Trainer fixtures: one thread, a shared worker pool, real MNIST."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from fedchain.trainer import WorkerPool
from tests.data.conftest import data_root, dataset_cache, mnist_test  # noqa: F401  (fixtures)


@pytest.fixture(autouse=True, scope="package")
def one_torch_thread() -> Iterator[None]:
    """Train on one thread: on a CPU shared with other jobs, several OpenMP threads are many times slower."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="session")
def pool() -> Iterator[WorkerPool]:
    """Two single-threaded training processes, started once for all trainer tests."""
    with WorkerPool(workers=2) as workers:
        yield workers
