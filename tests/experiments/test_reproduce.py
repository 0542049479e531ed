"""``fedchain reproduce``: its commands exist, and the fairness table summarises seeds correctly.

The experiments themselves take minutes to hours; they are commands that
print a table, not tests (see their --help).
"""

import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from fedchain.cli import cli
from fedchain.experiments.reproduce import FairnessRun, summarise_fairness


def test_reproduce_offers_both_tables() -> None:
    result = CliRunner().invoke(cli, ["reproduce", "--help"])

    assert result.exit_code == 0
    assert "rounds-to-accuracy" in result.output and "fairness" in result.output


def test_rounds_to_accuracy_refuses_a_config_without_a_target(tmp_path: Path) -> None:
    config = tmp_path / "no-target.yaml"
    config.write_text("target_accuracy: null\n")

    result = CliRunner().invoke(cli, ["reproduce", "rounds-to-accuracy", "--config", str(config)])

    assert result.exit_code == 2
    assert "--target" in result.output


def test_fairness_summary_is_the_mean_and_sample_std_over_seeds_per_partition_and_strategy() -> None:
    # prepare: three seeds of fedave on pow, one of fedfaim on dir
    runs = [
        FairnessRun(
            "pow", "fedave", seed, pearson, contribution_pearson=pearson + 0.1, jain=1.0 - seed / 10,
            final_accuracy=0.9, seconds=1.0, gain_mean=0.01 * seed, gain_worst=-0.01 * seed,
            best_round_pearson=pearson + 0.05, best_round_gain_mean=-0.1 * seed,
        )
        for seed, pearson in enumerate((0.5, 0.7, 0.9))
    ] + [FairnessRun(
        "dir", "fedfaim", 0, 0.3, contribution_pearson=0.2, jain=0.8, final_accuracy=0.8, seconds=1.0,
        gain_mean=0.05, gain_worst=0.02,
    )]

    # execute
    rows = summarise_fairness(runs)

    # assert: sample std of (0.5, 0.7, 0.9) is sqrt((0.04 + 0 + 0.04) / 2) = 0.2
    assert [(r.partition, r.strategy, r.seeds) for r in rows] == [("pow", "fedave", 3), ("dir", "fedfaim", 1)]
    assert rows[0].pearson_mean == pytest.approx(0.7)
    assert rows[0].pearson_std == pytest.approx(0.2)
    assert rows[0].contribution_pearson_mean == pytest.approx(0.8)
    assert rows[0].jain_mean == pytest.approx(0.9)
    assert rows[0].gain_mean == pytest.approx(0.01)  # mean of 0, 0.01, 0.02
    assert rows[0].gain_worst == pytest.approx(-0.02)  # the worst client of any seed
    assert rows[0].best_round_pearson_mean == pytest.approx(0.75)
    assert rows[0].best_round_gain_mean == pytest.approx(-0.1)  # mean of 0, -0.1, -0.2
    assert rows[1].pearson_std == 0.0  # one seed: no spread
    assert math.isnan(rows[1].best_round_pearson_mean)  # rewarded models not tested per round
