"""``fedchain reproduce rounds-to-accuracy``: rounds until the global LeNet-5 reaches 96% test accuracy with fedavg,
quality (Tian eq. 19) and cgsv, 100 clients, on clean IID data and with 30% of the clients holding 50% noisy labels
(Tian et al. 2023, Table 4: FedAvg 20 rounds, theirs 16)."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from fedchain.console import machine_json, print_table, stdout_console
from fedchain.experiments.config import ExperimentConfig, FaultConfig, load_experiment
from fedchain.experiments.progress import RunBars, RunObserver
from fedchain.experiments.reproduce.series import (
    PIPED_WIDTH,
    Split,
    as_in_seed,
    comma_names,
    run_or_read,
    say_what_is_kept,
    series_folder,
    with_common,
)
from fedchain.experiments.simulate import apply_threads
from fedchain.trainer import WorkerPool

log = logging.getLogger(__name__)

#: Tian et al. 2023, Table 4: rounds to 96% on MNIST.
TIAN_TARGET_ACCURACY = 0.96
#: The noisy setting: 30% of the clients hold labels of which 50% are wrong.
NOISY_SETTING = FaultConfig(noisy_clients=0.3, noise_rate=0.5)
#: Settings of the rounds-to-accuracy table.
SETTINGS: dict[str, FaultConfig] = {"clean": FaultConfig(), "noisy": NOISY_SETTING}


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
            split = Split(base.with_changes(faults=SETTINGS[setting], stop_at_target=True))
            for strategy in strategies:
                label, name = f"{setting} {strategy}", f"{setting}-{strategy}"
                options = as_in_seed(strategy, split.config.strategy_options)  # the seed's cgsv (Tian's Table 4)
                run_config = split.config.with_changes(strategy=strategy, strategy_options=options)
                result = run_or_read(
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
    "max_grad_norm": None,  # the paper's plain SGD
    "validation_samples": 1000,
    "seed": 0,
}


@click.command("rounds-to-accuracy")
@with_common
@click.option("--max-rounds", type=int, help=f"Give up after this many rounds [default: {ROUNDS_DEFAULTS['rounds']}].")
@click.option("--target", type=float, help=f"Target test accuracy [default: {TIAN_TARGET_ACCURACY}].")
@click.option(
    "--strategies",
    default="fedavg,quality,cgsv",
    show_default=True,
    callback=comma_names,
    help="Comma-separated strategies.",
)
@click.option(
    "--settings",
    default="clean,noisy",
    show_default=True,
    callback=comma_names,
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
        say_what_is_kept(output_dir),
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
