"""Fog and client tests run on the aggregator tests' fixtures: an Anvil of their own, a deployment, every participant's key.

``agents`` builds real fog nodes and clients over that deployment, each with
its own key and state file, to be stepped by the test like their loops would.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import torch

from fedchain.chain.bindings import Measurement
from fedchain.chain.merkle import ZERO_ROOT
from fedchain.client import ClientAgent, ClientConfig
from fedchain.data.partition import PartitionConfig
from fedchain.fl.reputation import WAD
from fedchain.publisher import start_task
from fedchain.publisher.service import post_bond
from fedchain.rewards import RewardList, put_rewards
from fedchain.taskspec import load_spec, put_model
from fog import CostModel, FogConfig, FogNode
from tests.aggregator.conftest import CLIENTS, FOGS, TERMS, World, chain_node, deployment_file, world  # noqa: F401

#: Samples per client: small, so that a round trains in a fraction of a second.
SAMPLES = 48


class Agents:
    """Fog nodes and clients of the test's world, their state files under one folder."""

    def __init__(self, world: World, folder: Path) -> None:
        self.world = world
        self.folder = folder

    def fog(self, number: int, task_id: int, **options: Any) -> FogNode:
        """Fog node ``number`` (account FOGS[number]) that watches only ``task_id``."""
        defaults: dict[str, Any] = {
            "name": f"fog-{number}",
            "state_path": self.folder / f"fog-{number}.json",
            "tasks": (task_id,),
            "cost": CostModel(frequency=10**9 * (number + 1), alpha=1e-13, margin=0.25),
            "engine": "sequential",
            "threads": 1,
        }
        return FogNode(self.world.session(FOGS[number]), FogConfig(**{**defaults, **options}))

    def client(self, number: int, task_id: int, **options: Any) -> ClientAgent:
        """Client ``number`` (account CLIENTS[number]) holding part ``number`` of an IID split of MNIST."""
        defaults: dict[str, Any] = {
            "task_id": task_id,
            "name": f"client-{number}",
            "state_path": self.folder / f"client-{number}.json",
            "partition": PartitionConfig(n_clients=50, seed=1),
            "partition_index": number,
            "max_samples": SAMPLES,
        }
        return ClientAgent(self.world.session(CLIENTS[number]), ClientConfig(**{**defaults, **options}))


def award(
    world: World, clients: tuple[ClientAgent, ...], fogs: tuple[FogNode, ...], *, start: bool = True, bond: bool = True
) -> None:
    """Run the clients' auctions among ``fogs`` to the data hand-off, then start the task (unless told not to).

    With ``bond`` the aggregator posts its bond first (as ``fedchain aggregator run`` does while the task is open)."""
    for client in clients:
        client.step()  # join, open the auction
    for node in fogs:
        node.step()  # bid
    world.advance(TERMS.bidding_duration + 1)
    for node in fogs:
        node.step()  # reveal
    world.advance(TERMS.reveal_duration + 1)
    for client in clients:
        client.step()  # close
        client.step()  # hand off the data
    if bond:
        post_bond(world.aggregator, clients[0].task_id)
    if start:
        start_task(world.publisher, clients[0].task_id)
    for node in fogs:
        node.step()  # see the awards and the data (and train round 1 when started)


def post_round(
    world: World,
    task_id: int,
    round_number: int,
    rewards: Mapping[int, dict[str, torch.Tensor]] | None = None,
    *,
    rewards_root: bytes | None = None,
    qualities: Mapping[int, int] | None = None,
    model: dict[str, torch.Tensor] | None = None,
) -> RewardList | None:
    """Post ``round_number`` as the aggregator: ``model`` (by default the initial weights) as the new model, every
    committed client at quality 1 (or at ``qualities[index]``, 1e18 fixed point, accepted: a dishonest post when
    honest scoring says otherwise).

    With ``rewards`` (client index -> rewarded model) it stores them and their list and commits their root, or
    ``rewards_root`` instead when given (a root that the stored list does not build); returns the stored list."""
    session = world.aggregator
    contracts = session.contracts
    spec = load_spec(session.store, contracts.task_registry.params(task_id).dataset_id)
    model_hash = put_model(
        session.store, spec, task_id, round_number, spec.initial_params() if model is None else model
    )
    root = list_hash = ZERO_ROOT
    listed = None
    if rewards is not None:
        accounts = {index: contracts.round_ledger.client(task_id, index).account for index in rewards}
        listed, list_hash = put_rewards(
            session.store, spec, task_id, round_number, {i: (accounts[i], params) for i, params in rewards.items()}
        )
        root = listed.tree.root if rewards_root is None else rewards_root
    started = contracts.task_registry.state(task_id).round_started_at
    measurements = []
    for index in range(contracts.round_ledger.client_count(task_id)):
        job = contracts.fog_auction.job(task_id, index)
        committed = job.paid_up_to == round_number and job.committed_at > 0
        quality = (qualities or {}).get(index, WAD) if committed else 0
        measurements.append(Measurement(quality, job.committed_at - started if committed else 0, committed, committed))
    contracts.round_ledger.post_round(task_id, round_number, model_hash, 0, root, list_hash, measurements)
    return listed


@pytest.fixture
def agents(world: World, tmp_path: Path) -> Agents:
    return Agents(world, tmp_path / "agents")
