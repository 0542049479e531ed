"""Every engine trains like the sequential reference loop; runs are reproducible."""

from __future__ import annotations

import dataclasses
import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from torch import nn

from fedchain.errors import ConfigError, DataError, TrainingError
from fedchain.models import ModelSpec
from fedchain.trainer import TrainConfig, Trainer, WorkerPool, initial_params, train_clients
from fedchain.trainer.config import Engine
from fedchain.trainer.trainer import pick_engine
from tests.support import interruptible_in_own_group
from tests.trainer.factories import (
    branching_on_its_input,
    every_stackable_layer,
    flattening_outside_a_layer,
    linear_before_flatten,
    linear_two_by_two,
    random_clients,
    tiny_batchnorm_net,
    with_a_skip_connection,
    with_an_unused_layer,
    with_dropout,
    with_two_heads,
)

#: Different sizes, a last partial batch, momentum, weight decay and two epochs: every path of the loop.
CONFIG = TrainConfig(lr=0.05, momentum=0.9, weight_decay=1e-3, batch_size=16, local_epochs=2, seed=11)
LENET = ModelSpec("lenet5")


def _engine_trainer(engine: Engine, model: ModelSpec | Callable[[], nn.Module], pool: WorkerPool) -> Trainer:
    return Trainer(model, CONFIG, engine=engine, device="cpu", pool=pool if engine == "process" else None)


@pytest.mark.parametrize("engine", ["sequential", "process", "vmap", "stacked"])
def test_one_sgd_step_matches_the_hand_computed_update(engine: Engine, pool: WorkerPool) -> None:
    # Zero weights give logits (0, 0), softmax (1/2, 1/2), loss ln 2. For x = (1, 2)
    # and label 0 the gradient is (p - onehot) x^T = [[-1/2, -1], [1/2, 1]],
    # so one step of lr 0.5 gives W = [[0.25, 0.5], [-0.25, -0.5]].
    trainer = Trainer(
        linear_two_by_two,
        TrainConfig(lr=0.5, batch_size=1),
        engine=engine,
        device="cpu",
        pool=pool if engine == "process" else None,
    )
    images, labels = torch.tensor([[[[1.0, 2.0]]]]), torch.tensor([0])

    result = trainer.train(torch.zeros(4), [(images, labels)])

    assert result.params.tolist() == [[0.25, 0.5, -0.25, -0.5]]
    assert result.losses.tolist() == [pytest.approx(math.log(2))]
    assert result.steps.tolist() == [1] and result.samples.tolist() == [1]


@pytest.mark.parametrize("engine", ["sequential", "process", "vmap", "stacked"])
def test_a_clipped_step_matches_the_hand_computed_update(engine: Engine, pool: WorkerPool) -> None:
    # The step above has the gradient [[-1/2, -1], [1/2, 1]], of norm sqrt(5/2): clipped to norm 1 it is
    # divided by sqrt(5/2) (plus torch's 1e-6), so the step of lr 0.5 is the unclipped one over sqrt(5/2).
    trainer = Trainer(
        linear_two_by_two,
        TrainConfig(lr=0.5, batch_size=1, max_grad_norm=1.0),
        engine=engine,
        device="cpu",
        pool=pool if engine == "process" else None,
    )
    images, labels = torch.tensor([[[[1.0, 2.0]]]]), torch.tensor([0])

    result = trainer.train(torch.zeros(4), [(images, labels)])

    scale = math.sqrt(5 / 2) + 1e-6
    assert result.params[0].tolist() == pytest.approx(
        [0.25 / scale, 0.5 / scale, -0.25 / scale, -0.5 / scale], rel=1e-6
    )


@pytest.mark.parametrize("engine", ["process", "vmap", "stacked"])
def test_fast_engines_clip_each_client_as_the_sequential_loop_does(engine: Engine, pool: WorkerPool) -> None:
    clients = random_clients([50, 37, 9], (1, 28, 28), 10, seed=3)
    start = initial_params(LENET, seed=1)
    tight = dataclasses.replace(CONFIG, max_grad_norm=0.5)
    reference = Trainer(LENET, tight, engine="sequential", device="cpu").train(start, clients)
    unclipped = Trainer(LENET, dataclasses.replace(CONFIG, max_grad_norm=None), engine="sequential", device="cpu")

    result = Trainer(LENET, tight, engine=engine, device="cpu", pool=pool if engine == "process" else None).train(
        start, clients
    )

    assert float((reference.params - unclipped.train(start, clients).params).abs().max()) > 1e-2  # the clip bit
    assert torch.allclose(result.params, reference.params, atol=1e-5, rtol=0)


@pytest.mark.parametrize("max_grad_norm", [0, -1.0, math.nan, math.inf, True, "5"])
def test_a_max_grad_norm_that_is_not_a_positive_number_is_refused(max_grad_norm: object) -> None:
    with pytest.raises(ConfigError, match="max_grad_norm must be a positive number or null"):
        TrainConfig(max_grad_norm=max_grad_norm)  # type: ignore[arg-type]


@pytest.mark.parametrize("engine", ["process", "vmap", "stacked"])
def test_fast_engines_match_the_sequential_loop(engine: Engine, pool: WorkerPool) -> None:
    clients = random_clients([50, 37, 64, 9], (1, 28, 28), 10, seed=0)
    start = initial_params(LENET, seed=1)
    reference = _engine_trainer("sequential", LENET, pool).train(start, clients)

    result = _engine_trainer(engine, LENET, pool).train(start, clients)

    assert result.engine == engine
    assert result.steps.tolist() == [8, 6, 8, 2] == reference.steps.tolist()
    assert torch.allclose(result.params, reference.params, atol=1e-5, rtol=0)
    assert torch.allclose(result.losses, reference.losses, atol=1e-5)
    assert float((reference.params - start).abs().max()) > 1e-2  # training moved the model


@pytest.mark.parametrize("engine", ["process", "vmap", "stacked"])
def test_fast_engines_match_with_one_starting_point_per_client(engine: Engine, pool: WorkerPool) -> None:
    clients = random_clients([20, 30], (1, 28, 28), 10, seed=5)
    starts = torch.stack([initial_params(LENET, seed=2), initial_params(LENET, seed=3)])
    reference = _engine_trainer("sequential", LENET, pool).train(starts, clients)

    result = _engine_trainer(engine, LENET, pool).train(starts, clients)

    assert torch.allclose(result.params, reference.params, atol=1e-5, rtol=0)


@pytest.mark.parametrize("engine", ["vmap", "stacked"])
def test_vectorised_engines_match_the_sequential_loop_on_the_small_cnn(engine: Engine) -> None:
    # Three channels, padded 3x3 convolutions, three pooling stages: every layer the CNN stacks.
    cnn = ModelSpec("cnn", in_channels=3)
    clients = random_clients([40, 23, 9], (3, 32, 32), 10, seed=6)
    start = initial_params(cnn, seed=2)
    config = TrainConfig(lr=0.05, batch_size=16, seed=4)
    reference = Trainer(cnn, config, engine="sequential", device="cpu").train(start, clients)

    result = Trainer(cnn, config, engine=engine, device="cpu").train(start, clients)

    # The tolerance is 1/40 of the largest update entry: on an AMD EPYC CPU the engines' convolutions
    # (grouped, or vmapped) and the loop's take other oneDNN algorithms and ended 3.3e-4 apart after
    # at most 3 steps, where a wrong client's weights or gradient, or a step too many, moves entries by
    # the update's own size (2e-2). On the machine of earlier CI runs they agreed to 1e-5.
    assert float((reference.params - start).abs().max()) > 1e-2
    assert torch.allclose(result.params, reference.params, atol=5e-4, rtol=0)


def test_the_stacked_engine_rewrites_every_layer_kind_it_accepts_as_the_sequential_loop_trains_it() -> None:
    clients = random_clients([30, 17], (2, 8, 8), 3, seed=8)
    reference_trainer = Trainer(every_stackable_layer, CONFIG, engine="sequential", device="cpu")
    start = reference_trainer.initial_params(seed=5)
    reference = reference_trainer.train(start, clients)

    result = Trainer(every_stackable_layer, CONFIG, engine="stacked", device="cpu").train(start, clients)

    assert torch.allclose(result.params, reference.params, atol=1e-5, rtol=0)
    assert torch.allclose(result.losses, reference.losses, atol=1e-5)
    assert float((reference.params - start).abs().max()) > 1e-2


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("engine", ["auto", "stacked", "vmap"])
def test_on_cuda_the_vectorised_engines_match_the_sequential_loop_on_the_same_device(engine: Engine) -> None:
    clients = random_clients([50, 37, 64, 9], (1, 28, 28), 10, seed=0)
    start = initial_params(LENET, seed=1)
    reference = Trainer(LENET, CONFIG, engine="sequential", device="cuda").train(start, clients)

    trainer = Trainer(LENET, CONFIG, engine=engine, device="cuda")
    result = trainer.train(start, clients)

    assert trainer.engine == result.engine == ("stacked" if engine == "auto" else engine)
    assert result.params.device.type == "cuda"
    assert torch.allclose(result.params.cpu(), reference.params.cpu(), atol=1e-4, rtol=0)
    assert torch.allclose(result.losses.cpu(), reference.losses.cpu(), atol=1e-4)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_cuda_training_reproduces_on_the_cpu_as_the_audit_needs() -> None:
    # The auditor and the arbiters re-run training on other machines: no TF32 on the GPU (fedchain.trainer.device).
    clients = random_clients([50, 37, 64, 9], (1, 28, 28), 10, seed=0)
    start = initial_params(LENET, seed=1)
    on_cpu = Trainer(LENET, CONFIG, engine="sequential", device="cpu").train(start, clients)

    on_gpu = Trainer(LENET, CONFIG, engine="auto", device="cuda").train(start, clients)

    assert torch.allclose(on_gpu.params.cpu(), on_cpu.params, atol=1e-5, rtol=0)


def test_auto_stands_for_the_fastest_correct_engine_of_the_device_and_model() -> None:
    assert pick_engine("cuda", stackable=True, has_buffers=False, cores=8, picklable=True) == "stacked"
    assert pick_engine("cuda", stackable=False, has_buffers=False, cores=8, picklable=True) == "vmap"
    assert pick_engine("cuda", stackable=False, has_buffers=True, cores=8, picklable=True) == "sequential"
    assert pick_engine("cpu", stackable=True, has_buffers=False, cores=2, picklable=True) == "process"
    assert pick_engine("cpu", stackable=True, has_buffers=False, cores=1, picklable=True) == "sequential"
    assert pick_engine("cpu", stackable=True, has_buffers=False, cores=2, picklable=False) == "sequential"
    assert pick_engine("mps", stackable=True, has_buffers=False, cores=2, picklable=True) == "sequential"


def test_process_engine_carries_batch_norm_buffers_like_the_sequential_loop(pool: WorkerPool) -> None:
    clients = random_clients([24, 13], (1, 6, 6), 3, seed=2)
    trainer = _engine_trainer("sequential", tiny_batchnorm_net, pool)
    start = trainer.initial_params(seed=0)
    reference = trainer.train(start, clients)

    result = _engine_trainer("process", tiny_batchnorm_net, pool).train(start, clients)

    assert torch.allclose(result.params, reference.params, atol=1e-5, rtol=0)
    counter = trainer.spec.names.index("1.num_batches_tracked")
    offset = sum(math.prod(s) for s in trainer.spec.shapes[:counter])
    assert result.params[:, offset].tolist() == [4.0, 2.0]  # steps: 2 epochs x ceil(24/16), 2 x ceil(13/16)


def test_runs_are_reproducible_and_the_seed_matters() -> None:
    clients = random_clients([40, 40], (1, 28, 28), 10, seed=3)
    start = initial_params(LENET, seed=0)
    trainer = Trainer(LENET, CONFIG, engine="sequential", device="cpu")

    first = trainer.train(start, clients)
    again = trainer.train(start, clients)
    reseeded = trainer.train(start, clients, config=TrainConfig(**{**CONFIG.__dict__, "seed": 12}))

    assert torch.equal(first.params, again.params)
    assert not torch.allclose(first.params, reseeded.params)


def test_a_clients_result_depends_on_its_id_not_its_position_or_neighbours() -> None:
    clients = random_clients([30, 30, 30], (1, 28, 28), 10, seed=4)
    start = initial_params(LENET, seed=0)
    trainer = Trainer(LENET, CONFIG, engine="sequential", device="cpu")

    all_three = trainer.train(start, clients, client_ids=[7, 8, 9])
    alone = trainer.train(start, [clients[2]], client_ids=[9])

    assert torch.equal(all_three.params[2], alone.params[0])


def test_initial_params_are_reproducible_from_the_seed() -> None:
    assert torch.equal(initial_params(LENET, 4), initial_params(LENET, 4))
    assert not torch.equal(initial_params(LENET, 4), initial_params(LENET, 5))


@pytest.mark.parametrize("engine", ["vmap", "stacked"])
def test_vectorised_engines_refuse_models_with_batch_norm(engine: Engine) -> None:
    with pytest.raises(ConfigError, match="buffers"):
        Trainer(tiny_batchnorm_net, CONFIG, engine=engine, device="cpu")


@pytest.mark.parametrize(
    ("factory", "reason"),
    [
        (with_dropout, "layer 2 is a Dropout"),
        (branching_on_its_input, "its forward cannot be traced"),
        (flattening_outside_a_layer, "its forward calls flatten outside a layer"),
        (with_a_skip_connection, "its forward calls add outside a layer"),
        (with_two_heads, "layer second does not take the previous layer's output alone"),
        (with_an_unused_layer, "its forward never uses unused.weight"),
        (linear_before_flatten, "linear layer 0 is not preceded by a Flatten"),
    ],
)
def test_the_stacked_engine_refuses_what_it_cannot_stack_and_says_to_use_vmap(
    factory: Callable[[], nn.Module], reason: str
) -> None:
    with pytest.raises(ConfigError, match="stacked engine cannot train this model") as raised:
        Trainer(factory, CONFIG, engine="stacked", device="cpu")

    assert reason in str(raised.value)
    assert raised.value.hint is not None and "engine='vmap'" in raised.value.hint


def test_auto_picks_the_process_engine_on_a_multicore_cpu_and_sequential_for_one_worker() -> None:
    assert Trainer(LENET, engine="auto", device="cpu", workers=2).engine == "process"
    assert Trainer(LENET, engine="auto", device="cpu", workers=1).engine == "sequential"


def test_a_failing_client_in_a_worker_raises_training_error_and_the_pool_carries_on(pool: WorkerPool) -> None:
    good = random_clients([8], (1, 28, 28), 10, seed=1)[0]
    bad = (torch.randn(4, 1, 28, 28), torch.tensor([0, 1, 2, 10]))  # label 10 of 10 classes
    trainer = Trainer(LENET, CONFIG, engine="process", device="cpu", pool=pool)
    start = initial_params(LENET)

    with pytest.raises(TrainingError, match="position 1 failed"):
        trainer.train(start, [good, bad])
    result = trainer.train(start, [good])

    assert result.steps.tolist() == [2]


def test_bad_inputs_get_clear_errors() -> None:
    trainer = Trainer(LENET, CONFIG, engine="sequential", device="cpu")
    good = random_clients([4], (1, 28, 28), 10, seed=0)
    with pytest.raises(ConfigError, match="unknown engine"):
        Trainer(LENET, engine="gpu")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="do not fit the model"):
        trainer.train(torch.zeros(3), good)
    with pytest.raises(ConfigError, match="NaN"):
        trainer.train(torch.full((trainer.spec.numel,), math.nan), good)
    with pytest.raises(DataError, match="at least one labelled sample"):
        trainer.train(initial_params(LENET), [(torch.empty(0, 1, 28, 28), torch.empty(0, dtype=torch.int64))])
    with pytest.raises(ConfigError, match="batch_size"):
        TrainConfig(batch_size=0)


def test_train_clients_accepts_a_state_dict_and_returns_one_row_per_client() -> None:
    model = LENET.build()
    clients = random_clients([10, 12], (1, 28, 28), 10, seed=9)

    result = train_clients(LENET, model.state_dict(), clients, TrainConfig(lr=0.01), engine="sequential", device="cpu")

    assert result.params.shape == (2, sum(p.numel() for p in model.parameters()))
    assert result.updates(initial_params(LENET, 0)).shape == result.params.shape


def test_ctrl_c_stops_a_training_command_and_its_workers_quietly(tmp_path: Path) -> None:
    # A script training with the process engine; Ctrl-C goes to its whole process group, as in a terminal.
    script = tmp_path / "train.py"
    script.write_text(
        textwrap.dedent(
            """
        import sys
        import torch
        from fedchain.trainer import Trainer, TrainConfig

        if __name__ == "__main__":
            clients = [(torch.randn(2000, 1, 28, 28), torch.randint(0, 10, (2000,))) for _ in range(4)]
            with Trainer("lenet5", TrainConfig(local_epochs=50), engine="process", device="cpu", workers=2) as trainer:
                start = trainer.initial_params(0)
                print("training", flush=True)
                try:
                    trainer.train(start, clients)
                except KeyboardInterrupt:
                    print("interrupted", flush=True)
                    sys.exit(130)
        """
        )
    )
    child = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=interruptible_in_own_group,
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "training"
    time.sleep(1.0)  # the workers are inside a client's epochs

    os.killpg(child.pid, signal.SIGINT)
    out, err = child.communicate(timeout=60)

    assert child.returncode == 130 and "interrupted" in out
    assert "Traceback" not in err  # no worker printed its KeyboardInterrupt
