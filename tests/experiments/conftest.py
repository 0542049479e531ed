"""Shared set-up of the experiment tests."""

from collections.abc import Iterator

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_torch_thread() -> Iterator[None]:
    """Train and evaluate on one thread: on a CPU shared with other jobs, more threads oversubscribe it."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
