"""What an :class:`ExperimentResult` computes from its records (the fairness figures per round), and its files."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest

from fedchain.errors import ConfigError
from fedchain.experiments.config import ExperimentConfig
from fedchain.experiments.results import (
    METRICS_FILE,
    ClientInfo,
    ExperimentResult,
    RoundRecord,
    gain_over_standalone,
    read_result,
    write_metrics,
)

STANDALONE = (0.5, 0.7, 0.9)


def _result(
    per_round: list[tuple[float, ...] | None], standalone: tuple[float, ...] | None = STANDALONE
) -> ExperimentResult:
    rounds = tuple(
        RoundRecord(
            round=i + 1,
            test_accuracy=0.9,
            test_loss=0.3,
            contribution=(1 / 3,) * 3,
            quality=(1.0,) * 3,
            accepted=(True,) * 3,
            seconds=1.0,
            reward_accuracy=accuracy,
            novelty=(None,) * 3 if i == 0 else (12.5, None, 3.25),  # rule 5 from round 2; a rejected update: None
        )
        for i, accuracy in enumerate(per_round)
    )
    return ExperimentResult(
        config=ExperimentConfig(strategy="fedave"),
        clients=tuple(ClientInfo(i, 100) for i in range(3)),
        rounds=rounds,
        standalone_runs=None if standalone is None else (standalone,),
        reward_accuracy=per_round[-1],
        rounds_to_target=None,
        seconds=3.0,
    )


def test_fairness_by_round_correlates_every_tested_round_and_skips_the_others() -> None:
    # prepare: round 1 linear in standalone (Pearson 1), round 2 untested, round 3 reversed (-1), round 4 mixed
    mixed = (0.9, 0.8, 0.95)
    result = _result([(0.6, 0.8, 1.0), None, (1.0, 0.8, 0.6), mixed])

    # execute
    by_round = result.fairness_by_round()

    # assert
    assert [r for r, _ in by_round] == [1, 3, 4]
    assert [p for _, p in by_round] == pytest.approx([1.0, -1.0, np.corrcoef(STANDALONE, mixed)[0, 1]])
    best = result.best_round_fairness()
    assert best is not None
    assert (best.round, best.pearson) == (1, pytest.approx(1.0))
    assert (best.gain_mean, best.gain_worst) == result.gain_in_round(1)


def test_without_per_round_tests_or_standalone_accuracies_there_is_no_best_round() -> None:
    assert _result([None, None, (0.6, 0.8, 1.0)]).fairness_by_round() == ((3, pytest.approx(1.0)),)
    assert _result([None, None]).best_round_fairness() is None
    assert _result([(0.6, 0.8, 0.95)], standalone=None).best_round_fairness() is None


def test_the_gain_in_a_round_compares_that_rounds_rewarded_models_with_standalone() -> None:
    result = _result([(0.4, 0.7, 0.95), None])

    assert result.gain_in_round(1) == (pytest.approx((-0.1 + 0.0 + 0.05) / 3), pytest.approx(-0.1))
    assert result.gain_in_round(2) is None  # not tested that round
    assert result.gain_in_round(3) is None  # no such round


def test_gain_over_standalone_is_the_mean_and_the_smallest_difference() -> None:
    mean, worst = gain_over_standalone((0.6, 0.65, 0.95), STANDALONE)

    assert mean == pytest.approx((0.1 - 0.05 + 0.05) / 3)
    assert worst == pytest.approx(-0.05)
    with pytest.raises(ValueError):
        gain_over_standalone((0.6, 0.65), STANDALONE)  # one accuracy per client, or a clear failure


def test_standalone_agreement_is_the_mean_pearson_between_repeats_and_sets_the_ceiling() -> None:
    # prepare: three repeats of three clients' standalone accuracies
    runs = ((0.5, 0.7, 0.9), (0.55, 0.7, 0.85), (0.5, 0.75, 0.9))
    result = dataclasses.replace(_result([(0.6, 0.8, 1.0)]), standalone_runs=runs)

    # execute
    agreement, ceiling = result.standalone_agreement(), result.fairness_ceiling()

    # assert: hand-computed from the pairwise Pearsons and Spearman-Brown for n = 3
    pairs = [np.corrcoef(runs[a], runs[b])[0, 1] for a, b in ((0, 1), (0, 2), (1, 2))]
    r = float(np.mean(pairs))
    assert agreement == pytest.approx(r)
    assert ceiling == pytest.approx(np.sqrt(3 * r / (1 + 2 * r)))
    assert ceiling is not None and r < ceiling < 1


def test_one_standalone_run_has_no_agreement_to_report() -> None:
    result = dataclasses.replace(_result([(0.6, 0.8, 1.0)]), standalone_runs=(STANDALONE,))

    assert result.standalone_agreement() is None
    assert result.fairness_ceiling() is None
    assert _result([(0.6, 0.8, 1.0)]).standalone_agreement() is None  # never computed


def test_a_written_result_reads_back_equal_with_nan_kept_as_nan(tmp_path: Path) -> None:
    # prepare: two rounds, one tested per round, and a NaN loss (JSON writes it as null)
    result = _result([None, (0.6, 0.8, 1.0)])
    result = dataclasses.replace(
        result, rounds=(dataclasses.replace(result.rounds[0], test_loss=math.nan), result.rounds[1]), rounds_to_target=2
    )
    write_metrics(result, tmp_path)

    # execute
    back = read_result(tmp_path, result.config)

    # assert
    assert back is not None and math.isnan(back.rounds[0].test_loss)
    same_loss = dataclasses.replace(back.rounds[0], test_loss=0.3)
    assert dataclasses.replace(back, rounds=(same_loss, back.rounds[1])) == dataclasses.replace(
        result, rounds=(dataclasses.replace(result.rounds[0], test_loss=0.3), result.rounds[1])
    )
    assert not list(tmp_path.glob("*.tmp"))  # written atomically, nothing left beside


def test_a_kept_result_serves_a_config_that_differs_only_in_how_it_runs(tmp_path: Path) -> None:
    result = _result([(0.6, 0.8, 1.0)])
    write_metrics(result, tmp_path)

    faster = result.config.with_changes(engine="process", threads=2, output_dir=tmp_path / "elsewhere", plots=False)

    back = read_result(tmp_path, faster)
    assert back is not None and back.config == faster and back.rounds == result.rounds


def test_no_metrics_file_means_no_kept_result(tmp_path: Path) -> None:
    assert read_result(tmp_path / "never-written", ExperimentConfig()) is None


def test_a_kept_run_of_other_settings_is_refused_naming_what_differs(tmp_path: Path) -> None:
    result = _result([(0.6, 0.8, 1.0)])
    write_metrics(result, tmp_path)

    with pytest.raises(ConfigError, match=r"other settings \(rounds 10 there, 30 now, seed 0 there, 4 now\)") as caught:
        read_result(tmp_path, result.config.with_changes(rounds=30, seed=4))
    assert "choose another output folder" in (caught.value.hint or "")


def test_a_kept_run_made_before_a_strategy_default_changed_is_refused_naming_the_default(tmp_path: Path) -> None:
    """fedave's run states today's defaults (its contribution measure among them); one kept by older code,
    without them, measured something else and is not read back as today's run."""
    result = _result([(0.6, 0.8, 1.0)])
    write_metrics(result, tmp_path)
    path = tmp_path / METRICS_FILE
    data = json.loads(path.read_text())
    assert data["config"]["strategy_defaults"]["contribution_measure"] == "discounted_accuracy"
    del data["config"]["strategy_defaults"]
    path.write_text(json.dumps(data))

    with pytest.raises(ConfigError, match=r"other settings \(strategy_defaults None there, \{.*'contribution_measure'"):
        read_result(tmp_path, result.config)


def test_only_the_changed_defaults_an_option_leaves_open_are_stated() -> None:
    assert "strategy_defaults" not in ExperimentConfig(strategy="fedavg").to_dict()  # none of its defaults changed
    stated = ExperimentConfig(strategy="cgsv", strategy_options={"tau": 1.0}).to_dict()["strategy_defaults"]
    assert stated == {"contribution_measure": "loss_discounted"}  # tau is named, so it is not a default


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "is not a readable metrics file"),
        ('["a list"]', "has no run configuration"),
        (
            json.dumps({"config": ExperimentConfig(strategy="fedave").to_dict()}),
            "is not a metrics file of this version",
        ),
    ],
)
def test_a_damaged_metrics_file_is_refused_not_taken_for_a_run(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / METRICS_FILE).write_text(text)

    with pytest.raises(ConfigError, match=message):
        read_result(tmp_path, ExperimentConfig(strategy="fedave"))
