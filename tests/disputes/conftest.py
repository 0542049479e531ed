"""Dispute fixtures: real MNIST."""

from __future__ import annotations

from tests.data.conftest import data_root, dataset_cache, mnist_test  # noqa: F401  (fixtures)
