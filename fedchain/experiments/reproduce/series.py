"""What the reproduce tables share: where a series keeps its runs, runs read back or resumed, the options."""

from __future__ import annotations

import contextlib
import logging
import math
import statistics
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import click

from fedchain.experiments.checkpoint import CHECKPOINT_FILE
from fedchain.experiments.config import ExperimentConfig, settings_digest
from fedchain.experiments.federation import Federation, build_federation
from fedchain.experiments.progress import RunObserver
from fedchain.experiments.results import ExperimentResult, read_result
from fedchain.experiments.runner import run_experiment
from fedchain.experiments.simulate import save_finished
from fedchain.files import keep_aside, output_folder
from fedchain.fl.strategies.fedfaim import SEED_QUALITY_CHECK
from fedchain.taskspec import todays_defaults
from fedchain.trainer import WorkerPool
from fedchain.trainer.config import ENGINES

#: The papers' own settings where the product's default differs, for the tables that reproduce a paper: fedfaim's
#: plain quality check, the fixed update lengths of cgsv and fedave (the product scales to the round's median), and
#: cgsv's cosine and fedave's reputation as their contributions (the product discounts cgsv's by the loss and
#: reports fedave's divergence-discounted accuracy).
SEED_OPTIONS: dict[str, dict[str, Any]] = {
    "fedfaim": SEED_QUALITY_CHECK,
    "cgsv": {"tau": 1.0, "contribution_measure": "cosine"},
    "fedave": {"tau": 0.5, "contribution_measure": "reputation"},
}


def as_in_seed(strategy: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` over ``strategy``'s seed settings (:data:`SEED_OPTIONS`): an option named explicitly wins."""
    return {**SEED_OPTIONS.get(strategy, {}), **options}


log = logging.getLogger(__name__)

#: Where a command keeps its series without ``-o``: one folder per table and settings.
REPRODUCE_ROOT = Path("runs") / "reproduce"


def default_output_dir(table: str, base: ExperimentConfig) -> Path:
    """``runs/reproduce/TABLE-DIGEST``, DIGEST naming ``base``'s settings (but for how it runs) and the strategies'
    defaults of this code (:func:`fedchain.taskspec.todays_defaults`).

    The same command finds its earlier runs there and goes on from them; a
    command with other settings, or run by code whose strategy defaults differ,
    gets a folder of its own, so nothing is refused or overwritten.
    """
    return REPRODUCE_ROOT / f"{table}-{settings_digest(base, todays_defaults())}"


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
def say_what_is_kept(output_dir: Path) -> Iterator[None]:
    """On Ctrl-C, say where the finished runs are and how to go on from them."""
    try:
        yield
    except KeyboardInterrupt:
        log.warning("stopped; the runs so far are in %s: the same command goes on from them", output_dir)
        raise


def start_run(
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


def checkpoint_path(output_dir: Path | None, name: str) -> Path | None:
    """Where run ``name`` saves its state while it runs, so that a stop mid-run loses no round."""
    return None if output_dir is None else output_dir / name / CHECKPOINT_FILE


def save_run(result: ExperimentResult, output_dir: Path | None, name: str) -> None:
    """Write one run's plots and metrics into ``output_dir/name`` (nothing without an output folder)."""
    if output_dir is not None:
        save_finished(result, output_dir / name)


class Split:
    """The data of one setting of a series: built when its first run needs it, then shared by the others."""

    def __init__(self, config: ExperimentConfig) -> None:
        self.config = config
        self._federation: Federation | None = None

    def federation(self) -> Federation:
        if self._federation is None:
            self._federation = build_federation(self.config)
        return self._federation


def run_or_read(
    run_config: ExperimentConfig,
    split: Split,
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
    finished it (:func:`start_run`); a stopped run goes on from its checkpoint."""
    result = start_run(run_config, name, label, note, output_dir=output_dir, observer=observer)
    if result is None:
        result = run_experiment(
            run_config,
            federation=split.federation(),
            pool=pool,
            checkpoint=checkpoint_path(output_dir, name),
            standalone_runs=standalone_runs,
            on_start=observer.run_set_up,
            on_round=observer.round_done,
        )
        save_run(result, output_dir, name)
    return result


def sample_std(values: Sequence[float]) -> float:
    """The sample standard deviation; 0 for one value, NaN when any value is NaN (a row without rewards)."""
    if any(math.isnan(v) for v in values):
        return math.nan
    return statistics.stdev(values) if len(values) > 1 else 0.0


def figure(value: float, form: str) -> str:
    """``value`` written with ``form``, or a dash when it is NaN (a row without rewards has no fairness figures)."""
    return "-" if math.isnan(value) else form.format(value)


def or_nan(value: float | None) -> float:
    return math.nan if value is None else value


def comma_names(_ctx: click.Context, param: click.Parameter, value: str) -> list[str]:
    """A comma-separated option as a list of names (a click callback); one naming nothing is refused."""
    names = [item.strip() for item in value.split(",") if item.strip()]
    if not names:
        raise click.BadParameter("names nothing: give one or more names, comma-separated", param=param)
    return names


#: ``--first-seed``: where a table's seeds start, so that more seeds can be added to a series in another process
#: or on another machine (the runs are named by their seed, and read back by it).
first_seed_option = click.option(
    "--first-seed",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="The first seed: --seeds 3 --first-seed 3 runs seeds 3, 4 and 5.",
)

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


def with_common(command: Callable) -> Callable:
    for option in reversed(_common):
        command = option(command)
    return command
