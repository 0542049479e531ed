"""Configs load from YAML and flags into frozen dataclasses, and bad values name the key."""

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pytest

from fedchain.config import from_mapping, load_config
from fedchain.errors import ConfigError


@dataclass(frozen=True)
class Pruning:
    sparsity: float = 0.5


@dataclass(frozen=True)
class Experiment:
    rounds: int = 10
    strategy: Literal["fedavg", "cgsv"] = "fedavg"
    clients: tuple[int, ...] = field(default_factory=tuple)
    verbose: bool = False
    pruning: Pruning | None = None


def test_flags_override_the_file_and_none_flags_are_ignored(tmp_path: Path) -> None:
    path = tmp_path / "exp.yaml"
    path.write_text("rounds: 3\nstrategy: cgsv\nclients: [1, 2]\npruning: {sparsity: 0.25}\n")

    config = load_config(Experiment, path, {"rounds": 7, "verbose": None})

    assert config == Experiment(rounds=7, strategy="cgsv", clients=(1, 2), pruning=Pruning(0.25))


def test_unknown_key_is_refused_with_the_known_ones_as_hint() -> None:
    with pytest.raises(ConfigError, match="unknown setting\\(s\\) round") as caught:
        from_mapping(Experiment, {"round": 3})
    assert "rounds" in caught.value.hint


def test_wrong_types_name_the_key() -> None:
    with pytest.raises(ConfigError, match=r"rounds must be an integer, got 2\.5"):
        from_mapping(Experiment, {"rounds": 2.5})
    with pytest.raises(ConfigError, match="strategy='fedprox' is not one of 'fedavg', 'cgsv'"):
        from_mapping(Experiment, {"strategy": "fedprox"})
    with pytest.raises(ConfigError, match="verbose must be true or false"):
        from_mapping(Experiment, {"verbose": "maybe"})


def test_an_error_inside_an_optional_section_keeps_its_reason_and_hint() -> None:
    with pytest.raises(ConfigError, match=r"pruning\.sparsity must be a number"):
        from_mapping(Experiment, {"pruning": {"sparsity": "half"}})
    with pytest.raises(ConfigError, match=r"unknown setting\(s\) pruning\.density") as caught:
        from_mapping(Experiment, {"pruning": {"density": 0.5}})
    assert "pruning.sparsity" in caught.value.hint


def test_missing_or_malformed_files_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(Experiment, tmp_path / "absent.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("rounds: [1,\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(Experiment, bad)
    listed = tmp_path / "list.yaml"
    listed.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        load_config(Experiment, listed)
