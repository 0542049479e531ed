"""The client tests share the fog tests' fixtures (one Anvil, one deployment, real agents)."""

from tests.fog.conftest import agents, chain_node, deployment_file, world  # noqa: F401  (pytest fixtures)
