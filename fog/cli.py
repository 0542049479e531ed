"""``fog run`` (also ``fedchain fog run``): the fog-node agent from flags or a YAML file."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import click

from fedchain.agent.session import SESSION_OPTIONS, session_from_options, session_options
from fedchain.client.cli import merge_flags
from fedchain.config import load_yaml
from fedchain.trainer.config import ENGINES
from fog.config import ATTACK_MODES, LAZY_MODES

#: Flags that set fields of the nested cost model (``cost:`` in the YAML file): flag -> field.
COST_FLAGS = {name: name for name in ("frequency", "alpha", "cycles_per_sample", "margin")}


def _whole(_ctx: click.Context, _param: click.Parameter, value: float | None) -> int | None:
    """A whole number given in any float notation (``2e9``)."""
    if value is None:
        return None
    if value != int(value):
        raise click.BadParameter(f"{value} is not a whole number")
    return int(value)


def _token_rates(_ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]) -> dict[str, int] | None:
    """``TOKEN=UNITS`` flags as a mapping (None when none was given)."""
    rates = {}
    for value in values:
        token, sep, units = value.partition("=")
        if not sep or not units.strip().isdigit():
            raise click.BadParameter(f"{value!r} is not TOKEN=UNITS", param_hint="--token-rate")
        rates[token.strip()] = int(units)
    return rates or None


@click.group()
def fog() -> None:
    """Run a fog node: bid for clients' training jobs, train the jobs won, get paid per round.

    \b
    The signing key comes from FEDCHAIN_PRIVATE_KEY or --keystore; the node needs ether for
    its fog deposits and gas. Example on a local chain:
      FEDCHAIN_PRIVATE_KEY=0x... fog run --name fog-1 --frequency 2e9 --alpha 1e-11 --margin 0.2
    """


@fog.command()
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="YAML file of FogConfig fields (flags win).",
)
@click.option("--name", help="The agent's name in logs and state.  [default: fog]")
@click.option(
    "--state",
    "state_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="State file.  [default: .fedchain/fog.json]",
)
@click.option(
    "--task",
    "tasks",
    type=click.IntRange(min=1),
    multiple=True,
    help="Only this task (repeatable). Default: every task.",
)
@click.option("--frequency", type=float, callback=_whole, help="f, cycles per second it bids (2e9 is allowed).")
@click.option("--alpha", type=float, help="Energy coefficient of eq. 12, wei per cycle per (cycle/s)^2.")
@click.option("--cycles-per-sample", type=int, help="c of its hardware. Default: the task's.")
@click.option("--margin", type=float, help="Profit over cost (0.1: price = 1.1 x cost); never negative.")
@click.option("--max-jobs", type=int, help="The most jobs bid for or trained at once.")
@click.option(
    "--max-deposit",
    help="The largest fog deposit it puts down for one bid: wei, or with a unit (0.05ether).",
)
@click.option(
    "--token-rate",
    "token_rates",
    multiple=True,
    callback=_token_rates,
    metavar="TOKEN=UNITS",
    help="Bid in the ERC-20 TOKEN's tasks, one ether of cost being worth UNITS of its smallest unit "
    "(3000 USDC per ether: 0xA0b8...=3000000000). Repeatable. Default: ether tasks only.",
)
@click.option("--never-reveal", is_flag=True, default=None, help="Fault: commit bids but never reveal them.")
@click.option("--stop-after-round", type=int, help="Fault: stop after committing this round.")
@click.option(
    "--crash-after-round", type=int, help="Fault: die by SIGKILL right after committing this round, state unsaved."
)
@click.option(
    "--lazy",
    type=click.Choice(LAZY_MODES),
    help="Fault: free rider, commit updates without training: zeros, noise, or the last global step plus noise "
    "(disguised).",
)
@click.option(
    "--disguise-noise",
    type=float,
    help="--lazy disguised: the noise, times the last global step's RMS.  [default: 0.5]",
)
@click.option(
    "--attack",
    type=click.Choice(ATTACK_MODES),
    help="Fault: train, then flip the updates' sign, replace them by noise of their norm, scale them, "
    "or send all its jobs one Sybil update (minus their mean).",
)
@click.option("--attack-scale", type=float, help="Factor of --attack scale and sybil.  [default: 10]")
@click.option("--engine", type=click.Choice(ENGINES), help="Trainer engine.  [default: auto]")
@click.option("--device", help="Training device (cpu, cuda). Default: CUDA when present.")
@click.option(
    "--threads",
    type=int,
    help="Torch threads of the in-process engines [default: torch's, every core].",
)
@click.option("--poll-interval", "poll_interval_s", type=float, help="Seconds between polls.")
@click.option(
    "--confirmations",
    type=click.IntRange(min=0),
    help="Blocks on top of an event before acting on it: the depth the task was created for.  [default: 0]",
)
@click.option(
    "--watch-entries/--no-watch-entries",
    default=None,
    help="Re-score the entries of the updates it committed and challenge the aggregator when one is wrong.  "
    "[default: watch]",
)
@click.option(
    "--data-root",
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder with the tasks' validation datasets, for watching entries.  [default: $FEDCHAIN_DATA_ROOT]",
)
@session_options
def run(config_path: Path | None, **options: Any) -> None:
    """Watch auctions, bid (never below cost), reveal, train won jobs, commit updates, watch their entries;
    stop on SIGTERM."""
    from fog.config import FogConfig, load_fog_config
    from fog.jobs import Phase, jobs_of
    from fog.node import FogNode

    session = {key: options.pop(key) for key in SESSION_OPTIONS}
    overrides = merge_flags(load_yaml(config_path) if config_path else {}, options, "cost", COST_FLAGS)
    config: FogConfig = load_fog_config(None, overrides)
    root = logging.getLogger()
    root.setLevel(min(root.level, logging.INFO))  # an agent's log lines are its output
    state = FogNode(session_from_options(**session), config).run()
    won = sum(1 for job in jobs_of(state).values() if job.phase == Phase.WON)
    click.echo(f"{config.name} stopped at block {state.last_block}: {len(state.jobs)} auctions seen, {won} jobs won")


def main(argv: list[str] | None = None) -> int:
    """The ``fog`` console script: ``fog run ...`` is ``fedchain fog run ...``."""
    from fedchain.cli import main as fedchain_main

    return fedchain_main(["fog", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
