"""Every engine keeps a job's training state every k steps, and a segment trained from one checkpoint reaches the next.

These checkpoints are what a fog node's training transcript is made of (:mod:`fedchain.transcripts`): row 0 is the
start model, the last row the trained one, and :func:`train_segment` is what a dispute re-executes.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from fedchain.errors import ConfigError
from fedchain.models import ModelSpec
from fedchain.trainer import TrainConfig, Trainer, WorkerPool
from fedchain.trainer.config import Engine
from fedchain.trainer.local import (
    Checkpoints,
    checkpoint_count,
    checkpoint_step,
    client_generator,
    flat_state,
    load_flat,
    prepare_model,
    steps_per_client,
    train_segment,
)
from fedchain.trainer.trainer import TrainResult
from tests.trainer.factories import random_clients

LENET = ModelSpec("lenet5")
#: Two epochs with a last partial batch, momentum and weight decay: the velocity is part of the state.
CONFIG = TrainConfig(lr=0.05, momentum=0.9, weight_decay=1e-3, batch_size=16, local_epochs=2, seed=5)
EVERY = 3
#: 40 and 23 samples: 3 and 2 batches an epoch, 6 and 4 steps; checkpoints after steps 0, 3, 6 and 0, 3, 4.
SIZES = [40, 23]


def _clients() -> list[tuple[torch.Tensor, torch.Tensor]]:
    return random_clients(SIZES, (1, 28, 28), 10, seed=2)


def _trained(
    engine: Engine, pool: WorkerPool, config: TrainConfig = CONFIG
) -> tuple[TrainResult, tuple[Checkpoints, ...], torch.Tensor]:
    trainer = Trainer(LENET, config, engine=engine, device="cpu", pool=pool if engine == "process" else None)
    start = trainer.initial_params(seed=1)
    result = trainer.train(start, _clients(), client_ids=[4, 9], checkpoint_every=EVERY)
    assert result.checkpoints is not None
    return result, result.checkpoints, start


def test_checkpoints_are_the_start_every_k_steps_and_the_end() -> None:
    assert [checkpoint_count(s, 3) for s in (1, 3, 4, 6)] == [2, 2, 3, 3]
    assert [checkpoint_step(j, 4, 3) for j in range(3)] == [0, 3, 4]
    with pytest.raises(ConfigError):
        checkpoint_count(6, 0)


@pytest.mark.parametrize("engine", ["sequential", "process"])
def test_the_cpu_engines_keep_the_reference_checkpoints_bit_for_bit(engine: Engine, pool: WorkerPool) -> None:
    # execute
    result, checkpoints, start = _trained(engine, pool)
    _, reference, _ = _trained("sequential", pool)

    # assert: one row per checkpoint, the start first and the trained model last, with velocities
    for position, size in enumerate(SIZES):
        kept, expected = checkpoints[position], reference[position]
        steps = steps_per_client(size, CONFIG)
        assert (kept.every, kept.steps, kept.params.shape[0]) == (EVERY, steps, checkpoint_count(steps, EVERY))
        assert torch.equal(kept.params[0], start) and torch.equal(kept.params[-1], result.params[position])
        assert kept.velocity is not None and expected.velocity is not None
        assert torch.count_nonzero(kept.velocity[0]) == 0
        assert torch.equal(kept.params, expected.params) and torch.equal(kept.velocity, expected.velocity)


@pytest.mark.parametrize("engine", ["vmap", "stacked"])
def test_the_batched_engines_keep_the_same_checkpoints_within_float_rounding(engine: Engine, pool: WorkerPool) -> None:
    _, checkpoints, _ = _trained(engine, pool)
    _, reference, _ = _trained("sequential", pool)
    for kept, expected in zip(checkpoints, reference, strict=True):
        assert kept.params.shape == expected.params.shape
        torch.testing.assert_close(kept.params, expected.params, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(kept.velocity, expected.velocity, rtol=1e-3, atol=1e-5)


def test_without_momentum_a_checkpoint_is_the_parameters_alone(pool: WorkerPool) -> None:
    _, checkpoints, _ = _trained("process", pool, dataclasses.replace(CONFIG, momentum=0.0))
    assert all(kept.velocity is None for kept in checkpoints)
    plain = Trainer(LENET, CONFIG, engine="sequential", device="cpu")
    assert plain.train(plain.initial_params(), _clients()).checkpoints is None


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_a_segment_trained_from_a_checkpoint_reaches_the_next_bit_for_bit(momentum: float, pool: WorkerPool) -> None:
    # prepare: client 0's checkpoints (6 steps, every 3), trained by the reference engine
    config = dataclasses.replace(CONFIG, momentum=momentum)
    _, checkpoints, _ = _trained("sequential", pool, config)
    kept = checkpoints[0]
    images, labels = _clients()[0]
    model = prepare_model(LENET.build(), torch.device("cpu"))
    trainer = Trainer(LENET, config, engine="sequential", device="cpu")

    for segment in range(kept.params.shape[0] - 1):
        # execute: train steps [3s, 3s + 3) from checkpoint s alone
        load_flat(model, kept.params[segment], trainer.spec)
        velocity = train_segment(
            model,
            trainer.spec,
            images,
            labels,
            config,
            client_generator(config.seed, 4),
            range(checkpoint_step(segment, kept.steps, EVERY), checkpoint_step(segment + 1, kept.steps, EVERY)),
            kept.velocity[segment] if kept.velocity is not None else None,
        )

        # assert: the next checkpoint, parameters and velocity alike
        assert torch.equal(flat_state(model, trainer.spec), kept.params[segment + 1])
        if kept.velocity is not None:
            assert velocity is not None and torch.equal(velocity, kept.velocity[segment + 1])
        else:
            assert velocity is None


def test_a_segment_outside_the_job_is_refused() -> None:
    model = prepare_model(LENET.build(), torch.device("cpu"))
    images, labels = _clients()[0]
    spec = Trainer(LENET, CONFIG, engine="sequential", device="cpu").spec
    with pytest.raises(ConfigError, match="not a range of the job's 6 steps"):
        train_segment(model, spec, images, labels, CONFIG, client_generator(5, 4), range(3, 9))
