"""The fog and client commands: configuration from YAML and flags, and bad input refused before any chain access."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedchain.cli import main
from fedchain.client.cli import PARTITION_FLAGS, merge_flags
from fedchain.client.config import ClientConfig, load_client_config
from fedchain.config import load_yaml
from fedchain.data.partition import PartitionConfig
from fedchain.errors import ConfigError
from fog.bidding import CostModel
from fog.cli import COST_FLAGS
from fog.config import FogConfig, load_fog_config


def test_flags_override_the_yaml_file_and_cost_flags_go_into_the_cost_model(tmp_path: Path) -> None:
    # prepare: a file with a name, a job limit and part of the cost model; flags for another limit and f
    config_file = tmp_path / "fog.yaml"
    config_file.write_text("name: fog-a\nmax_jobs: 2\ncost:\n  alpha: 1.0e-12\n  margin: 0.3\n")
    flags = {"name": None, "max_jobs": 5, "frequency": 3 * 10**9, "margin": None, "tasks": (), "never_reveal": None}

    # execute
    config = load_fog_config(None, merge_flags(load_yaml(config_file), flags, "cost", COST_FLAGS))

    # assert: unset flags leave the file's values; the cost model merges both
    assert config == FogConfig(name="fog-a", max_jobs=5, cost=CostModel(frequency=3 * 10**9, alpha=1e-12, margin=0.3))


def test_fog_run_refuses_an_unknown_setting_with_the_known_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config_file = tmp_path / "fog.yaml"
    config_file.write_text("max_jobz: 2\n")

    code = main(["fog", "run", "--config", str(config_file), "--deployment", str(tmp_path / "none.json")])

    err = capsys.readouterr().err
    assert code == 1
    assert "unknown setting(s) max_jobz" in err and "max_jobs" in err


def test_fog_run_refuses_a_negative_margin(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["fog", "run", "--margin", "-0.5", "--deployment", str(tmp_path / "none.json")])

    assert code == 1
    assert "margin" in capsys.readouterr().err


def test_fog_run_that_watches_entries_without_the_validation_data_is_refused_before_any_chain_access(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FEDCHAIN_DATA_ROOT", raising=False)

    code = main(["fog", "run", "--deployment", str(tmp_path / "none.json")])
    unwatched = FogConfig(watch_entries=False)

    err = capsys.readouterr().err
    assert code == 1
    assert "watching entries needs the validation data: no data root given" in err
    assert "--data-root" in err and "--no-watch-entries" in err
    assert unwatched.data_root is None  # a fog node that does not watch needs no data


def test_client_run_needs_a_task(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["client", "run", "--deployment", str(tmp_path / "none.json")])

    assert code == 2
    assert "--task" in capsys.readouterr().err


def test_client_run_refuses_a_partition_index_outside_the_split(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "client",
            "run",
            "--task",
            "1",
            "--partitions",
            "4",
            "--partition-index",
            "4",
            "--deployment",
            str(tmp_path / "none.json"),
        ]
    )

    assert code == 1
    assert "partition_index 4 is outside 0..3" in capsys.readouterr().err


def test_client_flags_override_the_yaml_file_and_partition_flags_go_into_the_partition(tmp_path: Path) -> None:
    config_file = tmp_path / "client.yaml"
    config_file.write_text("task_id: 2\nmax_samples: 100\npartition:\n  kind: dir\n  alpha: 0.3\n")
    flags = {"task_id": None, "max_samples": 50, "partitions": 8, "partition": None, "partition_index": 7}

    config = load_client_config(None, merge_flags(load_yaml(config_file), flags, "partition", PARTITION_FLAGS))

    assert config == ClientConfig(
        task_id=2, max_samples=50, partition_index=7, partition=PartitionConfig(kind="dir", n_clients=8, alpha=0.3)
    )


def test_the_example_fog_and_client_configs_load() -> None:
    examples = Path(__file__).parents[2] / "configs" / "system"

    fog = load_fog_config(examples / "fog.yaml")
    client = load_client_config(examples / "client.yaml")

    assert (fog.name, fog.cost.margin, fog.confirmations) == ("fog-1", 0.2, 2)
    assert (client.task_id, client.partition.kind, client.partition_index) == (1, "dir", 0)
    assert fog.state_path != client.state_path


def test_the_deposit_limit_takes_a_unit_as_task_create_does_and_a_bad_amount_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config_file = tmp_path / "fog.yaml"
    config_file.write_text("max_deposit: 0.01ether\n")

    from_file = load_fog_config(config_file, {"watch_entries": False})
    from_flag = load_fog_config(config_file, {"watch_entries": False, "max_deposit": "20gwei"})
    code = main(
        ["fog", "run", "--max-deposit", "lots", "--no-watch-entries", "--deployment", str(tmp_path / "none.json")]
    )

    assert (from_file.max_deposit, from_flag.max_deposit) == (10**16, 20 * 10**9)
    assert code == 1 and "'lots' is not an amount" in capsys.readouterr().err


def test_token_rates_come_from_flags_or_the_file_keyed_by_checksum_address_and_bad_ones_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    usdc = "0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48"
    config_file = tmp_path / "fog.yaml"
    config_file.write_text(f'token_rates: {{"{usdc.lower()}": 3000000000}}\nwatch_entries: false\n')

    config = load_fog_config(config_file)
    bad_flag = main(["fog", "run", "--token-rate", f"{usdc}:3000", "--deployment", str(tmp_path / "none.json")])
    bad_flag_err = capsys.readouterr().err
    with pytest.raises(ConfigError, match="is not an Ethereum address"):
        load_fog_config(None, {"token_rates": {"0x12": 1}, "watch_entries": False})
    with pytest.raises(ConfigError, match="token units per ether"):
        load_fog_config(None, {"token_rates": {usdc: 0}, "watch_entries": False})

    assert config.rate_of(usdc.lower()) == 3000000000 and config.rate_of("0x" + "11" * 20) is None
    assert bad_flag != 0 and "TOKEN=UNITS" in bad_flag_err


def test_the_fault_flags_crash_after_round_and_threads_reach_the_config_and_a_round_below_1_is_refused() -> None:
    config = load_fog_config(None, {"crash_after_round": 1, "watch_entries": False})

    assert (config.crash_after_round, config.threads) == (1, None)
    with pytest.raises(ConfigError, match="crash_after_round must be >= 1"):
        load_fog_config(None, {"crash_after_round": 0, "watch_entries": False})
