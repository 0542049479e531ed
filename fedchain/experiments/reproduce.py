"""``fedchain reproduce``: the papers' tables on real MNIST, as experiments that print a table.

* ``rounds-to-accuracy``: rounds until the global LeNet-5 reaches 96% test
  accuracy with fedavg, quality (Tian eq. 19) and cgsv, 100 clients, on clean
  IID data and with 30% of the clients holding 50% noisy labels (Tian et al.
  2023, Table 4: FedAvg 20 rounds, theirs 16).
* ``fairness``: Pearson(standalone accuracy, accuracy of the rewarded model)
  for fedfaim and fedave, 10 clients, POW, CLA and DIR partitions, mean and
  standard deviation over seeds (FedAVE reports above 0.84).
* ``robustness``: every strategy against the standard attacks (scaling, sign
  flip, noise, free riding, label flipping, colluding Sybils), 10 clients,
  IID and DIR: accuracy, whether the attackers are caught, and what the
  chain's mechanism would pay them (:mod:`fedchain.experiments.robustness`).

These are experiments, not tests: they take minutes to hours and print what
they measured. Options shrink them (fewer clients, rounds, seeds or samples).
"""

from __future__ import annotations

import contextlib
import logging
import math
import statistics
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from fedchain.console import machine_json, print_table, stdout_console
from fedchain.errors import ConfigError
from fedchain.experiments.checkpoint import CHECKPOINT_FILE
from fedchain.experiments.config import ExperimentConfig, FaultConfig, load_experiment, settings_digest
from fedchain.experiments.federation import Federation, build_federation
from fedchain.experiments.progress import RunBars, RunObserver
from fedchain.experiments.results import ExperimentResult, read_result
from fedchain.experiments.robustness import (
    ATTACKS,
    NO_ATTACK,
    ChainPay,
    attack_faults,
    attackers,
    chain_pay,
    detection,
    mechanism_params,
    min_quality,
)
from fedchain.experiments.runner import run_experiment
from fedchain.experiments.simulate import apply_threads, save_finished
from fedchain.files import keep_aside, output_folder
from fedchain.fl.reputation import MechanismParams
from fedchain.fl.strategies.fedfaim import SEED_QUALITY_CHECK
from fedchain.taskspec import REWARD_IN_KIND
from fedchain.trainer import WorkerPool
from fedchain.trainer.config import ENGINES

log = logging.getLogger(__name__)

#: Tian et al. 2023, Table 4: rounds to 96% on MNIST.
TIAN_TARGET_ACCURACY = 0.96
#: The noisy setting: 30% of the clients hold labels of which 50% are wrong.
NOISY_SETTING = FaultConfig(noisy_clients=0.3, noise_rate=0.5)
#: Settings of the rounds-to-accuracy table.
SETTINGS: dict[str, FaultConfig] = {"clean": FaultConfig(), "noisy": NOISY_SETTING}
#: The FedAVE fairness target of this project (the paper reports above 0.84).
FAIRNESS_TARGET = 0.95


@dataclass(frozen=True)
class RoundsRow:
    """One cell of the rounds-to-accuracy table."""

    setting: str
    strategy: str
    #: First round at the target; None if ``max_rounds`` did not reach it.
    rounds: int | None
    rounds_run: int
    best_accuracy: float
    seconds: float


@dataclass(frozen=True)
class FairnessRun:
    """One (partition, strategy, seed) run of the fairness table."""

    partition: str
    strategy: str
    seed: int
    #: Pearson(standalone accuracy, rewarded model accuracy): the fairness figure.
    pearson: float
    #: Pearson(standalone accuracy, mean contribution): whether the strategy ranks the clients right.
    contribution_pearson: float
    jain: float
    final_accuracy: float
    seconds: float
    #: Mean over clients of rewarded minus standalone accuracy: what collaborating earned.
    gain_mean: float
    #: The smallest client gain (negative: that client ended below its standalone model).
    gain_worst: float
    #: The highest Pearson of any tested round (how the FedAVE authors' code reports it);
    #: NaN unless rewarded models were tested per round (``fairness_every``).
    best_round_pearson: float = math.nan
    #: Mean client gain over standalone at that best round (NaN when not tested per round).
    best_round_gain_mean: float = math.nan
    #: Mean Pearson between repeats of the standalone models (NaN with one repeat).
    reference_agreement: float = math.nan
    #: The Pearson that the reference's own noise allows (NaN with one repeat).
    fairness_ceiling: float = math.nan


@dataclass(frozen=True)
class FairnessRow:
    """Mean and standard deviation over seeds of one (partition, strategy)."""

    partition: str
    strategy: str
    pearson_mean: float
    pearson_std: float
    contribution_pearson_mean: float
    jain_mean: float
    accuracy_mean: float
    seeds: int
    #: Mean over seeds of the mean client gain (rewarded minus standalone accuracy).
    gain_mean: float
    #: The worst client gain over all seeds.
    gain_worst: float
    #: Mean over seeds of the best round's Pearson (NaN when not tested per round).
    best_round_pearson_mean: float = math.nan
    #: Mean over seeds of the mean client gain at each seed's best round.
    best_round_gain_mean: float = math.nan
    #: Mean over seeds of the standalone repeats' agreement (NaN with one repeat).
    reference_agreement_mean: float = math.nan
    #: Mean over seeds of the fairness ceiling (NaN with one repeat).
    fairness_ceiling_mean: float = math.nan


#: Where a command keeps its series without ``-o``: one folder per table and settings.
REPRODUCE_ROOT = Path("runs") / "reproduce"


def default_output_dir(table: str, base: ExperimentConfig) -> Path:
    """``runs/reproduce/TABLE-DIGEST``, DIGEST naming ``base``'s settings (but for how it runs).

    The same command finds its earlier runs there and goes on from them; a
    command with other settings gets a folder of its own, so nothing is refused
    or overwritten.
    """
    return REPRODUCE_ROOT / f"{table}-{settings_digest(base)}"


@contextlib.contextmanager
def series_folder(table: str, base: ExperimentConfig, output_dir: Path | None, *, fresh: bool) -> Iterator[Path]:
    """Where a command keeps its series while it runs: ``output_dir``, else :func:`default_output_dir`.

    With ``fresh`` the folder's earlier runs are renamed aside (never deleted) so
    that every run is made again. A folder the command created and left empty
    (it failed before its first run began) is removed when the command ends.
    """
    folder = output_dir or default_output_dir(table, base)
    if fresh:
        aside = keep_aside(folder)
        if aside is not None:
            log.warning("--fresh: the earlier runs in %s are kept in %s", folder, aside)
    with output_folder(folder, option="--output-dir") as kept:
        yield kept


@contextlib.contextmanager
def _say_what_is_kept(output_dir: Path) -> Iterator[None]:
    """On Ctrl-C, say where the finished runs are and how to go on from them."""
    try:
        yield
    except KeyboardInterrupt:
        log.warning("stopped; the runs so far are in %s: the same command goes on from them", output_dir)
        raise


def _start(
    config: ExperimentConfig, name: str, label: str, note: str, *, output_dir: Path | None, observer: RunObserver
) -> ExperimentResult | None:
    """Report run ``label`` started; its result if an earlier invocation finished it in ``output_dir/name``.

    A series stopped half-way (Ctrl-C, a killed process, a reboot) and started
    again with the same output folder reads its finished runs back instead of
    making them again, and the stopped run goes on from its checkpoint;
    :func:`read_result` refuses a kept run of other settings.
    """
    folder = None if output_dir is None else output_dir / name
    kept = None if folder is None else read_result(folder, config)
    if kept is not None:
        note = "read back from an earlier invocation"
    elif folder is not None and (folder / CHECKPOINT_FILE).exists():
        note = "going on from the checkpoint of an earlier invocation"
    observer.run_started(label, config.rounds, note)
    if kept is not None:
        log.info("%s: finished by an earlier invocation, read back from %s", label, folder)
    return kept


def _checkpoint(output_dir: Path | None, name: str) -> Path | None:
    """Where run ``name`` saves its state while it runs, so that a stop mid-run loses no round."""
    return None if output_dir is None else output_dir / name / CHECKPOINT_FILE


def _save(result: ExperimentResult, output_dir: Path | None, name: str) -> None:
    """Write one run's plots and metrics into ``output_dir/name`` (nothing without an output folder)."""
    if output_dir is not None:
        save_finished(result, output_dir / name)


class _Split:
    """The data of one setting of a series: built when its first run needs it, then shared by the others."""

    def __init__(self, config: ExperimentConfig) -> None:
        self.config = config
        self._federation: Federation | None = None

    def federation(self) -> Federation:
        if self._federation is None:
            self._federation = build_federation(self.config)
        return self._federation


def _run_or_read(
    run_config: ExperimentConfig,
    split: _Split,
    name: str,
    label: str,
    note: str = "",
    *,
    pool: WorkerPool,
    output_dir: Path | None,
    observer: RunObserver,
    standalone_runs: Sequence[Sequence[float]] | None = None,
) -> ExperimentResult:
    """Run ``run_config`` on ``split``'s data into ``output_dir/name``, or read it back if an earlier invocation
    finished it (:func:`_start`); a stopped run goes on from its checkpoint."""
    result = _start(run_config, name, label, note, output_dir=output_dir, observer=observer)
    if result is None:
        result = run_experiment(
            run_config,
            federation=split.federation(),
            pool=pool,
            checkpoint=_checkpoint(output_dir, name),
            standalone_runs=standalone_runs,
            on_start=observer.run_set_up,
            on_round=observer.round_done,
        )
        _save(result, output_dir, name)
    return result


def rounds_to_accuracy(
    base: ExperimentConfig,
    strategies: Sequence[str],
    settings: Sequence[str],
    *,
    output_dir: Path | None = None,
    observer: RunObserver | None = None,
) -> list[RoundsRow]:
    """Rounds to ``base.target_accuracy`` for every (setting, strategy); each setting's data split is shared."""
    observer = observer or RunObserver()
    rows = []
    with WorkerPool() as pool:
        for setting in settings:
            split = _Split(base.with_changes(faults=SETTINGS[setting], stop_at_target=True))
            for strategy in strategies:
                label, name = f"{setting} {strategy}", f"{setting}-{strategy}"
                run_config = split.config.with_changes(strategy=strategy)
                result = _run_or_read(
                    run_config, split, name, label, pool=pool, output_dir=output_dir, observer=observer
                )
                rows.append(
                    RoundsRow(
                        setting,
                        strategy,
                        result.rounds_to_target,
                        len(result.rounds),
                        result.best_accuracy,
                        result.seconds,
                    )
                )
                observer.run_done(label, result)
    return rows


#: Label of the fedave runs whose quotas come from the measured standalone accuracies.
ORACLE = "fedave-oracle"


def oracle_quota_fractions(standalone: Sequence[float], floor: float) -> tuple[float, ...]:
    """Reward quotas from the true ranking: ``floor ** (1 - z_i)``, z the standalone accuracy rescaled to [0, 1].

    The least accurate client alone gets ``floor`` of every layer's update, the most
    accurate all of it, and the quota grows geometrically in between (the accuracy a
    quota buys grows about with its logarithm). Equal standalone accuracies: all 1.
    """
    if not 0.0 < floor <= 1.0:
        raise ConfigError(f"oracle floor {floor} must lie in (0, 1]", hint="e.g. --oracle-floor 0.05")
    low, high = min(standalone), max(standalone)
    if high == low:
        return tuple(1.0 for _ in standalone)
    return tuple(floor ** (1 - (s - low) / (high - low)) for s in standalone)


def _as_in_seed(strategy: str, config: ExperimentConfig) -> dict[str, Any]:
    """The config's strategy options, with fedfaim's quality check the seed's plain comparison unless it names
    another: the fairness table reproduces the papers (the product's default tolerates 2 standard errors)."""
    if strategy == "fedfaim":
        return {**SEED_QUALITY_CHECK, **config.strategy_options}
    return dict(config.strategy_options)


def fairness_runs(
    base: ExperimentConfig,
    strategies: Sequence[str],
    partitions: Sequence[str],
    seeds: Sequence[int],
    *,
    oracle_floor: float | None = None,
    output_dir: Path | None = None,
    observer: RunObserver | None = None,
) -> list[FairnessRun]:
    """Every (partition, seed, strategy) run; standalone accuracies are computed once per (partition, seed).

    With ``oracle_floor``, every (partition, seed) also runs fedave with
    :func:`oracle_quota_fractions` of the standalone accuracies (label :data:`ORACLE`):
    what the rewards in kind reach when the ranking is perfect.
    """
    if oracle_floor is not None and not strategies:
        raise ConfigError(
            "the oracle run takes its quotas from standalone accuracies measured by a strategy's run",
            hint="run at least one strategy with it, e.g. --strategies fedave --oracle-floor 0.05",
        )
    observer = observer or RunObserver()
    runs = []
    labels = [*strategies, *([ORACLE] if oracle_floor is not None else [])]
    with WorkerPool() as pool:
        for partition in partitions:
            for seed in seeds:
                config = base.with_changes(partition=partition, seed=seed, standalone=True)
                split = _Split(config)
                first_run: ExperimentResult | None = None  # its standalone models serve every strategy
                for strategy in labels:
                    if strategy == ORACLE:
                        assert first_run is not None and first_run.standalone_accuracy is not None
                        assert oracle_floor is not None
                        quotas = list(oracle_quota_fractions(first_run.standalone_accuracy, oracle_floor))
                        options = {**config.strategy_options, "quota_fractions": quotas}
                        run_config = config.with_changes(strategy="fedave", strategy_options=options)
                    else:
                        run_config = config.with_changes(
                            strategy=strategy, strategy_options=_as_in_seed(strategy, config)
                        )
                    label, name = f"{partition} seed {seed} {strategy}", f"{partition}-seed{seed}-{strategy}"
                    note = "every client trained alone first" if first_run is None else ""
                    result = _run_or_read(
                        run_config,
                        split,
                        name,
                        label,
                        note,
                        pool=pool,
                        output_dir=output_dir,
                        observer=observer,
                        standalone_runs=None if first_run is None else first_run.standalone_runs,
                    )
                    first_run = first_run or result
                    scores = result.fairness()
                    if scores is None and run_config.strategy in REWARD_IN_KIND:
                        raise ConfigError(
                            f"strategy {strategy!r} gave no rewarded models, so it has no fairness figure",
                            hint="run it with standalone models and at least two clients",
                        )
                    scores = scores or (math.nan, math.nan)  # a strategy without rewards: its global model only
                    ranking = result.contribution_pearson()
                    gain = result.collaboration_gain() or (math.nan, math.nan)
                    best = result.best_round_fairness()
                    runs.append(
                        FairnessRun(
                            partition,
                            strategy,
                            seed,
                            pearson=scores[0],
                            contribution_pearson=math.nan if ranking is None else ranking,
                            jain=scores[1],
                            final_accuracy=result.final_accuracy,
                            seconds=result.seconds,
                            gain_mean=gain[0],
                            gain_worst=gain[1],
                            best_round_pearson=math.nan if best is None else best.pearson,
                            best_round_gain_mean=math.nan if best is None else best.gain_mean,
                            reference_agreement=_or_nan(result.standalone_agreement()),
                            fairness_ceiling=_or_nan(result.fairness_ceiling()),
                        )
                    )
                    done = f"Pearson {scores[0]:.3f}" if run_config.strategy in REWARD_IN_KIND else "no rewards"
                    observer.run_done(f"{label}: {done}", result)
    return runs


def global_gap(rows: Sequence[FairnessRow], reference: str = "fedavg") -> dict[tuple[str, str], float]:
    """Every row's mean global accuracy minus ``reference``'s on the same partition, by (partition, strategy).

    Rows of a partition without a ``reference`` row are left out.
    """
    references = {row.partition: row.accuracy_mean for row in rows if row.strategy == reference}
    return {
        (row.partition, row.strategy): row.accuracy_mean - references[row.partition]
        for row in rows
        if row.partition in references
    }


def summarise_fairness(runs: Sequence[FairnessRun]) -> list[FairnessRow]:
    """Mean and (sample) standard deviation of every (partition, strategy) over its seeds, in first-seen order."""
    groups: dict[tuple[str, str], list[FairnessRun]] = {}
    for run in runs:
        groups.setdefault((run.partition, run.strategy), []).append(run)
    rows = []
    for (partition, strategy), members in groups.items():
        pearsons = [m.pearson for m in members]
        rows.append(
            FairnessRow(
                partition=partition,
                strategy=strategy,
                pearson_mean=statistics.fmean(pearsons),
                pearson_std=_sample_std(pearsons),
                contribution_pearson_mean=statistics.fmean(m.contribution_pearson for m in members),
                jain_mean=statistics.fmean(m.jain for m in members),
                accuracy_mean=statistics.fmean(m.final_accuracy for m in members),
                seeds=len(members),
                gain_mean=statistics.fmean(m.gain_mean for m in members),
                gain_worst=min(m.gain_worst for m in members),
                best_round_pearson_mean=statistics.fmean(m.best_round_pearson for m in members),
                best_round_gain_mean=statistics.fmean(m.best_round_gain_mean for m in members),
                reference_agreement_mean=statistics.fmean(m.reference_agreement for m in members),
                fairness_ceiling_mean=statistics.fmean(m.fairness_ceiling for m in members),
            )
        )
    return rows


def _sample_std(values: Sequence[float]) -> float:
    """The sample standard deviation; 0 for one value, NaN when any value is NaN (a row without rewards)."""
    if any(math.isnan(v) for v in values):
        return math.nan
    return statistics.stdev(values) if len(values) > 1 else 0.0


def _figure(value: float, form: str) -> str:
    """``value`` written with ``form``, or a dash when it is NaN (a row without rewards has no fairness figures)."""
    return "-" if math.isnan(value) else form.format(value)


def _or_nan(value: float | None) -> float:
    return math.nan if value is None else value


def _names(_ctx: click.Context, param: click.Parameter, value: str) -> list[str]:
    """A comma-separated option as a list of names (a click callback); one naming nothing is refused."""
    names = [item.strip() for item in value.split(",") if item.strip()]
    if not names:
        raise click.BadParameter("names nothing: give one or more names, comma-separated", param=param)
    return names


_common = [
    click.option(
        "--config",
        "config_path",
        type=click.Path(dir_okay=False, path_type=Path),
        help="YAML file with settings to start from.",
    ),
    click.option(
        "--data-root",
        type=click.Path(file_okay=False, path_type=Path),
        help="Folder with the dataset files [default: $FEDCHAIN_DATA_ROOT].",
    ),
    click.option("--clients", type=int, help="Number of clients."),
    click.option("--train-samples", type=int, help="Use only this many MNIST training samples (shrinks the run)."),
    click.option("--test-samples", type=int, help="Use only this many test samples."),
    click.option(
        "--validation-samples", type=int, help="Training samples held out as the aggregator's validation set."
    ),
    click.option("--lr", type=float, help="Local learning rate."),
    click.option("--batch-size", type=int, help="Local mini-batch size."),
    click.option("--local-epochs", type=int, help="Local epochs per round."),
    click.option("--engine", type=click.Choice(ENGINES), help="Training engine."),
    click.option("--threads", type=int, help="Torch threads of the main process (1 on a busy shared CPU)."),
    click.option(
        "-o",
        "--output-dir",
        type=click.Path(file_okay=False, path_type=Path),
        help="Keep every run's metrics, plots and checkpoint here [default: runs/reproduce/TABLE-DIGEST, "
        "DIGEST naming the settings]; a stopped series started again goes on where it stopped.",
    ),
    click.option(
        "--fresh",
        is_flag=True,
        help="Make every run again; the folder's earlier runs are kept aside (FOLDER.replaced-UTCTIME).",
    ),
    click.option("--json", "as_json", is_flag=True, help="Print the table as JSON."),
]


#: Width of the tables when stdout is not a terminal (rich would squeeze them into 80 columns).
PIPED_WIDTH = 160


def _with_common(command: Callable) -> Callable:
    for option in reversed(_common):
        command = option(command)
    return command


@click.group()
def reproduce() -> None:
    """Reproduce the papers' tables on real MNIST (experiments that print a table, not tests)."""


#: The Tian seed's setting. The seed states LeNet, MNIST, 100 clients and the
#: 96% target but not the learning rate, batch size or local epochs; these are
#: FedAvg's MNIST values (McMahan et al. 2017: E = 1, B = 10) with plain SGD at
#: lr 0.05, with which one centralised LeNet-5 run of 60 steps per "round"
#: reached 96% after 25 rounds on this data.
ROUNDS_DEFAULTS: dict[str, Any] = {
    "dataset": "mnist",
    "model": "lenet5",
    "partition": "iid",
    "clients": 100,
    "rounds": 40,
    "target_accuracy": TIAN_TARGET_ACCURACY,
    "local_epochs": 1,
    "batch_size": 10,
    "lr": 0.05,
    "momentum": 0.0,
    "validation_samples": 1000,
    "seed": 0,
}


@reproduce.command("rounds-to-accuracy")
@_with_common
@click.option("--max-rounds", type=int, help=f"Give up after this many rounds [default: {ROUNDS_DEFAULTS['rounds']}].")
@click.option("--target", type=float, help=f"Target test accuracy [default: {TIAN_TARGET_ACCURACY}].")
@click.option(
    "--strategies",
    default="fedavg,quality,cgsv",
    show_default=True,
    callback=_names,
    help="Comma-separated strategies.",
)
@click.option(
    "--settings",
    default="clean,noisy",
    show_default=True,
    callback=_names,
    help="clean and/or noisy (30% clients, 50% noisy labels).",
)
@click.option("--seed", type=int, help="Seed of the data split and the initial model.")
def rounds_to_accuracy_command(
    config_path: Path | None,
    output_dir: Path | None,
    fresh: bool,
    as_json: bool,
    max_rounds: int | None,
    target: float | None,
    strategies: list[str],
    settings: list[str],
    **flags: Any,
) -> None:
    """Rounds to 96% test accuracy: fedavg, quality, cgsv; LeNet-5, 100 clients (Tian et al. 2023, Table 4)."""
    unknown = sorted(set(settings) - set(SETTINGS))
    if unknown:
        raise click.BadParameter(
            f"unknown setting(s) {', '.join(unknown)}; use {', '.join(SETTINGS)}", param_hint="--settings"
        )
    flags.update(rounds=max_rounds, target_accuracy=target)
    base = load_experiment(config_path, flags, defaults=ROUNDS_DEFAULTS)
    target_accuracy = base.target_accuracy
    if target_accuracy is None:
        raise click.UsageError(
            "rounds to what? The config sets target_accuracy to null; give --target 0.96 or a number there"
        )
    apply_threads(base)
    began = time.perf_counter()
    with (
        series_folder("rounds-to-accuracy", base, output_dir, fresh=fresh) as output_dir,
        _say_what_is_kept(output_dir),
        RunBars(Console(stderr=True), len(settings) * len(strategies)) as bars,
    ):
        rows = rounds_to_accuracy(base, strategies, settings, output_dir=output_dir, observer=bars)
    if as_json:
        click.echo(machine_json([row.__dict__ for row in rows]))
        return
    table = Table(title=f"rounds to {100 * target_accuracy:g}% test accuracy, MNIST, LeNet-5, {base.clients} clients")
    for column in ("setting", "strategy", "rounds", "best accuracy", "time"):
        table.add_column(column, justify="left" if column in ("setting", "strategy") else "right")
    for row in rows:
        rounds = str(row.rounds) if row.rounds is not None else f">{row.rounds_run}"
        table.add_row(row.setting, row.strategy, rounds, f"{100 * row.best_accuracy:.2f}%", f"{row.seconds:.0f} s")
    out = stdout_console(PIPED_WIDTH)
    print_table(out, table, labels=2)
    out.print(
        f"paper (Tian et al. 2023, Table 4, clean IID): FedAvg 20 rounds, theirs 16; total {time.perf_counter() - began:.0f} s"
    )
    out.print(f"every run's metrics and plots in {output_dir}")


#: FedAVE's fairness setting: 10 clients on MNIST, LeNet-5. The seed does not
#: give the data size. 6,000 training samples, 1,000 of them held out as the
#: validation set, leave the clients 500 each on average: a few hundred per
#: client, the scale of the collaborative-fairness experiments FedAVE compares
#: with (CFFL, CGSV). --train-samples changes it.
FAIRNESS_DEFAULTS: dict[str, Any] = {
    "dataset": "mnist",
    "model": "lenet5",
    "clients": 10,
    "train_samples": 6000,
    "rounds": 30,
    "local_epochs": 1,
    "batch_size": 32,
    "lr": 0.1,
    "alpha": 0.5,
    "classes_per_client": None,
    "validation_samples": 1000,
}


@reproduce.command("fairness")
@_with_common
@click.option("--rounds", type=int, help=f"Rounds per run [default: {FAIRNESS_DEFAULTS['rounds']}].")
@click.option("--seeds", type=click.IntRange(min=1), default=3, show_default=True, help="Number of seeds (0, 1, ...).")
@click.option(
    "--strategies",
    default="fedfaim,fedave,fair,fedavg",
    show_default=True,
    callback=_names,
    help="Comma-separated strategies; one without rewards in kind (fedavg) gives its global accuracy only.",
)
@click.option(
    "--partitions", default="pow,cla,dir", show_default=True, callback=_names, help="Comma-separated partitions."
)
@click.option(
    "--fairness-every",
    type=int,
    help="Test the rewarded models every N rounds too, for the best round's Pearson (the FedAVE authors' figure).",
)
@click.option(
    "--oracle-floor",
    type=click.FloatRange(0.0, 1.0, min_open=True),
    help="Also run fedave with quotas from the measured standalone accuracies (row fedave-oracle): "
    "the least accurate client gets this fraction of every layer's update, the most accurate all of it.",
)
@click.option(
    "--standalone-repeats",
    type=click.IntRange(min=1),
    help="Train every client alone this many times (other seeds): the reference is their mean, and the table "
    "shows how well the repeats agree and the Pearson that this noise allows [default: 1].",
)
def fairness_command(
    config_path: Path | None,
    output_dir: Path | None,
    fresh: bool,
    as_json: bool,
    seeds: int,
    strategies: list[str],
    partitions: list[str],
    oracle_floor: float | None,
    **flags: Any,
) -> None:
    """Pearson(standalone accuracy, rewarded model accuracy): fedfaim, fedave, fair; 10 clients, POW/CLA/DIR (FedAVE).

    \b
    POW: power-law client sizes; CLA: client j holds j + 1 of the 10 classes
    (class-number imbalance, unless the config sets classes_per_client);
    DIR: Dirichlet(alpha) label skew. Under fedfaim and fedave clients keep
    their own models and receive their rewards in kind (the CGSV/FedAVE
    protocol); under fair they train from the global model and the reward is
    a model apart, its quota calibrated to the accuracy it buys. fedavg rewards
    no one: its row gives the global accuracy the others are compared with
    ("vs fedavg", in points). Each client's
    standalone accuracy comes from training it alone for as many epochs.
    "contribution Pearson" correlates standalone accuracy with the mean
    contribution instead: whether the strategy ranks clients as their data
    deserves, before the rewards in kind turn that ranking into models.
    "gain" is rewarded minus standalone accuracy per client (mean, and the
    worst client over all seeds): a Pearson near 1 from rewards that merely
    equal the standalone models would show as a gain near zero.
    With --fairness-every N, "best round" is the highest Pearson of the
    tested rounds, as the FedAVE authors' code reports it, with the mean
    client gain at that round; the best of many rounds is biased upwards,
    so the target is judged on the last round.
    With --oracle-floor F, a fedave-oracle row shows what the rewards in kind
    reach with the perfect ranking: fedave's rewards, with client i's quota
    F^(1 - z_i), z_i its standalone accuracy rescaled to [0, 1].
    With --standalone-repeats N (N > 1), "reference agreement" is the mean
    Pearson between the N standalone runs, and "ceiling" the Pearson that
    rewards following the clients' true standalone accuracies would reach
    against the noisy reference (their mean).
    """
    base = load_experiment(config_path, flags, defaults=FAIRNESS_DEFAULTS)
    apply_threads(base)
    began = time.perf_counter()
    total = len(partitions) * seeds * (len(strategies) + (oracle_floor is not None))
    with (
        series_folder("fairness", base, output_dir, fresh=fresh) as output_dir,
        _say_what_is_kept(output_dir),
        RunBars(Console(stderr=True), total) as bars,
    ):
        runs = fairness_runs(
            base,
            strategies,
            partitions,
            list(range(seeds)),
            oracle_floor=oracle_floor,
            output_dir=output_dir,
            observer=bars,
        )
    rows = summarise_fairness(runs)
    if as_json:
        click.echo(machine_json({"runs": [r.__dict__ for r in runs], "summary": [r.__dict__ for r in rows]}))
        return
    table = Table(title=f"fairness: Pearson(standalone, reward), MNIST, {base.clients} clients, {base.rounds} rounds")
    per_round = base.fairness_every > 0
    repeated = base.standalone_repeats > 1
    gaps = global_gap(rows)
    columns = (
        "partition",
        "strategy",
        "Pearson mean",
        "Pearson std",
        *(("best round (its mean gain)",) if per_round else ()),
        *(("reference agreement", "ceiling") if repeated else ()),
        "contribution Pearson",
        "Jain mean",
        "mean gain",
        "worst gain",
        "global accuracy",
        *(("vs fedavg",) if gaps else ()),
        "seeds",
    )
    for column in columns:
        table.add_column(column, justify="left" if column in ("partition", "strategy") else "right")
    for row in rows:
        gap = gaps.get((row.partition, row.strategy))
        table.add_row(
            row.partition,
            row.strategy,
            _figure(row.pearson_mean, "{:.3f}"),
            _figure(row.pearson_std, "{:.3f}"),
            *((f"{row.best_round_pearson_mean:.3f} ({100 * row.best_round_gain_mean:+.1f} pt)",) if per_round else ()),
            *((f"{row.reference_agreement_mean:.3f}", f"{row.fairness_ceiling_mean:.3f}") if repeated else ()),
            _figure(row.contribution_pearson_mean, "{:.3f}"),
            _figure(row.jain_mean, "{:.3f}"),
            _figure(100 * row.gain_mean, "{:+.1f} pt"),
            _figure(100 * row.gain_worst, "{:+.1f} pt"),
            f"{100 * row.accuracy_mean:.2f}%",
            *(("-" if gap is None else f"{100 * gap:+.2f} pt",) if gaps else ()),
            str(row.seeds),
        )
    out = stdout_console(PIPED_WIDTH)
    print_table(out, table, labels=2)
    out.print(f"FedAVE reports above 0.84; our target is {FAIRNESS_TARGET}; total {time.perf_counter() - began:.0f} s")
    out.print(f"every run's metrics and plots in {output_dir}")


@dataclass(frozen=True)
class RobustnessRun:
    """One (partition, seed, attack, fraction, strategy) run of the robustness table; NaN: not applicable."""

    partition: str
    strategy: str
    attack: str
    #: Fraction of the clients that attack (0 for :data:`NO_ATTACK`).
    fraction: float
    seed: int
    final_accuracy: float
    #: Final accuracy minus that of the same strategy, partition and seed without attackers.
    accuracy_change: float
    precision: float
    recall: float
    honest_flagged: float
    #: The round by which every attacker had been caught (None: one never was, or no attackers).
    caught_round: int | None
    attackers_removed: int
    honest_removed: int
    #: Honest clients removed here but not in the same strategy's run without attackers: what the attack
    #: itself cost the honest (the others the mechanism removes on this data with or without attackers).
    honest_removed_by_attack: int
    #: The attackers' mean pay on chain as a share of the honest clients' mean pay.
    attacker_pay_share: float
    seconds: float


def robustness_runs(
    base: ExperimentConfig,
    strategies: Sequence[str],
    attacks: Sequence[str],
    partitions: Sequence[str],
    fractions: Sequence[float],
    seeds: Sequence[int],
    *,
    output_dir: Path | None = None,
    observer: RunObserver | None = None,
) -> list[RobustnessRun]:
    """Every strategy against every attack at every fraction, per (partition, seed), beside a run without attackers.

    The run without attackers (:data:`NO_ATTACK`) is made once per (partition,
    seed, strategy), whether or not ``attacks`` names it, because every row's
    accuracy change is measured against it; it is reported only when named.
    The data split of one (partition, seed, attack, fraction) serves every strategy.
    """
    unknown = [attack for attack in attacks if attack not in ATTACKS]
    if unknown:
        raise ConfigError(f"unknown attack(s) {', '.join(unknown)}", hint=f"use some of {', '.join(ATTACKS)}")
    observer = observer or RunObserver()
    mechanism = mechanism_params(base.rounds)
    settings = [(NO_ATTACK, 0.0)] + [(a, f) for a in attacks if a != NO_ATTACK for f in fractions]
    runs = []
    with WorkerPool() as pool:
        for partition in partitions:
            for seed in seeds:
                clean: dict[str, tuple[float, frozenset[int]]] = {}  # per strategy without attackers: accuracy, removed
                for attack, fraction in settings:
                    split = _Split(
                        base.with_changes(partition=partition, seed=seed, faults=attack_faults(attack, fraction))
                    )
                    setting = NO_ATTACK if attack == NO_ATTACK else f"{attack}-{fraction:g}"
                    for strategy in strategies:
                        label, name = (
                            f"{partition} seed {seed} {setting} {strategy}",
                            f"{partition}-seed{seed}-{setting}-{strategy}",
                        )
                        run_config = split.config.with_changes(strategy=strategy)
                        result = _run_or_read(
                            run_config, split, name, label, pool=pool, output_dir=output_dir, observer=observer
                        )
                        pay = chain_pay(result, mechanism)
                        if strategy not in clean:
                            clean[strategy] = (result.final_accuracy, pay.removed_of(range(len(result.clients))))
                        run = _robustness_run(result, pay, partition, attack, fraction, *clean[strategy], mechanism)
                        if attack in attacks:
                            runs.append(run)
                        observer.run_done(label, result)
    return runs


def _robustness_run(
    result: ExperimentResult,
    pay: ChainPay,
    partition: str,
    attack: str,
    fraction: float,
    clean_accuracy: float,
    clean_removed: frozenset[int],
    mechanism: MechanismParams,
) -> RobustnessRun:
    """What one finished run and the chain's pay of it (``pay``) say about its attack: accuracy, detection, pay
    and removals (against the run without attackers: its final accuracy and the clients the chain removed in it)."""
    bad = attackers(result)
    honest = [c.index for c in result.clients if c.index not in bad]
    found = detection(result, min_quality(mechanism))
    honest_pay = pay.mean_pay(honest)
    return RobustnessRun(
        partition=partition,
        strategy=result.config.strategy,
        attack=attack,
        fraction=fraction,
        seed=result.config.seed,
        final_accuracy=result.final_accuracy,
        accuracy_change=result.final_accuracy - clean_accuracy,
        precision=found.precision,
        recall=found.recall,
        honest_flagged=found.honest_flagged,
        caught_round=found.caught_round,
        attackers_removed=pay.removed(bad),
        honest_removed=pay.removed(honest),
        honest_removed_by_attack=len(pay.removed_of(honest) - clean_removed),
        attacker_pay_share=pay.mean_pay(bad) / honest_pay if bad and honest_pay > 0 else math.nan,
        seconds=result.seconds,
    )


@dataclass(frozen=True)
class RobustnessRow:
    """Means over seeds of one (partition, strategy, attack, fraction); NaN where no seed had the figure."""

    partition: str
    strategy: str
    attack: str
    fraction: float
    final_accuracy: float
    accuracy_change: float
    precision: float
    recall: float
    honest_flagged: float
    #: The latest round by which every attacker was caught over the seeds (None: in some seed one never was).
    caught_round: int | None
    attackers_removed: float
    honest_removed: float
    honest_removed_by_attack: float
    attacker_pay_share: float
    seeds: int


def summarise_robustness(runs: Sequence[RobustnessRun]) -> list[RobustnessRow]:
    """Every (partition, strategy, attack, fraction) averaged over its seeds, in first-seen order."""
    groups: dict[tuple[str, str, str, float], list[RobustnessRun]] = {}
    for run in runs:
        groups.setdefault((run.partition, run.strategy, run.attack, run.fraction), []).append(run)
    rows = []
    for (partition, strategy, attack, fraction), members in groups.items():
        caught = [m.caught_round for m in members]
        rows.append(
            RobustnessRow(
                partition=partition,
                strategy=strategy,
                attack=attack,
                fraction=fraction,
                final_accuracy=_mean_defined(m.final_accuracy for m in members),
                accuracy_change=_mean_defined(m.accuracy_change for m in members),
                precision=_mean_defined(m.precision for m in members),
                recall=_mean_defined(m.recall for m in members),
                honest_flagged=_mean_defined(m.honest_flagged for m in members),
                caught_round=None if None in caught else max(r for r in caught if r is not None),
                attackers_removed=statistics.fmean(m.attackers_removed for m in members),
                honest_removed=statistics.fmean(m.honest_removed for m in members),
                honest_removed_by_attack=statistics.fmean(m.honest_removed_by_attack for m in members),
                attacker_pay_share=_mean_defined(m.attacker_pay_share for m in members),
                seeds=len(members),
            )
        )
    return rows


def _mean_defined(values: Iterable[float]) -> float:
    """The mean of the values that are not NaN (NaN when none is)."""
    defined = [v for v in values if not math.isnan(v)]
    return statistics.fmean(defined) if defined else math.nan


#: What the table prints for a figure that does not apply (NaN, or no round).
NOT_APPLICABLE = "n/a"

#: The columns of the robustness table, in order.
ROBUSTNESS_COLUMNS = (
    "partition",
    "strategy",
    "attack",
    "fraction",
    "accuracy",
    "vs clean",
    "precision",
    "recall",
    "honest flagged",
    "all caught by",
    "attackers removed",
    "honest removed",
    "by the attack",
    "attacker pay",
    "seeds",
)


def robustness_table(rows: Sequence[RobustnessRow], title: str) -> Table:
    """The printed table: one row per (partition, strategy, attack, fraction)."""
    table = Table(title=title)
    for column in ROBUSTNESS_COLUMNS:
        table.add_column(column, justify="left" if column in ("partition", "strategy", "attack") else "right")
    for row in rows:
        none = row.attack == NO_ATTACK
        table.add_row(
            row.partition,
            row.strategy,
            row.attack,
            "-" if none else f"{row.fraction:g}",
            _percent(row.final_accuracy),
            "-" if none else _points(row.accuracy_change),
            _percent(row.precision),
            _percent(row.recall),
            _percent(row.honest_flagged),
            NOT_APPLICABLE if row.caught_round is None else f"round {row.caught_round}",
            f"{row.attackers_removed:g}",
            f"{row.honest_removed:g}",
            "-" if none else f"{row.honest_removed_by_attack:g}",
            _percent(row.attacker_pay_share),
            str(row.seeds),
        )
    return table


def _percent(value: float) -> str:
    return NOT_APPLICABLE if math.isnan(value) else f"{100 * value:.1f}%"


def _points(value: float) -> str:
    return NOT_APPLICABLE if math.isnan(value) else f"{100 * value:+.1f} pt"


#: The robustness setting: 10 clients on MNIST with LeNet-5, 500 training samples each on average
#: (the fairness table's scale), and the shared local-training defaults (lr 0.1, batch 10), which
#: learn within a few rounds, so that what an attack costs shows in 10 rounds. Clients train from the
#: global model, as in a task at its default ``train_from``: fedfaim and fedave are measured as they run.
ROBUSTNESS_DEFAULTS: dict[str, Any] = {
    "own_models": False,  # every client trains from the global model, as a task's default train_from does
    "dataset": "mnist",
    "model": "lenet5",
    "clients": 10,
    "train_samples": 6000,
    "rounds": 10,
    "alpha": 0.5,
    "validation_samples": 1000,
}


def _fractions(_ctx: click.Context, param: click.Parameter, value: str) -> list[float]:
    """A comma-separated list of fractions in (0, 1] (a click callback)."""
    try:
        fractions = [float(item) for item in _names(_ctx, param, value)]
    except ValueError as err:
        raise click.BadParameter(f"{value!r} is not a list of numbers, e.g. 0.2,0.3", param=param) from err
    outside = [f for f in fractions if not 0.0 < f <= 1.0]
    if outside:
        raise click.BadParameter(f"{', '.join(f'{f:g}' for f in outside)} outside (0, 1]", param=param)
    return fractions


@reproduce.command("robustness")
@_with_common
@click.option("--rounds", type=int, help=f"Rounds per run [default: {ROBUSTNESS_DEFAULTS['rounds']}].")
@click.option("--seeds", type=click.IntRange(min=1), default=1, show_default=True, help="Number of seeds (0, 1, ...).")
@click.option(
    "--strategies",
    default="fedavg,quality,cgsv,fedfaim,fedave",
    show_default=True,
    callback=_names,
    help="Comma-separated strategies.",
)
@click.option(
    "--attacks", default=",".join(ATTACKS), show_default=True, callback=_names, help="Comma-separated attacks."
)
@click.option("--partitions", default="iid,dir", show_default=True, callback=_names, help="Comma-separated partitions.")
@click.option(
    "--fractions",
    default="0.2,0.3",
    show_default=True,
    callback=_fractions,
    help="Comma-separated fractions of the clients that attack.",
)
@click.option(
    "--screening/--no-screening", default=None, help="Screen every round's updates before the strategy [default: yes]."
)
def robustness_command(
    config_path: Path | None,
    output_dir: Path | None,
    fresh: bool,
    as_json: bool,
    seeds: int,
    strategies: list[str],
    attacks: list[str],
    partitions: list[str],
    fractions: list[float],
    screening: bool | None,
    **flags: Any,
) -> None:
    """Every strategy against the standard attacks: accuracy, who is caught, who the chain pays; 10 clients, IID/DIR.

    \b
    Attacks (a fraction of the clients mounts each):
      scale-x10, scale-x1000  the update times 10 or 1000 (boosting)
      sign-flip               minus the honest update
      noise                   Gaussian noise of the honest update's norm
      free-ride-zero/-random  no training: a zero update, or random noise
      label-flip              honest training on labels c -> 9 - c
      sybil                   colluding clients all send one update, minus
                              the mean of their honest updates (0.3 of 10
                              clients: 3 Sybils)
    The run without attackers (none) is always made: "vs clean" is the final
    accuracy minus its own. Every client trains from the global model, as in
    a task at its default train_from (own_models: true in a --config for the
    seeds' train-from-your-reward protocol).
    \b
    An attacker counts as caught in a round when its update was rejected
    (screening or the strategy) or its quality fell below q_min (0.5, where
    the chain starts to decay a reputation). "precision" and "recall" are
    over (client, round) pairs; "honest flagged" is the share of honest
    client-rounds caught, what the defence costs the honest; "all caught by"
    the round by which every attacker had been caught once. The chain
    columns feed every client's qualities through the contracts' own
    mechanism with a default task's terms (same round time for everyone, no
    budget limit): who falls below r_a_min and loses its deposit, and the
    attackers' mean pay as a share of the honest clients' mean pay. "by the
    attack" counts the honest clients removed that the same strategy's run
    without attackers kept: on skewed data the mechanism removes some honest
    clients with or without attackers. n/a: the figure does not apply (no
    attackers, or nobody caught).
    \b
    Example (a quick look, minutes on a laptop):
      fedchain reproduce robustness --partitions iid --rounds 5 --strategies fedavg,quality --fractions 0.2
    """
    flags["screening.enabled"] = screening
    base = load_experiment(config_path, flags, defaults=ROBUSTNESS_DEFAULTS)
    apply_threads(base)
    began = time.perf_counter()
    attacking = sum(attack != NO_ATTACK for attack in attacks)
    total = len(partitions) * seeds * len(strategies) * (1 + attacking * len(fractions))
    with (
        series_folder("robustness", base, output_dir, fresh=fresh) as output_dir,
        _say_what_is_kept(output_dir),
        RunBars(Console(stderr=True), total) as bars,
    ):
        runs = robustness_runs(
            base, strategies, attacks, partitions, fractions, list(range(seeds)), output_dir=output_dir, observer=bars
        )
    rows = summarise_robustness(runs)
    if as_json:
        click.echo(machine_json({"runs": [r.__dict__ for r in runs], "summary": [r.__dict__ for r in rows]}))
        return
    title = f"robustness: MNIST, {base.clients} clients, {base.rounds} rounds, screening {'on' if base.screening.enabled else 'off'}"
    out = stdout_console(PIPED_WIDTH)
    print_table(out, robustness_table(rows, title), labels=3)
    out.print(f"total {time.perf_counter() - began:.0f} s; every run's metrics and plots in {output_dir}")
