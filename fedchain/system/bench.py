"""``fedchain bench demo``: the demo on chains with different block times, side by side.

Runs ``fedchain demo`` once per block time (0: automine, where every
transaction is mined at once in a block of its own; 2 s like an L2; 12 s like
Ethereum), each on a fresh local Anvil, and prints for each: the wall time and
its ratio to the automine run of the same invocation, the audit's verdict,
jobs that went unbid, client-rounds without a commit, the final accuracy, and
every participant's transactions. A run that fails (a participant died, a
timeout) is shown as failed with its error; the others still run.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.table import Table

from fedchain.console import machine_json, stdout_console
from fedchain.demo import PIPED_WIDTH
from fedchain.errors import ConfigError, FedchainError
from fedchain.files import writable_folder

if TYPE_CHECKING:
    from fedchain.demo import DemoResult

log = logging.getLogger(__name__)

#: Block times measured by default: automine, an L2, Ethereum.
DEFAULT_BLOCK_TIMES = (0.0, 2.0, 12.0)


@dataclass(frozen=True)
class BlockTimeRun:
    """One demo run at one block time: its result, or the error that stopped it."""

    block_time: float
    result: DemoResult | None
    error: str | None = None


def parse_block_times(text: str) -> tuple[float, ...]:
    """``"0,2,12"`` -> (0.0, 2.0, 12.0); refuses negatives and garbage with a clear message."""
    try:
        times = tuple(float(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise ConfigError(
            f"--block-times takes seconds separated by commas, got {text!r}", hint="for example 0,2,12"
        ) from None
    if not times or any(t < 0 for t in times):
        raise ConfigError(f"--block-times needs at least one block time >= 0, got {text!r}", hint="for example 0,2,12")
    return times


def run_all(block_times: tuple[float, ...], out: Path, demo_options: dict[str, Any]) -> list[BlockTimeRun]:
    """Run the demo once per block time, each in ``out/block-time-S`` with its console output in ``demo.txt``."""
    from fedchain.demo import DemoConfig, run_demo

    runs = []
    for block_time in block_times:
        run_dir = out / f"block-time-{block_time:g}"
        config = DemoConfig(block_time=block_time, run_dir=run_dir, **demo_options)
        log.info("demo at block time %g s in %s", block_time, run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        with (run_dir.parent / f"block-time-{block_time:g}.txt").open("w") as transcript:
            try:
                result = run_demo(config, Console(file=transcript, width=160))
            except FedchainError as err:
                runs.append(BlockTimeRun(block_time, None, f"{type(err).__name__}: {err.args[0] if err.args else err}"))
                continue
        runs.append(BlockTimeRun(block_time, result))
    return runs


def summary_table(runs: list[BlockTimeRun]) -> Table:
    """A row per block time: wall time (and its ratio to automine), audit, unbid jobs, missed rounds, accuracy."""
    baseline = next((r.result.wall_s for r in runs if r.block_time == 0 and r.result is not None), None)
    table = Table(title="the demo per block time", title_justify="left", show_edge=False)
    for column in (
        "block time",
        "wall time",
        "vs automine",
        "audit",
        "unbid jobs",
        "missed client-rounds",
        "transactions",
        "reverted",
        "final accuracy",
    ):
        table.add_column(column, justify="left" if column in ("block time", "audit") else "right")
    for run in runs:
        label = "automine" if run.block_time == 0 else f"{run.block_time:g} s"
        result = run.result
        if result is None:
            table.add_row(label, "-", "-", f"failed: {run.error}", *["-"] * 5)
            continue
        rounds = result.report.history.rounds
        accuracy = f"{rounds[-1].accuracy / 10**18:.1%}" if rounds else "-"
        ratio = f"{result.wall_s / baseline:.2f}x" if baseline else "-"
        table.add_row(
            label,
            f"{result.wall_s:.0f} s",
            ratio,
            "passed" if result.report.passed else "FAILED",
            str(result.jobs.unbid),
            f"{result.jobs.missed}/{result.jobs.due}",
            str(sum(s.transactions for s in result.transactions.values())),
            str(sum(s.reverted for s in result.transactions.values())),
            accuracy,
        )
    return table


def transactions_table(runs: list[BlockTimeRun]) -> Table:
    """A row per participant, a column per block time: mined transactions (reverted ones in brackets)."""
    table = Table(title="transactions per participant (reverted)", title_justify="left", show_edge=False)
    table.add_column("participant")
    names: dict[str, None] = {}
    for run in runs:
        if run.result is not None:
            names.update(dict.fromkeys(sorted(run.result.transactions)))
        table.add_column("automine" if run.block_time == 0 else f"{run.block_time:g} s", justify="right")
    for name in names:
        cells = []
        for run in runs:
            sent = run.result.transactions.get(name) if run.result is not None else None
            cells.append(
                "-"
                if sent is None
                else f"{sent.transactions} ({sent.reverted})"
                if sent.reverted
                else str(sent.transactions)
            )
        table.add_row(name, *cells)
    return table


def as_json(runs: list[BlockTimeRun]) -> list[dict[str, Any]]:
    """The figures of every run, for machines."""
    rows = []
    for run in runs:
        row: dict[str, Any] = {"block_time_s": run.block_time, "error": run.error}
        if run.result is not None:
            r = run.result
            row.update(
                wall_s=round(r.wall_s, 1),
                audit_passed=r.report.passed,
                unbid_jobs=r.jobs.unbid,
                missed_client_rounds=r.jobs.missed,
                due_client_rounds=r.jobs.due,
                transactions={
                    name: {"mined": s.transactions, "reverted": s.reverted} for name, s in r.transactions.items()
                },
                run_dir=str(r.run_dir),
            )
        rows.append(row)
    return rows


@click.command()
@click.option(
    "--block-times", default="0,2,12", show_default=True, help="Seconds between blocks, one demo each (0: automine)."
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder for the runs (one run folder and one transcript per block time).  [default: runs/bench-demo-TIMESTAMP]",
)
@click.option("--rounds", type=int, help="Rounds N of each demo.  [default: the demo's]")
@click.option("--clients", type=int, help="Client processes.  [default: the demo's]")
@click.option("--fogs", type=int, help="Fog-node processes.  [default: the demo's]")
@click.option("--strategy", help="Aggregation strategy.  [default: the demo's]")
@click.option(
    "--data-root",
    type=click.Path(file_okay=False, path_type=Path),
    help="Dataset folder.  [default: FEDCHAIN_DATA_ROOT]",
)
@click.option("--json", "as_machine", is_flag=True, help="Print the figures as JSON.")
def demo(block_times: str, out: Path | None, as_machine: bool, **options: Any) -> None:
    """The demo at several block times: wall time, transactions per participant, unbid jobs, missed rounds.

    \b
    Each block time runs the whole demo on its own local Anvil (0: a block per
    transaction; 2: an L2; 12: Ethereum), so the default takes 10-15 minutes.
    """
    times = parse_block_times(block_times)
    out = writable_folder(out or Path("runs") / datetime.now(UTC).strftime("bench-demo-%Y%m%d-%H%M%S"), option="--out")
    demo_options = {key: value for key, value in options.items() if value is not None}
    console = stdout_console(PIPED_WIDTH)
    runs = run_all(times, out, demo_options)
    if as_machine:
        click.echo(machine_json(as_json(runs)))
        return
    console.print(summary_table(runs))
    console.print(transactions_table(runs))
    console.print(f"runs and transcripts in {out}")
