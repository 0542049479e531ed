"""``fedchain reproduce robustness``: every strategy against the standard attacks (scaling, sign flip, noise, free
riding, label flipping, colluding Sybils), 10 clients, IID, DIR and POW: accuracy, whether the attackers are caught, and
what the chain's mechanism would pay them (the measures are :mod:`fedchain.experiments.robustness`)."""

from __future__ import annotations

import logging
import math
import statistics
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from fedchain.console import machine_json, print_table, stdout_console
from fedchain.errors import ConfigError
from fedchain.experiments.config import ExperimentConfig, load_experiment
from fedchain.experiments.progress import RunBars, RunObserver
from fedchain.experiments.reproduce.series import (
    PIPED_WIDTH,
    Split,
    comma_names,
    first_seed_option,
    run_or_read,
    say_what_is_kept,
    series_folder,
    with_common,
)
from fedchain.experiments.results import ExperimentResult
from fedchain.experiments.robustness import (
    ATTACKS,
    NO_ATTACK,
    ChainPay,
    FreeRiding,
    attack_faults,
    attack_setting,
    attack_start,
    attackers,
    chain_pay,
    detection,
    mechanism_params,
    min_quality,
)
from fedchain.experiments.simulate import apply_threads
from fedchain.fl.reputation import MechanismParams
from fedchain.trainer import WorkerPool

log = logging.getLogger(__name__)


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
    #: The attackers' mean pay on chain as a share of the honest clients' mean pay, both counted from the round the
    #: attack starts (:func:`~fedchain.experiments.robustness.attack_start`).
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
    riding: FreeRiding | None = None,
) -> list[RobustnessRun]:
    """Every strategy against every attack at every fraction, per (partition, seed), beside a run without attackers.

    The run without attackers (:data:`NO_ATTACK`) is made once per (partition,
    seed, strategy), whether or not ``attacks`` names it, because every row's
    accuracy change is measured against it; it is reported only when named.
    The data split of one (partition, seed, attack, fraction) serves every strategy. ``riding`` mounts the
    free-rider attacks at another noise level or from another round (None: their own settings); each such
    setting has run folders of its own.
    """
    unknown = [attack for attack in attacks if attack not in ATTACKS]
    if unknown:
        raise ConfigError(f"unknown attack(s) {', '.join(unknown)}", hint=f"use some of {', '.join(ATTACKS)}")
    for attack in (a for a in attacks if ATTACKS[a].free_rides):
        start = attack_faults(attack, 1.0, riding).free_ride_from
        if start > base.rounds:
            raise ConfigError(
                f"the {attack} attack's free riders start in round {start}: they never free-ride in runs of "
                f"{base.rounds} rounds",
                hint=f"give --free-ride-from {base.rounds} or earlier, or more --rounds",
            )
    observer = observer or RunObserver()
    mechanism = mechanism_params(base.rounds)
    settings = [(NO_ATTACK, 0.0)] + [(a, f) for a in attacks if a != NO_ATTACK for f in fractions]
    runs = []
    with WorkerPool() as pool:
        for partition in partitions:
            for seed in seeds:
                clean: dict[str, tuple[float, frozenset[int]]] = {}  # per strategy without attackers: accuracy, removed
                for attack, fraction in settings:
                    faults = attack_faults(attack, fraction, riding)
                    split = Split(base.with_changes(partition=partition, seed=seed, faults=faults))
                    setting = attack_setting(attack, fraction, riding)
                    for strategy in strategies:
                        label, name = (
                            f"{partition} seed {seed} {setting} {strategy}",
                            f"{partition}-seed{seed}-{setting}-{strategy}",
                        )
                        run_config = split.config.with_changes(strategy=strategy)
                        result = run_or_read(
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
    # What the attack earns: pay from the round it starts (a free rider may train honestly before, and is paid
    # for that), against the honest clients' pay in the same rounds.
    start = attack_start(result)
    honest_pay = pay.mean_pay(honest, start)
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
        attacker_pay_share=pay.mean_pay(bad, start) / honest_pay if bad and honest_pay > 0 else math.nan,
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
        fractions = [float(item) for item in comma_names(_ctx, param, value)]
    except ValueError as err:
        raise click.BadParameter(f"{value!r} is not a list of numbers, e.g. 0.2,0.3", param=param) from err
    outside = [f for f in fractions if not 0.0 < f <= 1.0]
    if outside:
        raise click.BadParameter(f"{', '.join(f'{f:g}' for f in outside)} outside (0, 1]", param=param)
    return fractions


@click.command("robustness")
@with_common
@click.option("--rounds", type=int, help=f"Rounds per run [default: {ROBUSTNESS_DEFAULTS['rounds']}].")
@click.option(
    "--seeds", type=click.IntRange(min=1), default=1, show_default=True, help="Number of seeds (from --first-seed on)."
)
@first_seed_option
@click.option(
    "--strategies",
    default="fedavg,quality,cgsv,fedfaim,fedave,fair",
    show_default=True,
    callback=comma_names,
    help="Comma-separated strategies.",
)
@click.option(
    "--attacks", default=",".join(ATTACKS), show_default=True, callback=comma_names, help="Comma-separated attacks."
)
@click.option(
    "--partitions", default="iid,dir,pow", show_default=True, callback=comma_names, help="Comma-separated partitions."
)
@click.option(
    "--fractions",
    default="0.2,0.3",
    show_default=True,
    callback=_fractions,
    help="Comma-separated fractions of the clients that attack.",
)
@click.option(
    "--disguise-noise",
    type=click.FloatRange(min=0),
    help="A disguised free rider's noise, in RMS of the step it resends [default: 0.5].",
)
@click.option(
    "--free-ride-from",
    type=click.IntRange(min=1),
    help="First round in which the free riders free-ride, honest before [default: 1; 2 for disguised].",
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
    first_seed: int,
    strategies: list[str],
    attacks: list[str],
    partitions: list[str],
    fractions: list[float],
    disguise_noise: float | None,
    free_ride_from: int | None,
    screening: bool | None,
    **flags: Any,
) -> None:
    """Every strategy against the standard attacks: accuracy, who is caught, who the chain pays; 10 clients, IID/DIR/POW.

    \b
    Attacks (a fraction of the clients mounts each):
      scale-x10, scale-x1000  the update times 10 or 1000 (boosting)
      sign-flip               minus the honest update
      noise                   Gaussian noise of the honest update's norm
      free-ride-zero/-random  no training: a zero update, or random noise
      free-ride-disguised     no training from round 2: the last global step plus
                              noise of half its RMS (Fraboni et al. 2021)
      label-flip              honest training on labels c -> 9 - c
      sybil                   colluding clients all send one update, minus
                              the mean of their honest updates (0.3 of 10
                              clients: 3 Sybils)
    The run without attackers (none) is always made: "vs clean" is the final
    accuracy minus its own. Every client trains from the global model, as in
    a task at its default train_from (own_models: true in a --config for the
    seeds' train-from-your-reward protocol). --disguise-noise and
    --free-ride-from mount the free riders at settings of your own (the
    screen must catch them at levels it was not tuned on); their runs get
    folders of their own, e.g. free-ride-disguised-noise1-from4-0.2.
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
    attackers' mean pay as a share of the honest clients' mean pay, both
    from the round the attack starts (a disguised free rider trains round 1
    honestly and is paid for it; that pay is not the attack's). "by the
    attack" counts the honest clients removed that the same strategy's run
    without attackers kept: on skewed data the mechanism removes some honest
    clients with or without attackers. n/a: the figure does not apply (no
    attackers, or nobody caught).
    \b
    Examples:
      # a quick look, minutes on a laptop
      fedchain reproduce robustness --partitions iid --rounds 5 --strategies fedavg,quality --fractions 0.2
      # disguised free riders with twice the noise, from round 4
      fedchain reproduce robustness --attacks free-ride-disguised --fractions 0.2 --disguise-noise 1 --free-ride-from 4
    """
    flags["screening.enabled"] = screening
    riding = FreeRiding(disguise_noise=disguise_noise, free_ride_from=free_ride_from)
    base = load_experiment(config_path, flags, defaults=ROBUSTNESS_DEFAULTS)
    apply_threads(base)
    began = time.perf_counter()
    attacking = sum(attack != NO_ATTACK for attack in attacks)
    total = len(partitions) * seeds * len(strategies) * (1 + attacking * len(fractions))
    with (
        series_folder("robustness", base, output_dir, fresh=fresh) as output_dir,
        say_what_is_kept(output_dir),
        RunBars(Console(stderr=True), total) as bars,
    ):
        runs = robustness_runs(
            base,
            strategies,
            attacks,
            partitions,
            fractions,
            list(range(first_seed, first_seed + seeds)),
            output_dir=output_dir,
            observer=bars,
            riding=riding,
        )
    rows = summarise_robustness(runs)
    if as_json:
        click.echo(
            machine_json(
                {
                    "free_riding": riding.__dict__,
                    "runs": [r.__dict__ for r in runs],
                    "summary": [r.__dict__ for r in rows],
                }
            )
        )
        return
    title = (
        f"robustness: {base.dataset}, {base.clients} clients, {base.rounds} rounds, "
        f"screening {'on' if base.screening.enabled else 'off'}{_riding_note(riding)}"
    )
    out = stdout_console(PIPED_WIDTH)
    print_table(out, robustness_table(rows, title), labels=3)
    out.print(f"total {time.perf_counter() - began:.0f} s; every run's metrics and plots in {output_dir}")


def _riding_note(riding: FreeRiding) -> str:
    """The title's note of free riders mounted at settings of the user's own ("" at the attacks' own)."""
    parts = []
    if riding.disguise_noise is not None:
        parts.append(f"disguised noise {riding.disguise_noise:g}")
    if riding.free_ride_from is not None:
        parts.append(f"free riding from round {riding.free_ride_from}")
    return "; " + ", ".join(parts) if parts else ""
