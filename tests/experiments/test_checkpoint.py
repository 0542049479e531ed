"""A stopped run goes on from its checkpoint and ends exactly as it would have without the stop."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from fedchain.errors import ConfigError
from fedchain.experiments import load_experiment, runner
from fedchain.experiments.checkpoint import CHECKPOINT_FILE, load_checkpoint
from fedchain.experiments.results import ExperimentResult, RoundRecord
from fedchain.experiments.runner import run_experiment
from fedchain.fl.strategies.fedave import FedAVEState
from tests.support import present

#: Four rounds of 3 clients on a small real MNIST subset, one thread, the sequential engine.
SMALL = {
    "clients": 3,
    "rounds": 4,
    "train_samples": 500,
    "validation_samples": 100,
    "test_samples": 200,
    "lr": 0.05,
    "momentum": 0.9,
    "engine": "sequential",
    "device": "cpu",
    "threads": 1,
    "plots": False,
}


class Stop(Exception):
    """Stands for the Ctrl-C or kill that ends a run after some round."""


def _stop_after(round_number: int) -> Callable[[RoundRecord], None]:
    def on_round(record: RoundRecord) -> None:
        if record.round == round_number:
            raise Stop

    return on_round


def _without_seconds(result: ExperimentResult) -> ExperimentResult:
    rounds = tuple(dataclasses.replace(r, seconds=0.0) for r in result.rounds)
    return dataclasses.replace(result, rounds=rounds, seconds=0.0)


@pytest.mark.parametrize(
    "settings",
    [
        {"strategy": "fedave", "partition": "pow", "standalone": True},  # own models, reputation state, standalone
        # global model, weights, pruning; a disguised free rider resends the last step, which the checkpoint keeps
        # (unscreened, so that what it sends reaches the model)
        {
            "strategy": "cgsv",
            "pruning.sparsity": 0.5,
            "faults.free_riders": 0.34,
            "faults.free_rider_mode": "disguised",
            "faults.free_ride_from": 2,
            "screening.enabled": False,
        },
    ],
    ids=["fedave", "cgsv-pruned"],
)
def test_a_run_stopped_after_round_2_goes_on_and_ends_as_an_unstopped_run(tmp_path: Path, settings: dict) -> None:
    # prepare: the run without a stop, and the same run stopped after its round 2
    config = load_experiment(None, {**SMALL, **settings})
    unstopped = run_experiment(config)
    path = tmp_path / CHECKPOINT_FILE
    with pytest.raises(Stop):
        run_experiment(config, checkpoint=path, on_round=_stop_after(2))
    reported: list[int] = []

    # execute
    resumed = run_experiment(config, checkpoint=path, on_round=lambda record: reported.append(record.round))

    # assert: the kept rounds are reported first, then the rest is run; the result is the unstopped one
    assert reported == [1, 2, 3, 4]
    assert _without_seconds(resumed) == _without_seconds(unstopped)
    assert resumed.seconds > sum(r.seconds for r in resumed.rounds[:2])  # the earlier run's time counts


def test_the_checkpoint_holds_the_state_after_the_last_saved_round(tmp_path: Path) -> None:
    config = load_experiment(None, {**SMALL, "strategy": "fedave", "checkpoint_every": 2})
    path = tmp_path / CHECKPOINT_FILE

    with pytest.raises(Stop):
        run_experiment(config, checkpoint=path, on_round=_stop_after(3))  # round 3 ran, but only every second is saved

    saved = load_checkpoint(path, config, FedAVEState, hint="")
    assert saved is not None and saved.round == 2 and [r.round for r in saved.records] == [1, 2]
    assert isinstance(saved.state, FedAVEState) and saved.state.round == 2 and saved.state.reputation is not None
    assert saved.models is not None and tuple(saved.models.shape) == (3, saved.global_params.numel())
    assert saved.rewards is None  # the clients' own models are their rewards


def test_a_run_stopped_between_standalone_repeats_keeps_the_finished_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # prepare: three repeats of the standalone models; the run is stopped while it trains the third
    config = load_experiment(None, {**SMALL, "strategy": "fedave", "standalone_repeats": 3})
    unstopped = run_experiment(config)
    trained: list[int | None] = []  # the seed of every repeat trained from here on
    real = runner.standalone_accuracies

    def counted(*args: Any, **kwargs: Any) -> torch.Tensor:
        trained.append(kwargs.get("seed"))
        if len(trained) == 3:
            raise Stop
        return real(*args, **kwargs)

    monkeypatch.setattr(runner, "standalone_accuracies", counted)
    path = tmp_path / CHECKPOINT_FILE
    with pytest.raises(Stop):
        run_experiment(config, checkpoint=path)
    saved = load_checkpoint(path, config, FedAVEState, hint="")
    assert saved is not None and saved.round == 0 and saved.standalone_runs == present(unstopped.standalone_runs)[:2]

    # execute
    resumed = run_experiment(config, checkpoint=path)

    # assert: only the third repeat is trained again, and the run ends as the unstopped one
    assert trained == [config.seed, config.seed + 1000, config.seed + 2000, config.seed + 2000]
    assert _without_seconds(resumed) == _without_seconds(unstopped)


def test_a_checkpoint_of_other_settings_is_refused_naming_them(tmp_path: Path) -> None:
    config = load_experiment(None, {**SMALL, "strategy": "fedavg"})
    path = tmp_path / CHECKPOINT_FILE
    with pytest.raises(Stop):
        run_experiment(config, checkpoint=path, on_round=_stop_after(1))

    with pytest.raises(ConfigError, match=r"holds a run of other settings \(lr 0.05 there, 0.1 now\)") as caught:
        run_experiment(config.with_changes(lr=0.1), checkpoint=path)
    assert "--fresh" in (caught.value.hint or "")
    assert (
        run_experiment(config.with_changes(engine="auto", threads=2), checkpoint=path).rounds[0].round == 1
    )  # how, not what


def test_a_file_that_is_not_a_checkpoint_is_refused(tmp_path: Path) -> None:
    path = tmp_path / CHECKPOINT_FILE
    path.write_bytes(b"not safetensors")

    with pytest.raises(ConfigError, match="is not a readable run checkpoint"):
        run_experiment(load_experiment(None, SMALL), checkpoint=path)


def test_the_standalone_models_are_kept_before_round_1_and_not_trained_again(tmp_path: Path) -> None:
    # prepare: a run with standalone models, stopped in round 1 with nothing but them saved
    config = load_experiment(None, {**SMALL, "strategy": "fedave", "standalone": True, "checkpoint_every": 2})
    unstopped = run_experiment(config)
    path = tmp_path / CHECKPOINT_FILE
    with pytest.raises(Stop):
        run_experiment(config, checkpoint=path, on_round=_stop_after(1))
    saved = load_checkpoint(path, config, FedAVEState, hint="")
    assert saved is not None and saved.round == 0 and saved.state is None and saved.records == ()
    assert saved.standalone_runs == unstopped.standalone_runs

    # execute: the standalone models' seconds are in the kept time, not spent again
    resumed = run_experiment(config, checkpoint=path)

    # assert
    assert _without_seconds(resumed) == _without_seconds(unstopped)
    assert resumed.seconds >= saved.seconds
