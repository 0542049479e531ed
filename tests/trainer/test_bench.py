"""``fedchain bench train`` prints both contenders' figures and their ratio (no timing is asserted)."""

from __future__ import annotations

import json
import sys

import pytest
import torch
from click.testing import CliRunner

from fedchain.errors import ConfigError, TrainingError
from fedchain.models.registry import ModelSpec
from fedchain.trainer.bench import train
from fedchain.trainer.config import TrainConfig
from fedchain.trainer.flower_baseline import flower_round_seconds
from fedchain.trainer.trainer import initial_params

TINY = ["--clients", "2", "--samples", "32", "--rounds", "1", "--engine", "sequential", "--threads", "1"]


@pytest.mark.parametrize("engine", ["vmap", "stacked"])
def test_bench_train_json_reports_both_loops_on_the_requested_workload(
    engine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FEDCHAIN_DATA_ROOT", raising=False)

    result = CliRunner().invoke(
        train,
        [
            "--json",
            "--clients",
            "2",
            "--samples",
            "40",
            "--rounds",
            "1",
            "--engine",
            engine,
            "--device",
            "cpu",
            "--threads",
            "1",
        ],
    )

    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["workload"]["clients"] == 2 and report["workload"]["samples_per_client"] == 40
    assert report["workload"]["data"].startswith("MNIST-shaped random data")
    assert report["engine"] == engine
    for key in ("plain", "sequential", "fedchain"):
        assert len(report[key]["rounds"]) == 1
        assert report[key]["samples_per_second"] == 80 / report[key]["seconds_per_round"]
    assert (
        report["speedup_vs_plain"] == report["fedchain"]["samples_per_second"] / report["plain"]["samples_per_second"]
    )


def test_bench_train_table_names_the_data_device_and_ratio(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FEDCHAIN_DATA_ROOT", raising=False)

    result = CliRunner().invoke(
        train,
        [
            "--clients",
            "2",
            "--samples",
            "32",
            "--rounds",
            "1",
            "--engine",
            "sequential",
            "--device",
            "cpu",
            "--threads",
            "1",
        ],
    )

    assert result.exit_code == 0, result.output
    assert "data: MNIST-shaped random data (no data root)" in result.output
    assert "machine: cpu" in result.output and "speed-up:" in result.output


def test_bench_train_with_flower_missing_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "flwr", None)  # `import flwr` fails, whether or not it is installed

    result = CliRunner().invoke(train, ["--flower", "--device", "cpu", *TINY])

    assert isinstance(result.exception, ConfigError)
    assert "needs flwr[simulation]" in str(result.exception) and "make bench-flower" in str(result.exception)


def test_bench_train_measures_flower_on_the_cpu_only() -> None:
    result = CliRunner().invoke(train, ["--flower", "--device", "cuda:0", *TINY])

    assert isinstance(result.exception, ConfigError)
    assert "runs on the CPU, not cuda:0" in str(result.exception)


def test_flower_trains_every_client_for_the_requested_rounds() -> None:
    pytest.importorskip(
        "ray", reason="Flower's simulation engine (Ray) lives in its own environment: make bench-flower"
    )
    spec = ModelSpec("lenet5")
    generator = torch.Generator().manual_seed(0)
    clients = [(torch.randn(32, 1, 28, 28, generator=generator), torch.randint(0, 10, (32,), generator=generator))] * 2

    first, rounds = flower_round_seconds(spec, initial_params(spec, 0), clients, TrainConfig(), rounds=2, actors=1)

    assert first > 0 and len(rounds) == 2 and all(r > 0 for r in rounds)


def test_a_failing_flower_client_fails_the_measurement() -> None:
    pytest.importorskip(
        "ray", reason="Flower's simulation engine (Ray) lives in its own environment: make bench-flower"
    )
    spec = ModelSpec("lenet5")
    clients = [(torch.zeros(8, 1, 28, 28), torch.full((8,), 10))] * 2  # label 10 of a 10-class model: the loss raises

    with pytest.raises(TrainingError, match="expected 2 in each of 2"):
        flower_round_seconds(spec, initial_params(spec, 0), clients, TrainConfig(), rounds=1, actors=1)
