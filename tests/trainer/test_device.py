"""``--device`` names are checked before any work starts: a typo or a missing GPU is one clear error, not a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from fedchain.aggregator.service import AggregatorSettings
from fedchain.cli import main
from fedchain.errors import ConfigError
from fedchain.experiments.config import load_experiment
from fedchain.trainer import Trainer, resolve_device
from fedchain.trainer.device import full_float32
from fog.config import FogConfig

NO_CUDA = not torch.cuda.is_available()
#: A device name every machine refuses: CUDA where there is none, else an index past the last GPU.
MISSING_GPU = "cuda" if NO_CUDA else f"cuda:{torch.cuda.device_count()}"


def test_auto_and_none_pick_cuda_when_present_else_the_cpu() -> None:
    expected = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    assert resolve_device(None) == resolve_device("auto") == expected


def test_full_float32_turns_tf32_off_for_convolutions_and_matrix_products() -> None:
    before = (torch.backends.cudnn.allow_tf32, torch.get_float32_matmul_precision())
    torch.backends.cudnn.allow_tf32 = True  # PyTorch's default: TF32 convolutions
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        full_float32()
        assert torch.backends.cudnn.allow_tf32 is False
        assert torch.backends.cuda.matmul.allow_tf32 is False
        assert torch.get_float32_matmul_precision() == "highest"
    finally:
        torch.backends.cudnn.allow_tf32 = before[0]
        torch.set_float32_matmul_precision(before[1])


def test_a_device_this_machine_has_resolves_to_it() -> None:
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(torch.device("cpu")) == torch.device("cpu")


@pytest.mark.parametrize(
    ("name", "message"),
    [("tpu", "unknown device 'tpu'"), ("gpu0", "unknown device 'gpu0'"), ("meta", "device 'meta' is not supported")],
)
def test_a_name_that_is_no_device_we_train_on_is_refused_with_the_valid_ones(name: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as raised:
        resolve_device(name)

    assert "cpu" in raised.value.hint and "cuda:N" in raised.value.hint


def test_a_gpu_this_machine_does_not_have_is_refused_with_a_way_out() -> None:
    with pytest.raises(ConfigError, match=MISSING_GPU) as raised:
        resolve_device(MISSING_GPU)

    assert (
        ("no GPU" in str(raised.value) or "no CUDA" in str(raised.value))
        if NO_CUDA
        else "CUDA device(s)" in str(raised.value)
    )
    assert ("--device cpu" in raised.value.hint) if NO_CUDA else ("cuda:0" in raised.value.hint)


def test_every_config_that_names_a_device_refuses_a_missing_one_when_it_is_built(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=MISSING_GPU):
        Trainer("lenet5", device=MISSING_GPU)
    with pytest.raises(ConfigError, match=MISSING_GPU):
        load_experiment(None, {"device": MISSING_GPU})
    with pytest.raises(ConfigError, match=MISSING_GPU):
        FogConfig(device=MISSING_GPU)
    with pytest.raises(ConfigError, match=MISSING_GPU):
        AggregatorSettings(task_id=1, state_path=tmp_path / "a.json", device=MISSING_GPU)


@pytest.mark.parametrize(
    "command",
    [
        ["simulate", "--rounds", "1"],
        ["bench", "train", "--clients", "2", "--samples", "8", "--rounds", "1"],
        ["fog", "run"],
        ["aggregator", "run", "--task", "1"],
    ],
)
def test_commands_refuse_a_missing_gpu_before_loading_data_or_touching_a_chain(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chain = ["--deployment", str(tmp_path / "none.json")] if command[0] in ("fog", "aggregator") else []

    code = main([*command, "--device", MISSING_GPU, *chain])

    err = capsys.readouterr().err
    assert code == 1
    assert f"device '{MISSING_GPU}'" in err and "hint:" in err
    assert "Traceback" not in err and "deployment" not in err
