"""The publisher's tests run on the aggregator tests' deployment fixtures (an Anvil of their own, every participant's key)."""

from tests.aggregator.conftest import chain_node, deployment_file, world  # noqa: F401  (pytest fixtures)
