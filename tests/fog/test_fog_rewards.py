"""A fog node of a task whose clients train from their rewards (``train_from: reward``), against a real chain.

The aggregator's part is played by the test (:func:`tests.fog.conftest.post_round`): it posts round 1 with
a reward for the client that differs from the global model, so the update of round 2 tells which of the
two the fog node trained from: it is recomputed here from each with the fog node's own trainer.
"""

from __future__ import annotations

import dataclasses
import logging

import pytest
import torch

from fedchain.agent import record_fields
from fedchain.client import ClientAgent
from fedchain.client.handoff import ExpectedJobData, JobData, fetch_job_data
from fedchain.fl.params import flatten
from fedchain.taskspec import TaskSpec, load_update
from fedchain.transcripts.segments import JobShape, State, reexecute_segment
from fog import FogNode
from tests.aggregator.conftest import SPEC, World
from tests.fog.conftest import Agents, award, post_round

#: A fedave task whose clients train each round from their own reward of the round before.
REWARD_SPEC = dataclasses.replace(SPEC, strategy="fedave", train_from="reward")


def a_reward(spec: TaskSpec, seed: int = 7) -> dict[str, torch.Tensor]:
    """A rewarded model that is not the global model: the initial weights moved by seeded noise."""
    generator = torch.Generator().manual_seed(seed)
    return {name: p + 0.05 * torch.randn(p.shape, generator=generator) for name, p in spec.initial_params().items()}


def reward_task(world: World, agents: Agents) -> tuple[int, ClientAgent, FogNode]:
    """A task of REWARD_SPEC whose client 0's job fog 0 won and trained round 1 of (from the initial model)."""
    task_id = world.create(spec=REWARD_SPEC)
    client, fog = agents.client(0, task_id), agents.fog(0, task_id)
    award(world, (client,), (fog,))
    return task_id, client, fog


def trained_from(spec: TaskSpec, start: dict[str, torch.Tensor], data: JobData, index: int = 0) -> torch.Tensor:
    """The flat update of client ``index``'s round 2 trained from ``start`` on its job data: the whole job as one
    segment, re-executed the reference way (one thread; the fog node trains on its own thread count, so the two
    agree up to float drift)."""
    begin = flatten(start, spec.param_spec())[0]
    steps = range(JobShape.of(spec, len(data), 2).steps)
    return reexecute_segment(spec, State(begin), data, 2, index, steps).params - begin


def distance(a: torch.Tensor, b: torch.Tensor) -> float:
    """||a - b|| / ||b||."""
    return float((a - b).norm() / b.norm())


def job_data(world: World, task_id: int, data_hash: str) -> JobData:
    """Client 0's data as handed off to its fog node."""
    job = world.publisher.contracts.fog_auction.job(task_id, 0)
    expected = ExpectedJobData(task_id, 0, job.data_size, REWARD_SPEC.num_classes, REWARD_SPEC.in_channels)
    return fetch_job_data(world.publisher.store, data_hash, expected)


def committed_update(world: World, task_id: int, client: str) -> torch.Tensor:
    """Client 0's committed update of round 2, flat."""
    job = world.publisher.contracts.fog_auction.job(task_id, 0)
    update = load_update(
        world.publisher.store,
        REWARD_SPEC,
        job.update_hash,
        task_id=task_id,
        round_number=2,
        client_index=0,
        client=client,
        data_size=job.data_size,
    )
    return flatten(update.params, REWARD_SPEC.param_spec())[0]


def test_on_a_task_that_trains_from_rewards_the_fog_trains_round_two_from_the_clients_proven_round_one_reward(
    world: World, agents: Agents, caplog: pytest.LogCaptureFixture
) -> None:
    # prepare: round 1 trained from the initial model and posted with a reward for the client unlike the global model
    task_id, client, fog = reward_task(world, agents)
    reward = a_reward(REWARD_SPEC)
    listed = post_round(world, task_id, 1, {0: reward})

    # execute: the fog node sees the round posted and trains round 2
    with caplog.at_level(logging.INFO, logger="fog.node"):
        fog.step()

    # assert: round 2 committed; its update is the training from the reward, not from the global model
    assert world.publisher.contracts.fog_auction.job(task_id, 0).paid_up_to == 2
    update = committed_update(world, task_id, client.address)
    data = job_data(world, task_id, client.state.data["data_hash"])
    from_reward = trained_from(REWARD_SPEC, reward, data)
    from_global = trained_from(REWARD_SPEC, REWARD_SPEC.initial_params(), data)
    assert distance(update, from_reward) < 0.01 < distance(update, from_global)
    # and the fog node says which reward it trained from: the one the chain's root proves
    assert listed is not None and listed.tree.root == world.publisher.contracts.round_ledger.reward_root(task_id, 1)
    lines = [record_fields(r) for r in caplog.records if r.getMessage().startswith("training from the client's reward")]
    assert [(f["job"], f["round"], f["reward"]) for f in lines] == [(f"{task_id}:0", 2, listed.rewards[0][1])]


def test_a_fog_refuses_a_reward_that_the_root_on_chain_does_not_prove_and_trains_nothing_from_it(
    world: World, agents: Agents, caplog: pytest.LogCaptureFixture
) -> None:
    # prepare: round 1 posted with a root that the stored reward list does not build (a wrong or altered list)
    task_id, _, fog = reward_task(world, agents)
    post_round(world, task_id, 1, {0: a_reward(REWARD_SPEC)}, rewards_root=b"\x01" * 32)

    # execute: the fog node polls twice
    with caplog.at_level(logging.INFO, logger="fog.node"):
        fog.step()
        fog.step()

    # assert: nothing committed for round 2; one error names the job, the round and why, with what to do
    assert world.publisher.contracts.fog_auction.job(task_id, 0).paid_up_to == 1
    refused = [r for r in caplog.records if r.getMessage().startswith("reward refused")]
    assert len(refused) == 1 and refused[0].levelno == logging.ERROR
    fields = record_fields(refused[0])
    assert (fields["job"], fields["round"]) == (f"{task_id}:0", 2)
    assert "builds root" in fields["error"] and "audit" in fields["hint"]
    assert not any(r.getMessage().startswith("training from the client's reward") for r in caplog.records)
    assert fog.jobs[f"{task_id}:0"].refused_rewards == {"2": fields["error"]}
