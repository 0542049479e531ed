"""Fog and client tests run on the aggregator tests' fixtures: an Anvil of their own, a deployment, every participant's key.

``agents`` builds real fog nodes and clients over that deployment, each with
its own key and state file, to be stepped by the test like their loops would.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fedchain.client import ClientAgent, ClientConfig
from fedchain.data.partition import PartitionConfig
from fog import CostModel, FogConfig, FogNode
from tests.aggregator.conftest import CLIENTS, FOGS, TERMS, World, chain_node, deployment_file, world  # noqa: F401

#: Samples per client: small, so that a round trains in a fraction of a second.
SAMPLES = 48


class Agents:
    """Fog nodes and clients of the test's world, their state files under one folder."""

    def __init__(self, world: World, folder: Path) -> None:
        self.world = world
        self.folder = folder

    def fog(self, number: int, task_id: int, **options: object) -> FogNode:
        """Fog node ``number`` (account FOGS[number]) that watches only ``task_id``."""
        defaults: dict[str, object] = {
            "name": f"fog-{number}", "state_path": self.folder / f"fog-{number}.json", "tasks": (task_id,),
            "cost": CostModel(frequency=10**9 * (number + 1), alpha=1e-13, margin=0.25), "engine": "sequential",
            "threads": 1,
        }
        return FogNode(self.world.session(FOGS[number]), FogConfig(**{**defaults, **options}))  # type: ignore[arg-type]

    def client(self, number: int, task_id: int, **options: object) -> ClientAgent:
        """Client ``number`` (account CLIENTS[number]) holding part ``number`` of an IID split of MNIST."""
        defaults: dict[str, object] = {
            "task_id": task_id, "name": f"client-{number}", "state_path": self.folder / f"client-{number}.json",
            "partition": PartitionConfig(n_clients=50, seed=1), "partition_index": number, "max_samples": SAMPLES,
        }
        return ClientAgent(self.world.session(CLIENTS[number]), ClientConfig(**{**defaults, **options}))  # type: ignore[arg-type]


@pytest.fixture
def agents(world: World, tmp_path: Path) -> Agents:
    return Agents(world, tmp_path / "agents")
