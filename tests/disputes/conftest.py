"""Dispute fixtures: real MNIST, and the fog tests' chain, deployment and agents (tests/fog/conftest.py)."""

from __future__ import annotations

from tests.data.conftest import data_root, dataset_cache, mnist_test  # noqa: F401  (fixtures)
from tests.fog.conftest import agents, chain_node, deployment_file, world  # noqa: F401  (fixtures)
