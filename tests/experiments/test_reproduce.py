"""``fedchain reproduce``: its commands exist, and the fairness table summarises seeds correctly.

The experiments themselves take minutes to hours; they are commands that
print a table, not tests (see their --help).
"""

import dataclasses
import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from fedchain import taskspec
from fedchain.cli import cli
from fedchain.errors import ConfigError
from fedchain.experiments import load_experiment
from fedchain.experiments.checkpoint import CHECKPOINT_FILE
from fedchain.experiments.progress import RunObserver
from fedchain.experiments.reproduce import (
    FAIRNESS_DEFAULTS,
    ORACLE,
    ROBUSTNESS_COLUMNS,
    ROBUSTNESS_DEFAULTS,
    FairnessRun,
    default_output_dir,
    fairness_runs,
    global_gap,
    oracle_quota_fractions,
    robustness_runs,
    robustness_table,
    summarise_fairness,
    summarise_robustness,
)
from fedchain.experiments.results import ExperimentResult, RoundRecord
from tests.support import interruptible_in_own_group

#: 3 clients, 1 round on a small real MNIST subset: seconds per fairness run.
SMALL = {
    "clients": 3,
    "rounds": 1,
    "train_samples": 500,
    "validation_samples": 100,
    "test_samples": 200,
    "engine": "sequential",
    "device": "cpu",
    "threads": 1,
    "plots": False,
}


def test_reproduce_offers_its_tables() -> None:
    result = CliRunner().invoke(cli, ["reproduce", "--help"])

    assert result.exit_code == 0
    assert all(table in result.output for table in ("rounds-to-accuracy", "fairness", "robustness"))


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
            "pow",
            "fedave",
            seed,
            pearson,
            contribution_pearson=pearson + 0.1,
            jain=1.0 - seed / 10,
            final_accuracy=0.9,
            seconds=1.0,
            gain_mean=0.01 * seed,
            gain_worst=-0.01 * seed,
            best_round_pearson=pearson + 0.05,
            best_round_gain_mean=-0.1 * seed,
        )
        for seed, pearson in enumerate((0.5, 0.7, 0.9))
    ] + [
        FairnessRun(
            "dir",
            "fedfaim",
            0,
            0.3,
            contribution_pearson=0.2,
            jain=0.8,
            final_accuracy=0.8,
            seconds=1.0,
            gain_mean=0.05,
            gain_worst=0.02,
        )
    ]

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


def test_a_strategy_without_rewards_summarises_to_nan_fairness_and_its_global_accuracy() -> None:
    runs = [
        FairnessRun(
            "pow",
            "fedavg",
            seed,
            math.nan,
            contribution_pearson=0.5,
            jain=math.nan,
            final_accuracy=0.9 + seed / 100,
            seconds=1.0,
            gain_mean=math.nan,
            gain_worst=math.nan,
        )
        for seed in range(2)
    ]

    (row,) = summarise_fairness(runs)

    assert math.isnan(row.pearson_mean) and math.isnan(row.pearson_std) and math.isnan(row.gain_worst)
    assert row.accuracy_mean == pytest.approx(0.905)


def test_oracle_quotas_grow_geometrically_from_the_floor_with_standalone_accuracy() -> None:
    # z = [0, 0.5, 1]: 0.04 ** 1, 0.04 ** 0.5, 0.04 ** 0
    assert oracle_quota_fractions([0.8, 0.9, 1.0], 0.04) == pytest.approx((0.04, 0.2, 1.0))
    assert oracle_quota_fractions([0.9, 0.7], 0.5) == pytest.approx((1.0, 0.5))
    assert oracle_quota_fractions([0.9, 0.9], 0.05) == (1.0, 1.0)  # no ranking to express
    with pytest.raises(ConfigError, match="must lie in"):
        oracle_quota_fractions([0.8, 0.9], 0.0)


def test_the_oracle_run_is_fedave_with_quotas_from_the_measured_standalone_accuracies(tmp_path: Path) -> None:
    # prepare
    base = load_experiment(None, SMALL, defaults=FAIRNESS_DEFAULTS)

    # execute
    runs = fairness_runs(base, ["fedave"], ["pow"], [0], oracle_floor=0.05, output_dir=tmp_path)

    # assert
    assert [r.strategy for r in runs] == ["fedave", ORACLE]
    fedave = json.loads((tmp_path / "pow-seed0-fedave" / "metrics.json").read_text())
    oracle = json.loads((tmp_path / f"pow-seed0-{ORACLE}" / "metrics.json").read_text())
    assert oracle["config"]["strategy"] == "fedave"
    assert oracle["standalone_accuracy"] == fedave["standalone_accuracy"]
    expected = oracle_quota_fractions(fedave["standalone_accuracy"], 0.05)
    assert oracle["config"]["strategy_options"]["quota_fractions"] == pytest.approx(list(expected))
    assert min(expected) == pytest.approx(0.05) and max(expected) == 1.0


def test_the_fair_row_sits_beside_fedavgs_global_accuracy_which_has_no_fairness_figures(tmp_path: Path) -> None:
    # prepare
    base = load_experiment(None, SMALL, defaults=FAIRNESS_DEFAULTS)

    # execute
    runs = fairness_runs(base, ["fair", "fedavg"], ["pow"], [0], output_dir=tmp_path)
    rows = summarise_fairness(runs)

    # assert
    fair, fedavg = runs
    assert math.isfinite(fair.pearson) and math.isfinite(fair.gain_mean) and math.isfinite(fair.gain_worst)
    assert math.isnan(fedavg.pearson) and math.isnan(fedavg.gain_mean) and math.isnan(fedavg.jain)
    assert fair.final_accuracy == fedavg.final_accuracy  # the fair protocol's global model is FedAvg's
    assert global_gap(rows) == {("pow", "fair"): 0.0, ("pow", "fedavg"): 0.0}
    assert global_gap(rows, reference="cgsv") == {}


class Recorder(RunObserver):
    """A RunObserver that writes down what it is told."""

    def __init__(self) -> None:
        self.events: list[tuple] = []

    def run_started(self, label: str, rounds: int, note: str = "") -> None:
        self.events.append(("started", label, rounds, note))

    def run_set_up(self) -> None:
        self.events.append(("set up",))

    def round_done(self, record: RoundRecord) -> None:
        self.events.append(("round", record.round))

    def run_done(self, summary: str, result: ExperimentResult) -> None:
        self.events.append(("done", summary, len(result.rounds)))


def test_the_runs_report_their_progress_run_by_run_and_round_by_round() -> None:
    recorder = Recorder()

    runs = fairness_runs(
        load_experiment(None, {**SMALL, "rounds": 2}, defaults=FAIRNESS_DEFAULTS),
        ["fedave", "fedfaim"],
        ["pow"],
        [0],
        observer=recorder,
    )

    first = "every client trained alone first"  # only the first run of a split trains the standalone models
    assert recorder.events == [
        ("started", "pow seed 0 fedave", 2, first),
        ("set up",),
        ("round", 1),
        ("round", 2),
        ("done", f"pow seed 0 fedave: Pearson {runs[0].pearson:.3f}", 2),
        ("started", "pow seed 0 fedfaim", 2, ""),
        ("set up",),
        ("round", 1),
        ("round", 2),
        ("done", f"pow seed 0 fedfaim: Pearson {runs[1].pearson:.3f}", 2),
    ]


def test_a_series_started_again_reads_back_its_finished_runs_and_makes_only_the_rest(tmp_path: Path) -> None:
    # prepare: a whole series, then the state a kill during its second run leaves (metrics.json is written last)
    base = load_experiment(None, SMALL, defaults=FAIRNESS_DEFAULTS)
    first = fairness_runs(base, ["fedave", "fedfaim"], ["pow"], [0], output_dir=tmp_path)
    (tmp_path / "pow-seed0-fedfaim" / "metrics.json").unlink()
    recorder = Recorder()

    # execute
    again = fairness_runs(base, ["fedave", "fedfaim"], ["pow"], [0], output_dir=tmp_path, observer=recorder)

    # assert: fedave is read back (never set up), fedfaim made again from fedave's kept standalone models
    assert recorder.events == [
        ("started", "pow seed 0 fedave", 1, "read back from an earlier invocation"),
        ("done", f"pow seed 0 fedave: Pearson {first[0].pearson:.3f}", 1),
        ("started", "pow seed 0 fedfaim", 1, ""),
        ("set up",),
        ("round", 1),
        ("done", f"pow seed 0 fedfaim: Pearson {first[1].pearson:.3f}", 1),
    ]
    assert again[0] == first[0]  # read back whole, its seconds too
    assert dataclasses.replace(again[1], seconds=first[1].seconds) == first[1]  # made again: same seeds, same figures
    assert (tmp_path / "pow-seed0-fedfaim" / "metrics.json").exists()


class StopAfterRound1(RunObserver):
    """Stands for a Ctrl-C or a kill during a run's round 2."""

    def round_done(self, record: RoundRecord) -> None:
        raise KeyboardInterrupt


def test_a_run_stopped_mid_series_goes_on_from_its_checkpoint_and_ends_as_unstopped(tmp_path: Path) -> None:
    # prepare: the series unstopped, and the same series stopped after round 1 of its only run
    base = load_experiment(None, {**SMALL, "rounds": 2}, defaults=FAIRNESS_DEFAULTS)
    unstopped = fairness_runs(base, ["fedave"], ["pow"], [0])
    with pytest.raises(KeyboardInterrupt):
        fairness_runs(base, ["fedave"], ["pow"], [0], output_dir=tmp_path, observer=StopAfterRound1())
    recorder = Recorder()

    # execute
    resumed = fairness_runs(base, ["fedave"], ["pow"], [0], output_dir=tmp_path, observer=recorder)

    # assert
    assert recorder.events[0] == (
        "started",
        "pow seed 0 fedave",
        2,
        "going on from the checkpoint of an earlier invocation",
    )
    assert [e for e in recorder.events if e[0] == "round"] == [("round", 1), ("round", 2)]
    assert dataclasses.replace(resumed[0], seconds=0.0) == dataclasses.replace(unstopped[0], seconds=0.0)
    assert not (tmp_path / "pow-seed0-fedave" / CHECKPOINT_FILE).exists()  # the finished run removed it


def test_a_series_refuses_an_output_folder_holding_runs_of_other_settings(tmp_path: Path) -> None:
    args = [
        "reproduce",
        "rounds-to-accuracy",
        "--strategies",
        "fedavg",
        "--settings",
        "clean",
        "--clients",
        "3",
        "--max-rounds",
        "1",
        "--train-samples",
        "500",
        "--validation-samples",
        "100",
        "--test-samples",
        "200",
        "--engine",
        "sequential",
        "--threads",
        "1",
        "-o",
        str(tmp_path),
    ]
    made = CliRunner().invoke(cli, args)

    refused = CliRunner().invoke(cli, [*args[:-2], "--lr", "0.2", "-o", str(tmp_path)])

    assert made.exit_code == 0, made.output
    assert isinstance(refused.exception, ConfigError)
    assert "holds a run of other settings (lr 0.05 there, 0.2 now)" in str(refused.exception)
    assert json.loads((tmp_path / "clean-fedavg" / "metrics.json").read_text())["config"]["lr"] == 0.05  # kept


def test_fresh_makes_every_run_again_and_keeps_the_earlier_ones_aside(tmp_path: Path) -> None:
    out = tmp_path / "series"
    args = [
        "reproduce",
        "rounds-to-accuracy",
        "--strategies",
        "fedavg",
        "--settings",
        "clean",
        "--clients",
        "3",
        "--max-rounds",
        "1",
        "--train-samples",
        "500",
        "--validation-samples",
        "100",
        "--test-samples",
        "200",
        "--engine",
        "sequential",
        "--threads",
        "1",
        "-o",
        str(out),
        "--json",
    ]
    made = CliRunner().invoke(cli, args)

    again = CliRunner().invoke(cli, [*args, "--lr", "0.2", "--fresh"])

    assert made.exit_code == 0 and again.exit_code == 0, again.output
    (aside,) = tmp_path.glob("series.replaced-*")
    assert json.loads((aside / "clean-fedavg" / "metrics.json").read_text())["config"]["lr"] == 0.05
    assert json.loads((out / "clean-fedavg" / "metrics.json").read_text())["config"]["lr"] == 0.2


def test_a_series_stopped_with_ctrl_c_says_where_its_runs_are_and_the_same_command_goes_on(tmp_path: Path) -> None:
    # prepare: two runs in a process of its own, as Ctrl-C in a terminal reaches it
    args = [
        "reproduce",
        "fairness",
        "--strategies",
        "fedave",
        "--partitions",
        "pow",
        "--seeds",
        "2",
        "--clients",
        "3",
        "--rounds",
        "10",
        "--train-samples",
        "500",
        "--validation-samples",
        "100",
        "--test-samples",
        "200",
        "--engine",
        "sequential",
        "--threads",
        "1",
        "-o",
        str(tmp_path),
    ]
    child = subprocess.Popen(
        [sys.executable, "-m", "fedchain.cli", *args],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        preexec_fn=interruptible_in_own_group,
    )
    assert child.stderr is not None
    for line in child.stderr:  # wait until the first run is done
        if "pow seed 0 fedave: Pearson" in line:
            break

    # execute: Ctrl-C during the second run, then the same command again
    os.killpg(child.pid, signal.SIGINT)
    rest = child.stderr.read()
    child.wait(timeout=60)
    kept = json.loads((tmp_path / "pow-seed0-fedave" / "metrics.json").read_text())
    second_was_kept = (tmp_path / "pow-seed1-fedave" / "metrics.json").exists()
    again = CliRunner().invoke(cli, [*args, "--json"])

    # assert: the first run was kept and read back, not made again; the second was made
    assert child.returncode == 130
    assert f"the runs so far are in {tmp_path}: the same command goes on from them" in rest
    assert not second_was_kept
    assert again.exit_code == 0, again.output
    runs = json.loads(again.stdout)["runs"]
    assert [r["seed"] for r in runs] == [0, 1]
    assert runs[0]["seconds"] == kept["seconds"]  # the kept run's own figures
    assert (tmp_path / "pow-seed1-fedave" / "metrics.json").exists()


def test_a_set_up_error_is_printed_without_a_progress_bar() -> None:
    result = CliRunner().invoke(cli, ["reproduce", "fairness", "--partitions", "zipf", "--seeds", "1"])

    assert isinstance(result.exception, ConfigError) and "unknown partition kind 'zipf'" in str(result.exception)
    assert result.output == ""  # no bar was started


def test_repeated_standalone_models_give_their_mean_as_reference_and_their_agreement(tmp_path: Path) -> None:
    # prepare: the same small federation, with one standalone repeat and with three
    once = load_experiment(None, SMALL, defaults=FAIRNESS_DEFAULTS)
    thrice = once.with_changes(standalone_repeats=3)

    # execute
    single = fairness_runs(once, ["fedave"], ["pow"], [0], output_dir=tmp_path / "once")
    repeated = fairness_runs(thrice, ["fedave"], ["pow"], [0], oracle_floor=0.05, output_dir=tmp_path / "thrice")

    # assert: repeat 0 is the single run's reference; the reference is the repeats' mean, shared by every row
    one = json.loads((tmp_path / "once" / "pow-seed0-fedave" / "metrics.json").read_text())
    three = json.loads((tmp_path / "thrice" / "pow-seed0-fedave" / "metrics.json").read_text())
    oracle = json.loads((tmp_path / "thrice" / f"pow-seed0-{ORACLE}" / "metrics.json").read_text())
    assert one["standalone_runs"] == [one["standalone_accuracy"]]
    assert math.isnan(single[0].reference_agreement) and one["standalone_agreement"] is None
    runs = three["standalone_runs"]
    assert len(runs) == 3 and runs[0] == one["standalone_accuracy"] and runs[1] != runs[0]
    assert three["standalone_accuracy"] == pytest.approx(np.mean(runs, axis=0).tolist())
    assert oracle["standalone_runs"] == runs
    pairs = [np.corrcoef(runs[a], runs[b])[0, 1] for a, b in ((0, 1), (0, 2), (1, 2))]
    assert [r.reference_agreement for r in repeated] == pytest.approx([np.mean(pairs)] * 2)
    assert three["fairness_ceiling"] == pytest.approx(repeated[0].fairness_ceiling)


def test_the_fairness_table_shows_the_references_agreement_when_repeated_and_json_has_no_nan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # without -o the runs are kept under runs/reproduce/ here
    args = [
        "reproduce",
        "fairness",
        "--strategies",
        "fedave",
        "--partitions",
        "pow",
        "--seeds",
        "1",
        "--clients",
        "3",
        "--rounds",
        "1",
        "--train-samples",
        "500",
        "--validation-samples",
        "100",
        "--test-samples",
        "200",
        "--engine",
        "sequential",
        "--threads",
        "1",
    ]

    repeated = CliRunner().invoke(cli, [*args, "--standalone-repeats", "2"])
    refused = CliRunner().invoke(cli, [*args, "--standalone-repeats", "0"])
    as_json = CliRunner().invoke(cli, [*args, "--json"])

    assert repeated.exit_code == 0, repeated.output
    assert "agreement" in repeated.output and "ceiling" in repeated.output  # the table wraps its headers
    assert refused.exit_code == 2 and "--standalone-repeats" in refused.output
    assert as_json.exit_code == 0, as_json.output
    report = json.loads(as_json.stdout, parse_constant=lambda constant: pytest.fail(f"{constant} in --json output"))
    assert report["summary"][0]["reference_agreement_mean"] is None  # one repeat: nothing to agree, null not NaN
    folders = sorted(p.name for p in (tmp_path / "runs" / "reproduce").iterdir())  # one per settings, none refused
    assert len(folders) == 2 and all(name.startswith("fairness-") for name in folders)
    assert "every run's metrics and plots in runs/reproduce/fairness-" in repeated.output


def test_the_default_folder_names_the_settings_but_not_how_they_run() -> None:
    base = load_experiment(None, SMALL, defaults=FAIRNESS_DEFAULTS)

    same = default_output_dir("fairness", base.with_changes(threads=2, engine="auto", output_dir=Path("x")))
    other = default_output_dir("fairness", base.with_changes(lr=0.2))

    assert same == default_output_dir("fairness", base) and same.parent == Path("runs") / "reproduce"
    assert other != same and same.name.startswith("fairness-")


def test_the_default_folder_changes_with_a_strategy_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """Code whose cgsv default has changed (registered as the spec's changed defaults are) makes its series in a
    folder of its own: the runs kept by the older code measured something else."""
    base = load_experiment(None, SMALL, defaults=FAIRNESS_DEFAULTS)
    before = default_output_dir("fairness", base)

    monkeypatch.setitem(
        taskspec._OPTIONS_CHANGED_LATER, "cgsv", {**taskspec._OPTIONS_CHANGED_LATER["cgsv"], "gamma0": 1}
    )

    assert default_output_dir("fairness", base) != before


def test_the_oracle_run_needs_a_strategy_run_for_its_standalone_accuracies() -> None:
    with pytest.raises(ConfigError, match="standalone accuracies") as caught:
        fairness_runs(load_experiment(None, {}, defaults=FAIRNESS_DEFAULTS), [], ["pow"], [0], oracle_floor=0.05)
    assert "--strategies fedave" in (caught.value.hint or "")


def test_the_fairness_command_refuses_an_oracle_floor_outside_0_1() -> None:
    result = CliRunner().invoke(cli, ["reproduce", "fairness", "--oracle-floor", "0"])

    assert result.exit_code == 2
    assert "--oracle-floor" in result.output


@pytest.mark.parametrize(
    ("command", "flag", "value"),
    [
        ("fairness", "--seeds", "0"),
        ("fairness", "--strategies", ","),
        ("fairness", "--partitions", " "),
        ("rounds-to-accuracy", "--strategies", ""),
        ("rounds-to-accuracy", "--settings", ","),
        ("robustness", "--attacks", ","),
        ("robustness", "--fractions", "0"),
        ("robustness", "--fractions", "0.2,a"),
    ],
)
def test_a_table_with_no_rows_is_refused_instead_of_printed_empty(command: str, flag: str, value: str) -> None:
    result = CliRunner().invoke(cli, ["reproduce", command, flag, value])

    assert result.exit_code == 2  # a usage error, before any data is loaded
    assert flag in result.output


def test_robustness_catches_a_x1000_scaler_under_fedavg_and_leaves_the_clean_run_without_precision(
    tmp_path: Path,
) -> None:
    # prepare: 5 clients, one of them (0.2) scales its update by 1000
    flags = [
        "--strategies",
        "fedavg,quality",
        "--attacks",
        "none,scale-x1000",
        "--partitions",
        "iid",
        "--fractions",
        "0.2",
        "--rounds",
        "2",
        "--clients",
        "5",
        "--train-samples",
        "500",
        "--validation-samples",
        "100",
        "--test-samples",
        "200",
        "--engine",
        "sequential",
        "--threads",
        "1",
    ]

    # execute: the command prints its table; the same series again reads every run back
    printed = CliRunner().invoke(cli, ["reproduce", "robustness", *flags, "-o", str(tmp_path)])
    base = load_experiment(None, {**SMALL, "clients": 5, "rounds": 2}, defaults=ROBUSTNESS_DEFAULTS)
    recorder = Recorder()
    runs = robustness_runs(
        base,
        ["fedavg", "quality"],
        ["none", "scale-x1000"],
        ["iid"],
        [0.2],
        [0],
        output_dir=tmp_path,
        observer=recorder,
    )

    # assert
    assert printed.exit_code == 0, printed.output
    assert [c.header for c in robustness_table(summarise_robustness(runs), "t").columns] == list(ROBUSTNESS_COLUMNS)
    assert all(word in printed.output for word in ("precision", "recall", "removed", "pay", "n/a", "scale-x1000"))
    notes = [event[3] for event in recorder.events if event[0] == "started"]
    assert notes == ["read back from an earlier invocation"] * 4
    clean = {r.strategy: r for r in runs if r.attack == "none"}
    attacked = {r.strategy: r for r in runs if r.attack == "scale-x1000"}
    assert set(clean) == set(attacked) == {"fedavg", "quality"}
    assert all(math.isnan(r.precision) and math.isnan(r.recall) and r.caught_round is None for r in clean.values())
    assert all(math.isnan(r.attacker_pay_share) and r.attackers_removed == 0 for r in clean.values())
    assert all(r.honest_removed_by_attack == 0 for r in clean.values())  # its own removals are the baseline
    assert all(0 <= r.honest_removed_by_attack <= r.honest_removed for r in attacked.values())
    scaler = attacked["fedavg"]
    assert (scaler.recall, scaler.precision, scaler.caught_round) == (1.0, 1.0, 1)  # rejected in both rounds
    assert scaler.attackers_removed == 1 and scaler.attacker_pay_share == 0.0  # quality 0: r_a 0, removed in round 1
    assert scaler.accuracy_change == pytest.approx(scaler.final_accuracy - clean["fedavg"].final_accuracy)


def test_robustness_mounts_disguised_free_riders_at_a_noise_and_start_of_the_users_own(tmp_path: Path) -> None:
    # prepare: 5 clients, one disguised free rider at twice the standard noise, honest in round 1, riding in 2 and 3
    flags = ["--strategies", "fedavg", "--attacks", "free-ride-disguised", "--partitions", "iid", "--fractions", "0.2"]
    small = ["--rounds", "3", "--clients", "5", "--train-samples", "500", "--validation-samples", "100"]
    small += ["--test-samples", "200", "--engine", "sequential", "--threads", "1"]

    # execute
    printed = CliRunner().invoke(
        cli,
        [
            "reproduce",
            "robustness",
            *flags,
            *small,
            "--disguise-noise",
            "1",
            "--free-ride-from",
            "3",
            "--json",
            "-o",
            str(tmp_path),
        ],
    )

    # assert: the runs carry the setting in their folder and their config; the pay counts from round 3
    assert printed.exit_code == 0, printed.output
    report = json.loads(printed.stdout)
    assert report["free_riding"] == {"disguise_noise": 1.0, "free_ride_from": 3}
    stored = json.loads(
        (tmp_path / "iid-seed0-free-ride-disguised-noise1-from3-0.2-fedavg" / "metrics.json").read_text()
    )
    assert stored["config"]["faults"]["disguise_noise"] == 1.0
    assert stored["config"]["faults"]["free_ride_from"] == 3
    assert (tmp_path / "iid-seed0-none-fedavg" / "metrics.json").exists()  # the clean run is shared by every setting
    (rider,) = [c["index"] for c in stored["clients"] if c["fault"] != "none"]
    assert all(r["accepted"][rider] or r["round"] >= 3 for r in stored["rounds"])  # honest while it trains
    (run,) = report["runs"]
    assert (run["attack"], run["caught_round"], run["attacker_pay_share"]) == ("free-ride-disguised", 3, 0.0)


def test_robustness_refuses_free_riders_that_would_start_after_the_last_round(tmp_path: Path) -> None:
    args = ["reproduce", "robustness", "--attacks", "free-ride-zero", "--rounds", "3", "--free-ride-from", "4"]

    refused = CliRunner().invoke(cli, [*args, "-o", str(tmp_path)])

    assert isinstance(refused.exception, ConfigError)
    assert "start in round 4: they never free-ride in runs of 3 rounds" in str(refused.exception)
    assert not list(tmp_path.glob("*/metrics.json"))  # refused before any run


def test_robustness_starts_its_seeds_at_first_seed(tmp_path: Path) -> None:
    """--first-seed 2 --seeds 1 makes seed 2 alone: another process can add seeds to a series without making 0-1."""
    args = ["reproduce", "robustness", "--strategies", "fedavg", "--attacks", "none", "--partitions", "iid"]
    small = ["--rounds", "1", "--clients", "3", "--train-samples", "300", "--validation-samples", "100"]
    small += ["--test-samples", "100", "--engine", "sequential", "--threads", "1"]

    printed = CliRunner().invoke(cli, [*args, *small, "--first-seed", "2", "--json", "-o", str(tmp_path)])

    assert printed.exit_code == 0, printed.output
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["iid-seed2-none-fedavg"]
    (run,) = json.loads(printed.stdout)["runs"]
    assert run["seed"] == 2


def test_a_negative_first_seed_is_a_usage_error() -> None:
    result = CliRunner().invoke(cli, ["reproduce", "fairness", "--first-seed", "-1"])

    assert result.exit_code == 2 and "--first-seed" in result.output
