"""``fedchain simulate``: one federated experiment in one process, without a chain.

Reads an experiment YAML file (see ``configs/``), applies the flags on top,
runs the rounds with a progress bar, writes ``metrics.json``,
``metrics.csv`` and PNG plots into the output folder, and prints a summary.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import click
import torch
import yaml
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from fedchain.console import machine_json, print_table
from fedchain.data.datasets import DATASETS
from fedchain.data.partition import PARTITION_KINDS
from fedchain.errors import ConfigError
from fedchain.experiments.checkpoint import CHECKPOINT_FILE
from fedchain.experiments.config import (
    DEFAULT_OUTPUT_DIR,
    ExperimentConfig,
    check_same_settings,
    load_experiment,
    settings_digest,
)
from fedchain.experiments.plots import PLOT_FILES, write_plots
from fedchain.experiments.progress import round_columns
from fedchain.experiments.results import METRICS_FILE, ExperimentResult, RoundRecord, write_metrics
from fedchain.experiments.runner import run_experiment
from fedchain.files import keep_aside, output_folder, write_atomic
from fedchain.fl import strategy_names
from fedchain.fl.aggregation import AGGREGATION_RULES
from fedchain.models.registry import MODELS
from fedchain.trainer.config import ENGINES

log = logging.getLogger(__name__)

#: Show one row per client in the final table up to this many clients.
MAX_CLIENT_ROWS = 20
#: What a run that did not finish (Ctrl-C, a killed process) leaves in its output folder.
UNFINISHED_FILE = "rounds-unfinished.json"


def _parse_options(pairs: tuple[str, ...]) -> dict[str, Any]:
    """``("gamma0=0.5", "tau=null")`` -> ``{"gamma0": 0.5, "tau": None}`` (values are YAML)."""
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--option {pair!r} is not KEY=VALUE", hint="e.g. --option gamma0=0.5")
        options[key.strip()] = yaml.safe_load(value)
    return options


def apply_threads(config: ExperimentConfig) -> None:
    """Set torch's thread count of this process when the config asks for one (the CLI owns the process)."""
    if config.threads is not None:
        torch.set_num_threads(config.threads)


def run_with_progress(config: ExperimentConfig, console: Console) -> ExperimentResult:
    """:func:`run_experiment` with a rich progress bar over the rounds (on ``console``).

    The bar starts once the experiment is set up, so an unknown name, a
    missing file or an impossible partition is reported without an empty bar.
    Every finished round is saved at once to :data:`UNFINISHED_FILE`, and the
    run's state to :data:`~fedchain.experiments.checkpoint.CHECKPOINT_FILE`
    every ``config.checkpoint_every`` rounds; the finished run removes both.
    A run stopped by Ctrl-C or killed keeps its rounds, and the same command
    goes on from its last checkpoint (:func:`keep_run_aside` first to start over).
    """
    progress = Progress(*round_columns(), console=console, transient=False)
    task = progress.add_task(config.strategy, total=config.rounds, note="acc -")
    done: list[RoundRecord] = []

    def advance(record: RoundRecord) -> None:
        done.append(record)
        save_unfinished(config, done)
        progress.update(task, advance=1, note=f"acc {100 * record.test_accuracy:.2f}%")

    checkpoint = config.output_dir / CHECKPOINT_FILE
    try:
        result = run_experiment(config, on_start=progress.start, on_round=advance, checkpoint=checkpoint)
        progress.update(task, total=len(result.rounds))
    except KeyboardInterrupt:
        if done:
            path = config.output_dir / UNFINISHED_FILE
            log.warning("interrupted after round %d: the rounds run are in %s", done[-1].round, path)
            if checkpoint.is_file():
                log.warning("the same command goes on from the last saved round (--fresh starts over)")
        raise
    finally:
        if progress.live.is_started:  # not when set-up failed (stopping would print an empty line)
            progress.stop()
    return result


#: What a run leaves in its output folder, finished or not.
RUN_FILES = (METRICS_FILE, "metrics.csv", *PLOT_FILES, UNFINISHED_FILE, CHECKPOINT_FILE)


def keep_run_aside(config: ExperimentConfig, *, fresh: bool = False) -> Path | None:
    """Move an earlier run's files out of ``config.output_dir``, unless it may stay; returns where they went.

    The folder is the run's: a finished run's metrics and plots would be
    overwritten, a stopped one's checkpoint refused. So the files of a run
    whose settings differ from ``config``'s (but for how it ran: engine,
    threads...), or of any run when ``fresh``, go into a ``run.replaced-UTCTIME``
    folder beside them, never deleted. A run of the same settings stays: a
    stopped one goes on, a finished one is made again. ``None`` when nothing moved.
    """
    folder = config.output_dir
    present = [folder / name for name in RUN_FILES if (folder / name).exists()]
    if not present or (not fresh and _same_settings(folder, config)):
        return None
    aside = folder / "run"
    aside.mkdir()
    for path in present:
        path.rename(aside / path.name)
    return keep_aside(aside)


def _same_settings(folder: Path, config: ExperimentConfig) -> bool:
    """Whether the run kept in ``folder`` (its metrics, else its unfinished rounds) has ``config``'s settings."""
    for name in (METRICS_FILE, UNFINISHED_FILE):
        if (folder / name).exists():
            try:
                kept = json.loads((folder / name).read_text(encoding="utf-8"))["config"]
                check_same_settings(kept, config, folder, hint="")
            except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError, ConfigError):
                return False
            return True
    return False  # only a checkpoint or plots: nothing says which settings made them


def save_finished(result: ExperimentResult, folder: Path, *, plots: bool = True) -> list[Path]:
    """Write a finished run's plots (when ``plots``) and metrics into ``folder``; returns their paths.

    The metrics go last, so a folder holding ``metrics.json`` holds the whole
    run; then what the run saved to go on after a stop is removed.
    """
    scores = result.fairness()
    paths = write_plots(result, folder, pearson=None if scores is None else scores[0]) if plots else []
    paths += write_metrics(result, folder)
    for name in (UNFINISHED_FILE, CHECKPOINT_FILE):
        (folder / name).unlink(missing_ok=True)
    return paths


def save_unfinished(config: ExperimentConfig, rounds: list[RoundRecord]) -> Path:
    """Save the config and the ``rounds`` finished so far to :data:`UNFINISHED_FILE` (atomically); returns its path.

    A long run that is stopped keeps what it measured; the full metrics
    (standalone and rewarded models, plots) exist only for a finished run.
    """
    path = config.output_dir / UNFINISHED_FILE
    data = {"config": config.to_dict(), "rounds": [record.to_dict() for record in rounds]}
    write_atomic(path, (machine_json(data) + "\n").encode())
    return path


def summary_table(result: ExperimentResult) -> Table:
    """The run at a glance: accuracy, rounds, time and fairness."""
    table = Table(title=f"{result.config.strategy} on {result.config.dataset} ({result.config.partition})")
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_row("rounds run", str(len(result.rounds)))
    table.add_row("final test accuracy", f"{100 * result.final_accuracy:.2f}%")
    table.add_row("best test accuracy", f"{100 * result.best_accuracy:.2f}%")
    if result.config.target_accuracy is not None:
        reached = "not reached" if result.rounds_to_target is None else str(result.rounds_to_target)
        table.add_row(f"rounds to {100 * result.config.target_accuracy:g}%", reached)
    scores = result.fairness()
    if scores is not None:
        table.add_row("Pearson(standalone, reward)", f"{scores[0]:.3f}")
    ranking = result.contribution_pearson()
    if ranking is not None:
        table.add_row("Pearson(standalone, mean contribution)", f"{ranking:.3f}")
    agreement, ceiling = result.standalone_agreement(), result.fairness_ceiling()
    if agreement is not None and ceiling is not None:
        table.add_row("standalone repeats' agreement (Pearson's ceiling)", f"{agreement:.3f} ({ceiling:.3f})")
    best = result.best_round_fairness()
    if best is not None:
        table.add_row("best round's Pearson (FedAVE authors' figure)", f"{best.pearson:.3f} (round {best.round})")
    if scores is not None:
        table.add_row("Jain index of reward accuracy", f"{scores[1]:.3f}")
    gain = result.collaboration_gain()
    if gain is not None:
        table.add_row("gain over standalone (mean, worst)", f"{100 * gain[0]:+.1f} pt, {100 * gain[1]:+.1f} pt")
    table.add_row("wall-clock time", f"{result.seconds:.1f} s")
    return table


def client_table(result: ExperimentResult) -> Table:
    """One row per client: size, fault, mean contribution and quality, rounds accepted, accuracies."""
    table = Table(title="clients")
    for column in ("client", "samples", "fault", "contribution", "quality", "accepted"):
        table.add_column(column, justify="left" if column == "fault" else "right")
    if result.standalone_accuracy is not None:
        table.add_column("standalone acc", justify="right")
    if result.reward_accuracy is not None:
        table.add_column("reward acc", justify="right")
    contribution, quality, accepted = result.mean_contribution(), result.mean_quality(), result.accepted_rounds()
    for client in result.clients:
        i = client.index
        row = [str(i), str(client.samples), client.fault, f"{contribution[i]:.4f}", f"{quality[i]:.3f}"]
        row.append(f"{accepted[i]}/{len(result.rounds)}")
        if result.standalone_accuracy is not None:
            row.append(f"{100 * result.standalone_accuracy[i]:.2f}%")
        if result.reward_accuracy is not None:
            row.append(f"{100 * result.reward_accuracy[i]:.2f}%")
        table.add_row(*row)
    return table


@click.command()
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Experiment YAML file (see configs/).",
)
@click.option("--dataset", type=click.Choice(sorted(DATASETS)), help="Dataset.")
@click.option(
    "--data-root",
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder with the dataset files [default: $FEDCHAIN_DATA_ROOT].",
)
@click.option("--model", type=click.Choice(sorted(MODELS)), help="Model.")
@click.option("--partition", type=click.Choice(PARTITION_KINDS), help="How the training data is split among clients.")
@click.option("--alpha", type=float, help="Dirichlet concentration of the dir partition.")
@click.option(
    "--classes-per-client",
    type=int,
    help="Classes per client of the cla partition (YAML null: client j holds 1..all classes, FedAVE's CLA).",
)
@click.option("--power", type=float, help="Power-law exponent of the pow partition.")
@click.option("--clients", type=int, help="Number of clients.")
@click.option("--rounds", type=int, help="Number of rounds (at most, with --target-accuracy).")
@click.option("--target-accuracy", type=float, help="Stop when the test accuracy reaches this fraction (e.g. 0.96).")
@click.option("--local-epochs", type=int, help="Local epochs per round.")
@click.option("--batch-size", type=int, help="Local mini-batch size.")
@click.option("--lr", type=float, help="Local learning rate.")
@click.option("--momentum", type=float, help="Local SGD momentum.")
@click.option(
    "--max-grad-norm",
    type=float,
    help="Clip each local step's gradient to this L2 norm [default: 5; 'max_grad_norm: null' in --config: no clip].",
)
@click.option("--strategy", type=click.Choice(strategy_names()), help="Aggregation and contribution strategy.")
@click.option(
    "--option",
    "strategy_options",
    multiple=True,
    metavar="KEY=VALUE",
    help="A strategy option (repeatable), e.g. gamma0=0.5.",
)
@click.option("--pruning", type=float, help="Sparsity of dynamic-topology pruning (0: dense).")
@click.option(
    "--own-models/--global-model",
    default=None,
    help="Clients keep their rewarded models [default: yes for fedfaim, fedave].",
)
@click.option("--noisy-clients", type=float, help="Fraction of clients with noisy labels.")
@click.option("--noise-rate", type=float, help="Fraction of a noisy client's labels made wrong.")
@click.option("--flipped-clients", type=float, help="Fraction of clients with flipped labels.")
@click.option("--free-riders", type=float, help="Fraction of free-riding clients.")
@click.option(
    "--free-rider-mode",
    type=click.Choice(["zero", "random", "disguised"]),
    help="What a free rider sends: nothing, noise, or the last global step plus noise (disguised).",
)
@click.option("--disguise-noise", type=float, help="A disguised free rider's noise, in RMS of the step it resends.")
@click.option("--free-ride-from", type=int, help="First round in which free riders free-ride (honest before).")
@click.option("--scaled-clients", type=float, help="Fraction of clients that scale their update.")
@click.option("--scale", type=float, help="Factor of a scaled client's update.")
@click.option("--sign-flipped-clients", type=float, help="Fraction of clients that send minus their update.")
@click.option("--noise-clients", type=float, help="Fraction of clients that send noise of their update's norm.")
@click.option(
    "--sybil-clients", type=float, help="Fraction of colluding Sybils, all sending one update against the others."
)
@click.option("--sybil-scale", type=float, help="Factor of the Sybils' update: minus this times their honest mean.")
@click.option(
    "--screening/--no-screening", default=None, help="Screen every round's updates before the strategy [default: yes]."
)
@click.option(
    "--aggregation", type=click.Choice(AGGREGATION_RULES), help="How accepted updates are combined [default: mean]."
)
@click.option(
    "--trim-fraction", type=float, help="trimmed_mean: fraction cut from each end of every coordinate [default: 0.2]."
)
@click.option(
    "--quality-floor",
    type=float,
    help="Least quality of an accepted update; 0 is the seed's measure [default: 0.2].",
)
@click.option(
    "--early-floor/--no-early-floor",
    default=None,
    help="Raise the floor of the early rounds so that one poor round removes no client whose earlier rounds "
    "reached q_min [default: yes].",
)
@click.option(
    "--data-credit",
    type=float,
    help="Contribution strategies: the most a client with less than the mean data has its quality multiplied by "
    "(mean / its data); 1 is the contribution as it is [default: 4].",
)
@click.option(
    "--quality-grace",
    type=click.IntRange(min=0),
    help="Poor rounds per client scored at q_min instead of below it, each only after a round that reached q_min; "
    "0 is the seed's rule [default: 2].",
)
@click.option("--krum-byzantine", type=int, help="multi_krum: attackers tolerated (f) [default: 3].")
@click.option("--krum-keep", type=int, help="multi_krum: updates averaged (1: Krum) [default: all but f].")
@click.option(
    "--clip-norm",
    type=float,
    help="Scale every accepted update down to at most this norm first [default: no clipping].",
)
@click.option("--epsilon", type=float, help="Privacy budget of the local noise on client data.")
@click.option("--train-samples", type=int, help="Use only this many training samples.")
@click.option("--test-samples", type=int, help="Use only this many test samples.")
@click.option("--validation-samples", type=int, help="Training samples held out as the aggregator's validation set.")
@click.option("--standalone/--no-standalone", default=None, help="Also train every client alone (fairness figures).")
@click.option(
    "--standalone-repeats",
    type=click.IntRange(min=1),
    help="Train every client alone this many times with other seeds; the reference is their mean.",
)
@click.option(
    "--fairness-every",
    type=int,
    help="Test every client's rewarded model every N rounds too (fairness per round; 0: last round only).",
)
@click.option("--seed", type=int, help="Seed of the run.")
@click.option("--engine", type=click.Choice(ENGINES), help="Training engine.")
@click.option("--device", help="Torch device (auto, cpu, cuda, cuda:1).")
@click.option("--threads", type=int, help="Torch threads of the main process (1 on a busy shared CPU).")
@click.option(
    "-o",
    "--output-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder of the run: metrics, plots, checkpoint (another run of other settings there is moved aside) "
    "[default: runs/simulate/STRATEGY-DATASET-PARTITION-DIGEST, DIGEST naming the settings].",
)
@click.option("--plots/--no-plots", default=None, help="Write PNG plots.")
@click.option(
    "--checkpoint-every",
    type=click.IntRange(min=0),
    help="Save the run's state every N rounds, so that the same command goes on after a stop (0: never) [default: 1].",
)
@click.option(
    "--fresh",
    is_flag=True,
    help="Start over: a stopped run's files in the output folder are kept aside, not gone on from.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON instead of tables.")
def simulate(
    config_path: Path | None,
    strategy_options: tuple[str, ...],
    pruning: float | None,
    fresh: bool,
    as_json: bool,
    **flags: Any,
) -> None:
    """Run a federated experiment in one process, without a chain.

    \b
    Examples:
      fedchain simulate --config configs/mnist-fedavg-iid.yaml
      fedchain simulate --config configs/mnist-fedave-dir.yaml --rounds 5 --seed 1
      fedchain simulate --strategy cgsv --clients 20 --noisy-clients 0.3 --noise-rate 0.5

    Writes metrics.json, metrics.csv and plots (accuracy.png, contribution.png
    and, with rewards in kind and --standalone, reward_vs_standalone.png;
    with --fairness-every too, fairness_by_round.png).

    A run stopped by Ctrl-C or killed keeps its finished rounds in
    rounds-unfinished.json and its state in checkpoint.safetensors: the same
    command goes on after the last saved round (--fresh starts over).
    """
    renames = {
        "noisy_clients": "faults.noisy_clients",
        "noise_rate": "faults.noise_rate",
        "flipped_clients": "faults.flipped_clients",
        "free_riders": "faults.free_riders",
        "free_rider_mode": "faults.free_rider_mode",
        "disguise_noise": "faults.disguise_noise",
        "free_ride_from": "faults.free_ride_from",
        "scaled_clients": "faults.scaled_clients",
        "scale": "faults.scale",
        "sign_flipped_clients": "faults.sign_flipped_clients",
        "noise_clients": "faults.noise_clients",
        "sybil_clients": "faults.sybil_clients",
        "sybil_scale": "faults.sybil_scale",
        "screening": "screening.enabled",
        "aggregation": "aggregation.rule",
        "trim_fraction": "aggregation.trim_fraction",
        "krum_byzantine": "aggregation.krum_byzantine",
        "krum_keep": "aggregation.krum_keep",
        "clip_norm": "aggregation.clip_norm",
    }
    overrides = {renames.get(key, key): value for key, value in flags.items()}
    overrides["pruning.sparsity"] = pruning
    overrides["strategy_options"] = _parse_options(strategy_options) or None
    config = load_experiment(config_path, overrides)
    if config.output_dir == DEFAULT_OUTPUT_DIR:  # no folder named: one of these settings' own
        name = f"{config.strategy}-{config.dataset}-{config.partition}-{settings_digest(config)}"
        config = config.with_changes(output_dir=DEFAULT_OUTPUT_DIR / name)
    apply_threads(config)
    with output_folder(config.output_dir, option="--output-dir (or output_dir: in the config file)"):
        aside = keep_run_aside(config, fresh=fresh)
        if aside is not None:
            why = "--fresh" if fresh else "the folder held a run of other settings"
            log.warning("%s: the earlier run's files in %s are kept in %s", why, config.output_dir, aside)
        result = run_with_progress(config, Console(stderr=True))
        paths = save_finished(result, config.output_dir, plots=config.plots)
    for path in paths:
        log.info("wrote %s", path)
    if as_json:
        click.echo(machine_json(result.to_dict()))
        return
    out = Console()
    out.print(summary_table(result))
    if len(result.clients) <= MAX_CLIENT_ROWS:
        print_table(out, client_table(result), named=True)
    out.print(f"metrics and plots in {config.output_dir}")
