"""An experiment config is read from YAML, overridden by flags, and refuses bad input with a clear error."""

from pathlib import Path

import pytest
import yaml

from fedchain.errors import ConfigError
from fedchain.experiments.config import ExperimentConfig, FaultConfig, PruningConfig, load_experiment
from fedchain.experiments.runner import build_strategy
from fedchain.taskspec import TaskSpec
from fedchain.trainer.config import TrainConfig


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "experiment.yaml"
    path.write_text(text)
    return path


def test_yaml_values_replace_the_defaults(tmp_path: Path) -> None:
    # prepare
    path = _write(tmp_path, "dataset: fashion-mnist\nclients: 7\nlr: 0.05\nfaults:\n  noisy_clients: 0.3\n")

    # execute
    config = load_experiment(path)

    # assert
    assert config.dataset == "fashion-mnist"
    assert config.clients == 7
    assert config.lr == pytest.approx(0.05)
    assert config.faults == FaultConfig(noisy_clients=0.3)
    assert config.rounds == ExperimentConfig().rounds


def test_local_training_defaults_are_the_trainers_as_a_task_specs_are() -> None:
    config, trainer = ExperimentConfig(), TrainConfig()

    spec = TaskSpec().train_config(1)

    assert (config.lr, config.momentum, config.batch_size, config.local_epochs, config.max_grad_norm) == (
        trainer.lr,
        trainer.momentum,
        trainer.batch_size,
        trainer.local_epochs,
        trainer.max_grad_norm,
    )
    assert (spec.lr, spec.momentum, spec.batch_size, spec.local_epochs, spec.max_grad_norm) == (
        trainer.lr,
        trainer.momentum,
        trainer.batch_size,
        trainer.local_epochs,
        trainer.max_grad_norm,
    )


def test_flags_override_one_key_of_a_section_and_keep_the_others(tmp_path: Path) -> None:
    # prepare
    path = _write(tmp_path, "faults:\n  noisy_clients: 0.3\n  noise_rate: 0.2\nrounds: 4\n")

    # execute
    config = load_experiment(path, {"faults.noisy_clients": 0.5, "rounds": None, "seed": 9})

    # assert
    assert config.faults.noisy_clients == pytest.approx(0.5)
    assert config.faults.noise_rate == pytest.approx(0.2)
    assert config.rounds == 4  # an unset flag (None) keeps the file's value
    assert config.seed == 9


def test_pruning_is_off_unless_a_sparsity_is_given(tmp_path: Path) -> None:
    dense = load_experiment(_write(tmp_path, "rounds: 2\n"))
    pruned = load_experiment(_write(tmp_path, "pruning:\n  sparsity: 0.6\n"))

    assert not dense.pruning.enabled
    assert pruned.pruning == PruningConfig(sparsity=0.6)
    assert pruned.pruning.enabled


def test_unknown_setting_is_named_and_the_known_ones_listed(tmp_path: Path) -> None:
    path = _write(tmp_path, "rounds: 3\nlearning_rate: 0.1\n")

    with pytest.raises(ConfigError) as raised:
        load_experiment(path)

    assert "learning_rate" in str(raised.value)
    assert "lr" in raised.value.hint


def test_unknown_fault_is_named_with_its_section(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"faults\.byzantine"):
        load_experiment(_write(tmp_path, "faults:\n  byzantine: 0.1\n"))


def test_a_value_of_the_wrong_type_names_the_setting(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="clients must be an integer"):
        load_experiment(_write(tmp_path, "clients: many\n"))


@pytest.mark.parametrize(
    "text, message",
    [
        ("clients: 0\n", "clients=0 must be at least 1"),
        ("lr: -0.1\n", "lr=-0.1 must be positive"),
        ("target_accuracy: 96\n", "target_accuracy=96.0 must lie in"),
        ("faults:\n  noisy_clients: 0.7\n  free_riders: 0.5\n", "add up to 1.2"),
        ("faults:\n  noise_rate: 1.5\n", "noise_rate=1.5 must lie in"),
        ("faults:\n  scaled_clients: 0.5\n  sybil_clients: 0.3\n  noise_clients: 0.3\n", "add up to 1.1"),
        ("faults:\n  sign_flipped_clients: -0.1\n", "sign_flipped_clients=-0.1 must lie in"),
        ("faults:\n  sybil_scale: 0\n", "sybil_scale=0.0 must be a positive"),
        ("strategy_options: fast\n", "strategy_options must be a mapping"),
        ("pruning:\n  sparsity: 1.0\n", "sparsity must be in"),
        ("fairness_every: -1\n", "fairness_every=-1 must be 0"),
        ("quality_floor: 1.0\n", "quality floor must be a number in"),
        ("data_credit: 0.5\n", "data credit must be a finite number >= 1"),
        ("early_floor: sometimes\n", "early_floor"),
        ("quality_grace: -1\n", "quality_grace must be a whole number"),
        ("grace_first_round: sometimes\n", "grace_first_round"),
        ("grace_first_round_loss: 2\n", "grace_first_round_loss must be true or false"),
        ("grace_first_round_screened: maybe\n", "grace_first_round_screened must be true or false"),
        ("grace_first_round_extra: 1\n", "grace_first_round_extra must be true or false"),
        ("max_grad_norm: 0\n", "max_grad_norm must be a positive number or null"),
    ],
)
def test_impossible_values_are_refused_with_the_reason(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_experiment(_write(tmp_path, text))


def test_a_missing_config_file_says_so(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_experiment(tmp_path / "nowhere.yaml")


@pytest.mark.parametrize(
    "path", sorted(Path(__file__).parents[2].joinpath("configs").glob("*.yaml")), ids=lambda p: p.name
)
def test_every_example_config_loads(path: Path) -> None:
    config = load_experiment(path)

    strategy = build_strategy(config)  # its options are valid ones

    assert strategy.name == config.strategy
    assert config.output_dir.parts[0] == "runs"  # examples write into the ignored runs/ folder


def test_a_kept_runs_config_loads_as_a_config_file(tmp_path: Path) -> None:
    """metrics.json's config, with the strategy's stated defaults, can be given back as --config."""
    kept = ExperimentConfig(strategy="cgsv", rounds=4).to_dict()
    assert kept["strategy_defaults"]["contribution_measure"] == "loss_discounted"
    path = _write(tmp_path, yaml.safe_dump(kept))

    assert load_experiment(path) == ExperimentConfig(strategy="cgsv", rounds=4)
