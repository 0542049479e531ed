"""``fedchain simulate`` end to end on real MNIST subsets, and its refusals of bad input.

Runs are tiny (a few clients, a few hundred samples, 1-2 rounds, the
sequential engine) so the whole file stays within seconds; seeds are fixed.
"""

from __future__ import annotations

import csv
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
import torch
from click.testing import CliRunner

from fedchain.cli import cli
from fedchain.errors import ConfigError, DataError
from fedchain.experiments import build_federation, load_experiment, run_experiment
from fedchain.experiments.checkpoint import CHECKPOINT_FILE
from fedchain.experiments.config import FaultConfig
from fedchain.experiments.federation import (
    FREE_RIDER,
    NO_FAULT,
    NOISE,
    NOISY,
    SCALED,
    SIGN_FLIPPED,
    SYBIL,
    assign_faults,
    imbalanced_classes,
)
from fedchain.experiments.results import RoundRecord
from fedchain.experiments.runner import tamper
from fedchain.experiments.simulate import UNFINISHED_FILE, save_unfinished
from tests.support import interruptible_in_own_group, present

#: A tiny run: 3 clients of ~130 samples, a 100-sample validation set, 300 test samples.
TINY = {
    "dataset": "mnist",
    "clients": 3,
    "rounds": 2,
    "train_samples": 500,
    "validation_samples": 100,
    "test_samples": 300,
    "lr": 0.05,
    "momentum": 0.9,
    "engine": "sequential",
    "device": "cpu",
    "threads": 1,
    "seed": 0,
}
#: Chance level of a 10-class problem.
CHANCE = 0.1


def test_simulate_writes_metrics_and_plots_and_learns(tmp_path: Path) -> None:
    # prepare
    config = tmp_path / "tiny.yaml"
    config.write_text(
        "\n".join(f"{k}: {v}" for k, v in TINY.items()) + "\nstrategy: fedave\nstandalone_repeats: 2\n"
    )  # repeats imply standalone
    out = tmp_path / "run"

    # execute
    result = CliRunner().invoke(
        cli, ["simulate", "--config", str(config), "--output-dir", str(out), "--fairness-every", "1"]
    )

    # assert
    assert result.exit_code == 0, result.output
    metrics = json.loads((out / "metrics.json").read_text())
    assert [r["round"] for r in metrics["rounds"]] == [1, 2]
    assert not (out / UNFINISHED_FILE).exists()  # saved after every round, removed once the run finished
    assert metrics["final_accuracy"] > 2 * CHANCE
    assert metrics["config"]["strategy"] == "fedave"
    assert len(metrics["standalone_accuracy"]) == len(metrics["reward_accuracy"]) == 3
    mean_contribution = np.mean([r["contribution"] for r in metrics["rounds"]], axis=0)
    expected = np.corrcoef(metrics["standalone_accuracy"], mean_contribution)[0, 1]
    assert metrics["fairness"]["contribution_pearson"] == pytest.approx(expected)
    gains = np.subtract(metrics["reward_accuracy"], metrics["standalone_accuracy"])
    assert metrics["fairness"]["gain_mean"] == pytest.approx(gains.mean())
    assert metrics["fairness"]["gain_worst"] == pytest.approx(gains.min())
    per_round = [r["reward_accuracy"] for r in metrics["rounds"]]
    assert per_round[-1] == metrics["reward_accuracy"]  # the last round's rewarded models are the final ones
    pearsons = [np.corrcoef(metrics["standalone_accuracy"], accuracy)[0, 1] for accuracy in per_round]
    assert metrics["fairness"]["pearson_best_round"] == pytest.approx(max(pearsons))
    assert metrics["fairness"]["best_round"] == 1 + int(np.argmax(pearsons))
    best_rewards = per_round[int(np.argmax(pearsons))]
    expected_gain = np.mean(np.subtract(best_rewards, metrics["standalone_accuracy"]))
    assert metrics["fairness"]["gain_mean_best_round"] == pytest.approx(expected_gain)
    with (out / "metrics.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 2 * 3
    assert "…" not in result.output and "standalone acc" in result.output  # 80 columns: no header cut short
    assert set(rows[0]) == {
        "round",
        "test_accuracy",
        "test_loss",
        "client",
        "contribution",
        "quality",
        "accepted",
        "reward_accuracy",
    }
    assert [float(row["reward_accuracy"]) for row in rows] == pytest.approx([a for r in per_round for a in r], abs=1e-6)
    for plot in ("accuracy.png", "contribution.png", "reward_vs_standalone.png", "fairness_by_round.png"):
        assert (out / plot).read_bytes().startswith(b"\x89PNG")
    assert "final test accuracy" in result.output
    assert "Pearson(standalone, mean contribution)" in result.output
    assert "gain over standalone" in result.output
    assert "best round's Pearson" in result.output
    assert len(metrics["standalone_runs"]) == 2
    assert "standalone repeats' agreement" in result.output


@pytest.mark.slow
def test_the_defaults_pass_90_percent_on_five_iid_clients_of_600_samples_within_five_rounds(tmp_path: Path) -> None:
    # prepare: only the run's size is given, so local training is what a first run gets (TrainConfig's
    # defaults); 4000 training samples less the default 1000 held out for validation leave 600 per client
    args = [
        "simulate",
        "--clients",
        "5",
        "--rounds",
        "5",
        "--train-samples",
        "4000",
        "--test-samples",
        "2000",
        "--engine",
        "sequential",
        "--threads",
        "1",
        "--no-plots",
        "-o",
        str(tmp_path),
        "--json",
    ]

    # execute
    result = CliRunner().invoke(cli, args)

    # assert: a model a user would take seriously (the defaults before lr 0.1 and batch 10 ended at 16%)
    assert result.exit_code == 0, result.output
    metrics = json.loads(result.stdout)
    assert [client["samples"] for client in metrics["clients"]] == [600] * 5
    assert metrics["final_accuracy"] >= 0.9


def test_an_infinite_update_is_rejected_and_never_averaged_in() -> None:
    # prepare: one of three clients scales its update by infinity (inf, and NaN where it is 0)
    config = load_experiment(
        None, {**TINY, "strategy": "fedavg", "faults.scaled_clients": 1 / 3, "faults.scale": math.inf}
    )
    federation = build_federation(config)
    bad = federation.faults.index(SCALED)

    # execute
    result = run_experiment(config, federation=federation)

    # assert
    for record in result.rounds:
        assert record.accepted == tuple(i != bad for i in range(3))
        assert record.contribution[bad] == 0.0
        assert record.quality[bad] == 0.0
        assert math.isfinite(record.test_loss)
        assert sum(record.contribution) == pytest.approx(1.0)  # fedavg: data shares of the two accepted clients


@pytest.mark.parametrize("strategy", ["fedavg", "quality"])
def test_screening_drops_a_client_scaling_its_update_x1000_and_no_honest_client_scores_zero(strategy: str) -> None:
    # prepare: one client in five multiplies its update by 1000
    settings = {**TINY, "clients": 5, "train_samples": 800, "strategy": strategy}
    config = load_experiment(None, {**settings, "faults.scaled_clients": 0.2, "faults.scale": 1000.0})
    federation = build_federation(config)
    bad = federation.faults.index(SCALED)

    # execute
    result = run_experiment(config, federation=federation)

    # assert: the attacker is never aggregated and the model learns; every honest client keeps a quality near 1
    for record in result.rounds:
        assert record.accepted == tuple(i != bad for i in range(5))
        assert record.quality[bad] == 0.0
        assert all(0.3 < q < 3 for i, q in enumerate(record.quality) if i != bad)
    assert result.rounds[-1].test_accuracy > 2 * CHANCE


@pytest.mark.parametrize("mode", ["noise", "random"])
def test_screening_drops_a_client_sending_noise_as_uncorrelated_and_keeps_every_honest_client(mode: str) -> None:
    # prepare: one client in five sends Gaussian noise (of its update's norm, or a random free rider's)
    faults = (
        {"faults.noise_clients": 0.2}
        if mode == "noise"
        else {"faults.free_riders": 0.2, "faults.free_rider_mode": "random"}
    )
    config = load_experiment(None, {**TINY, "clients": 5, "train_samples": 800, **faults})
    federation = build_federation(config)
    bad = federation.faults.index(NOISE if mode == "noise" else FREE_RIDER)

    # execute
    result = run_experiment(config, federation=federation)

    # assert
    for record in result.rounds:
        assert record.accepted == tuple(i != bad for i in range(5))
        assert record.quality[bad] == 0.0


@pytest.mark.parametrize(
    ("rule", "extra"),
    [
        ("median", {}),
        ("trimmed_mean", {}),
        ("multi_krum", {"aggregation.krum_byzantine": 1}),
        ("mean", {"aggregation.clip_norm": 0.5}),
    ],
)
def test_every_robust_rule_learns_in_a_tiny_run_where_a_client_scaling_x1000_poisons_the_mean(
    rule: str, extra: dict[str, float]
) -> None:
    # prepare: five clients, one scaling its update x1000, and no screening: only the rule stands in the way
    settings = {
        **TINY,
        "clients": 5,
        "train_samples": 800,
        "screening.enabled": False,
        "aggregation.rule": rule,
        **extra,
    }
    attacked = {**settings, "faults.scaled_clients": 0.2, "faults.scale": 1000.0}

    # execute
    robust = run_experiment(load_experiment(None, attacked))
    plain = run_experiment(
        load_experiment(None, {**attacked, "aggregation.rule": "mean", "aggregation.clip_norm": None})
    )

    # assert: the plain mean is poisoned, the rule learns
    assert plain.rounds[-1].test_accuracy < 2 * CHANCE
    assert robust.rounds[-1].test_accuracy > 3 * CHANCE


def test_a_robust_rule_with_a_strategy_that_normalises_updates_is_refused_before_any_training() -> None:
    config = load_experiment(None, {**TINY, "strategy": "cgsv", "aggregation.rule": "median"})

    with pytest.raises(ConfigError, match="plain mean"):
        run_experiment(config)


def test_simulate_takes_the_aggregation_rule_as_flags() -> None:
    result = CliRunner().invoke(cli, ["simulate", "--strategy", "cgsv", "--aggregation", "median", "--rounds", "1"])

    assert result.exit_code != 0
    assert "plain mean" in (result.output + str(result.exception))


def test_faulty_clients_are_disjoint_seeded_groups_of_the_requested_size() -> None:
    faults = FaultConfig(noisy_clients=0.3, free_riders=0.2, scaled_clients=0.1)

    first = assign_faults(10, faults, seed=4)
    again = assign_faults(10, faults, seed=4)

    assert first == again
    assert first.count(NOISY) == 3 and first.count(FREE_RIDER) == 2 and first.count(SCALED) == 1
    assert first.count(NO_FAULT) == 4


def test_the_new_attacks_draw_after_the_old_faults_so_old_runs_keep_their_clients() -> None:
    old = FaultConfig(noisy_clients=0.3, scaled_clients=0.1)

    faults = assign_faults(
        10,
        FaultConfig(
            noisy_clients=0.3, scaled_clients=0.1, sign_flipped_clients=0.2, noise_clients=0.1, sybil_clients=0.3
        ),
        seed=4,
    )

    kept = assign_faults(10, old, seed=4)
    assert all(f == k for f, k in zip(faults, kept, strict=True) if k != NO_FAULT)
    assert (faults.count(SIGN_FLIPPED), faults.count(NOISE), faults.count(SYBIL), faults.count(NO_FAULT)) == (
        2,
        1,
        3,
        0,
    )


def test_tamper_negates_sign_flippers_noises_to_the_honest_norm_and_gives_sybils_one_update() -> None:
    # prepare: sybils 1 and 3 trained [1, 2] and [3, 0], mean [2, 1]
    config = load_experiment(None, {"faults.sybil_scale": 2.0})
    updates = torch.tensor([[1.0, -2.0], [1.0, 2.0], [3.0, 4.0], [3.0, 0.0], [0.5, 0.5]])

    # execute
    sent = tamper(updates, (SIGN_FLIPPED, SYBIL, NOISE, SYBIL, NO_FAULT), config, round_number=1)

    # assert
    assert sent[0].tolist() == [-1.0, 2.0]
    assert sent[1].tolist() == [-4.0, -2.0] and sent[3].tolist() == [-4.0, -2.0]
    assert float(sent[2].norm()) == pytest.approx(5.0) and not torch.equal(sent[2], updates[2])
    assert sent[4].tolist() == [0.5, 0.5]


def test_tamper_zeroes_free_riders_and_scales_scaled_clients_only() -> None:
    # prepare
    config = load_experiment(None, {"faults.scale": 3.0, "faults.free_rider_mode": "zero"})
    updates = torch.tensor([[1.0, -2.0], [0.5, 0.5], [4.0, 1.0]])

    # execute
    sent = tamper(updates, (NO_FAULT, FREE_RIDER, SCALED), config, round_number=1)

    # assert
    assert torch.equal(sent, torch.tensor([[1.0, -2.0], [0.0, 0.0], [12.0, 3.0]]))
    assert torch.equal(updates[1], torch.tensor([0.5, 0.5]))  # the input is left alone


def test_a_disguised_free_rider_trains_honestly_until_its_round_then_resends_the_last_global_step_with_noise() -> None:
    # prepare: free riding from round 3, noise of 0.1 RMS of the step
    config = load_experiment(
        None, {"faults.free_rider_mode": "disguised", "faults.free_ride_from": 3, "faults.disguise_noise": 0.1}
    )
    updates = torch.tensor([[1.0, -2.0], [0.5, 0.5]])
    step = torch.full((1000,), 2.0)
    big = torch.ones(2, 1000)

    # execute
    before = tamper(updates, (NO_FAULT, FREE_RIDER), config, round_number=2, last_step=torch.tensor([9.0, 9.0]))
    resent = tamper(big, (NO_FAULT, FREE_RIDER), config, round_number=3, last_step=step)

    # assert: honest before round 3; then the step plus noise of RMS 0.2 (0.1 x the step's RMS of 2)
    assert torch.equal(before, updates)
    assert torch.equal(resent[0], big[0])
    assert float((resent[1] - step).pow(2).mean().sqrt()) == pytest.approx(0.2, rel=0.1)


def test_a_disguised_free_rider_sends_nothing_while_there_is_no_global_step_yet() -> None:
    config = load_experiment(None, {"faults.free_rider_mode": "disguised"})

    sent = tamper(torch.ones(2, 3), (NO_FAULT, FREE_RIDER), config, round_number=1, last_step=None)

    assert sent[1].tolist() == [0.0, 0.0, 0.0]


def test_noisy_clients_hold_the_requested_share_of_wrong_labels() -> None:
    config = load_experiment(None, {**TINY, "faults.noisy_clients": 1 / 3, "faults.noise_rate": 0.5})
    clean = build_federation(load_experiment(None, TINY))

    noisy = build_federation(config)

    victim = noisy.faults.index(NOISY)
    wrong = (noisy.clients[victim].labels != clean.clients[victim].labels).double().mean().item()
    assert wrong == pytest.approx(0.5, abs=1 / len(clean.clients[victim]))
    others = [i for i in range(3) if i != victim]
    assert all(torch.equal(noisy.clients[i].labels, clean.clients[i].labels) for i in others)


def test_an_unknown_strategy_flag_lists_the_valid_ones() -> None:
    result = CliRunner().invoke(cli, ["simulate", "--strategy", "fedmagic"])

    assert result.exit_code == 2
    assert "fedmagic" in result.output and "fedave" in result.output and "cgsv" in result.output


def test_the_attack_flags_reach_the_fault_section() -> None:
    flags = ["--sign-flipped-clients", "0.3", "--noise-clients", "0.3", "--sybil-clients", "0.5"]

    result = CliRunner().invoke(cli, ["simulate", *flags])  # refused before any data is read
    scaled = CliRunner().invoke(cli, ["simulate", "--sybil-clients", "0.2", "--sybil-scale", "-1"])

    assert isinstance(result.exception, ConfigError) and "add up to 1.1" in str(result.exception)
    assert isinstance(scaled.exception, ConfigError) and "sybil_scale=-1.0" in str(scaled.exception)


def test_a_label_flippers_model_is_rejected_for_predicting_worse_than_chance() -> None:
    """Its model learned y -> 9 - y: 1% on the validation set in round 1, where honest models score 16-32%."""
    settings = {
        **TINY,
        "clients": 5,
        "rounds": 1,
        "train_samples": 3000,
        "validation_samples": 500,
        "lr": 0.1,
        "momentum": 0.0,
        "batch_size": 10,
        "faults.flipped_clients": 0.2,
    }

    config = load_experiment(None, settings)
    without = dataclasses.replace(config.screening, min_chance_share=None)

    screened = run_experiment(config)
    unscreened = run_experiment(dataclasses.replace(config, screening=without))

    flipper = [c.fault for c in screened.clients].index("flipped")
    assert screened.rounds[0].accepted == tuple(i != flipper for i in range(5))
    assert screened.rounds[0].quality[flipper] == 0.0
    assert all(unscreened.rounds[0].accepted)  # no other rule stops it


def test_the_gradient_clip_flag_reaches_local_training_and_not_the_aggregation() -> None:
    refused = CliRunner().invoke(cli, ["simulate", "--max-grad-norm", "-1"])  # refused before any data is read
    tight = run_experiment(load_experiment(None, {**TINY, "rounds": 1, "max_grad_norm": 1e-3}))
    plain = run_experiment(load_experiment(None, {**TINY, "rounds": 1, "max_grad_norm": None}))

    assert isinstance(refused.exception, ConfigError) and "max_grad_norm must be" in str(refused.exception)
    assert tight.config.aggregation == plain.config.aggregation  # the update clip of robust aggregation is another
    # Steps of norm 1e-3 x lr barely move the initial model: its loss stays near ln 10, the unclipped run's falls.
    assert tight.rounds[0].test_loss == pytest.approx(math.log(10), abs=0.01)
    assert plain.rounds[0].test_loss < tight.rounds[0].test_loss - 0.03


def test_an_unknown_strategy_in_a_file_lists_the_valid_ones() -> None:
    with pytest.raises(ConfigError) as raised:
        run_experiment(load_experiment(None, {**TINY, "strategy": "fedmagic"}))

    assert "fedavg" in raised.value.hint


def test_an_unknown_dataset_lists_the_valid_ones() -> None:
    with pytest.raises(DataError) as raised:
        run_experiment(load_experiment(None, {**TINY, "dataset": "imagenet"}))

    assert "mnist" in raised.value.hint


def test_a_data_root_without_the_files_says_what_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEDCHAIN_CACHE_DIR", str(tmp_path / "cache"))  # no decompressed copy to fall back on
    (tmp_path / "empty").mkdir()

    with pytest.raises(DataError, match="files not found") as raised:
        build_federation(load_experiment(None, {**TINY, "data_root": str(tmp_path / "empty")}))

    assert "data-root" in raised.value.hint


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        (["--partition", "cla", "--classes-per-client", "11"], DataError, "11 distinct classes"),
        (["--strategy", "fedave", "--option", "beta=-1"], ConfigError, "beta=-1.0 must be positive"),
        (
            ["--strategy", "fedave", "--option", "quota_fractions=[0.1, 1]"],
            ConfigError,
            "2 quota_fractions for 3 clients",
        ),
    ],
)
def test_the_command_reports_a_set_up_error_without_drawing_a_progress_bar(
    args: list[str], error: type[Exception], message: str
) -> None:
    flags = [f"--{key.replace('_', '-')}={value}" for key, value in TINY.items() if key in ("clients", "rounds")]

    result = CliRunner().invoke(cli, ["simulate", *flags, *args])

    assert isinstance(result.exception, error)  # `fedchain` prints it as "error: ..." with its hint
    assert message in str(result.exception)
    assert result.output == ""  # no bar was started, not even an empty line


def test_more_classes_per_client_than_exist_is_refused() -> None:
    config = load_experiment(None, {**TINY, "partition": "cla", "classes_per_client": 11})

    with pytest.raises(DataError, match="11 distinct classes"):
        build_federation(config)


def test_class_imbalance_gives_client_j_of_ten_j_plus_one_classes() -> None:
    # prepare: 10 clients of 10 classes, 100 samples of each class
    labels = np.repeat(np.arange(10), 100)

    # execute
    parts = imbalanced_classes(labels, n_clients=10, num_classes=10, seed=3)

    # assert
    assert [len(np.unique(labels[p])) for p in parts] == list(range(1, 11))
    every = np.concatenate(parts)
    assert len(every) == len(np.unique(every))  # disjoint
    assert all(len(p) == 1000 // (2 * 10) for p in parts)  # 50 each: no class ran out here


def test_own_models_with_a_strategy_that_gives_no_models_is_refused() -> None:
    config = load_experiment(None, {**TINY, "strategy": "fedavg", "own_models": True})

    with pytest.raises(ConfigError, match="own_models needs a strategy that rewards in kind"):
        run_experiment(config)


def test_the_fair_protocol_trains_from_fedavgs_global_model_and_rewards_every_client_with_a_model_apart() -> None:
    # prepare: the same data and seed under fedavg and under the fair protocol
    config = load_experiment(None, {**TINY, "strategy": "fair", "standalone": True})
    federation = build_federation(config)

    # execute
    fair = run_experiment(config, federation=federation)
    fedavg = run_experiment(config.with_changes(strategy="fedavg"), federation=federation)

    # assert: rewards decoupled from training, so the global model is FedAvg's, round for round
    assert [r.test_accuracy for r in fair.rounds] == [r.test_accuracy for r in fedavg.rounds]
    rewards = present(fair.reward_accuracy)
    assert len(rewards) == 3 and max(rewards) <= fair.final_accuracy + 0.05  # no reward beats the whole update by much
    assert fair.fairness() is not None and fair.collaboration_gain() is not None
    assert all(0.0 <= c <= 1.0 for record in fair.rounds for c in record.contribution)  # each round's rescaled signal


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "killed"])
def test_a_stopped_run_keeps_its_rounds_and_the_same_command_goes_on(tmp_path: Path, stop: signal.Signals) -> None:
    # prepare: a run in its own process group, as Ctrl-C in a terminal reaches it
    args = [
        "simulate",
        "--rounds",
        "30",
        "--clients",
        "3",
        "--train-samples",
        "600",
        "--validation-samples",
        "100",
        "--test-samples",
        "100",
        "--engine",
        "sequential",
        "--threads",
        "1",
        "--no-plots",
        "-o",
        str(tmp_path),
    ]
    child = subprocess.Popen(
        [sys.executable, "-m", "fedchain.cli", "-v", *args],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        preexec_fn=interruptible_in_own_group,
    )
    assert child.stderr is not None
    for line in child.stderr:  # wait until two rounds are done
        if "round 2: test accuracy" in line:
            break

    # execute: stop it, then the same command again
    os.killpg(child.pid, stop)
    rest = child.stderr.read()
    child.wait(timeout=60)
    saved = json.loads((tmp_path / UNFINISHED_FILE).read_text())
    again = CliRunner().invoke(cli, [*args, "--json"])

    # assert: the finished rounds were on disk, numbered from 1; Ctrl-C also exits as an interrupt does, and says so
    numbers = [r["round"] for r in saved["rounds"]]
    assert len(numbers) >= 2 and numbers == list(range(1, len(numbers) + 1)) and len(numbers) < 30
    assert saved["config"]["rounds"] == 30
    if stop == signal.SIGINT:
        assert child.returncode == 130 and "aborted" in rest
        assert f"interrupted after round {numbers[-1]}" in rest and "the same command goes on" in rest
    else:
        assert child.returncode == -signal.SIGKILL
    # the second command went on from the saved rounds, which it kept as they were, and cleaned up
    assert again.exit_code == 0, again.output
    result = json.loads(again.stdout)
    assert [r["round"] for r in result["rounds"]] == list(range(1, 31))
    assert result["rounds"][: len(numbers)] == saved["rounds"]
    assert not (tmp_path / UNFINISHED_FILE).exists() and not (tmp_path / CHECKPOINT_FILE).exists()


def _simulate(out: Path, *flags: str) -> dict:
    args = [
        "simulate",
        "--clients",
        "3",
        "--rounds",
        "2",
        "--train-samples",
        "500",
        "--validation-samples",
        "100",
        "--test-samples",
        "100",
        "--engine",
        "sequential",
        "--threads",
        "1",
        "-o",
        str(out),
        "--json",
        *flags,
    ]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_a_run_of_other_settings_in_the_output_folder_is_kept_aside_not_overwritten(tmp_path: Path) -> None:
    # prepare: a finished run, and a stopped one (its unfinished rounds and checkpoint), both with lr 0.05
    finished = _simulate(tmp_path / "finished", "--lr", "0.05")
    stopped = tmp_path / "stopped"
    config = load_experiment(None, {**TINY, "output_dir": str(stopped)})

    def stop(record: RoundRecord) -> None:
        save_unfinished(config, [record])
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_experiment(config, checkpoint=stopped / CHECKPOINT_FILE, on_round=stop)
    assert (stopped / CHECKPOINT_FILE).exists()

    # execute: the same folders for runs with lr 0.1
    again = _simulate(tmp_path / "finished", "--lr", "0.1")
    restarted = _simulate(stopped, "--lr", "0.1")

    # assert: the new runs ran whole, and the earlier runs' files are in run.replaced-* folders
    assert again["config"]["lr"] == restarted["config"]["lr"] == 0.1 and len(restarted["rounds"]) == 2
    (kept,) = (tmp_path / "finished").glob("run.replaced-*")
    assert json.loads((kept / "metrics.json").read_text()) == finished
    assert {p.name for p in kept.iterdir()} >= {"metrics.json", "metrics.csv", "accuracy.png"}
    (kept_stopped,) = stopped.glob("run.replaced-*")
    assert {p.name for p in kept_stopped.iterdir()} == {UNFINISHED_FILE, CHECKPOINT_FILE}
    assert not (stopped / CHECKPOINT_FILE).exists()  # the finished run cleaned up its own


def test_a_run_of_the_same_settings_is_made_again_in_place(tmp_path: Path) -> None:
    first = _simulate(tmp_path, "--lr", "0.05")

    second = _simulate(tmp_path, "--lr", "0.05", "--engine", "auto")  # how it runs is not a setting

    assert not list(tmp_path.glob("run.replaced-*"))
    assert [r["test_accuracy"] for r in second["rounds"]] == [r["test_accuracy"] for r in first["rounds"]]


def test_fresh_starts_over_and_keeps_the_earlier_run_of_the_same_settings_aside(tmp_path: Path) -> None:
    first = _simulate(tmp_path, "--lr", "0.05")

    _simulate(tmp_path, "--lr", "0.05", "--fresh")

    (kept,) = tmp_path.glob("run.replaced-*")
    assert json.loads((kept / "metrics.json").read_text()) == first
    assert (tmp_path / "metrics.json").exists()


def test_without_an_output_folder_each_settings_get_their_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    args = [
        "simulate",
        "--clients",
        "3",
        "--rounds",
        "1",
        "--train-samples",
        "500",
        "--validation-samples",
        "100",
        "--test-samples",
        "100",
        "--engine",
        "sequential",
        "--threads",
        "1",
        "--no-plots",
        "--json",
    ]

    for seed in ("0", "1", "0"):
        assert CliRunner().invoke(cli, [*args, "--seed", seed]).exit_code == 0

    folders = sorted(p.name for p in (tmp_path / "runs" / "simulate").iterdir())
    assert len(folders) == 2 and all(name.startswith("fedavg-mnist-iid-") for name in folders)
    assert not list((tmp_path / "runs" / "simulate").glob("*/run.replaced-*"))  # nothing had to be moved aside
