"""``fedchain aggregator run``: the command line over :class:`fedchain.aggregator.service.Aggregator`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from fedchain.agent.session import session_from_options, session_options
from fedchain.config import load_yaml

if TYPE_CHECKING:
    from fedchain.aggregator.scoring import QualityChoice

#: Where agents keep their state files unless told otherwise.
DEFAULT_STATE_DIR = Path(".fedchain/agents")


@click.group()
def aggregator() -> None:
    """The aggregator of a task: verify, score, aggregate and post every round."""


@aggregator.command()
@click.option("--task", "task_id", type=click.IntRange(min=1), required=True, help="The task to aggregate.")
@click.option(
    "--strategy", help="Aggregation strategy (fedavg, quality, cgsv, fedfaim, fedave). [default: the task spec's]"
)
@click.option(
    "--strategy-options",
    type=click.Path(dir_okay=False, path_type=Path),
    help="YAML file with the strategy's options. [default: the task spec's]",
)
@click.option(
    "--quality",
    type=click.Choice(["auto", "loss", "contribution"]),
    default="auto",
    show_default=True,
    help="The chain's q_i: Tian's validation-loss ratio, the strategy's rescaled contribution, or auto "
    "(contribution for cgsv, fedfaim and fedave).",
)
@click.option("--data-root", help="Folder with the validation dataset. [default: $FEDCHAIN_DATA_ROOT]")
@click.option(
    "--device", default="auto", show_default=True, help="Torch device for evaluation (auto: CUDA when present)."
)
@click.option(
    "--state",
    "state_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help=f"The agent's state file. [default: {DEFAULT_STATE_DIR}/aggregator-task-ID.json]",
)
@click.option(
    "--poll-interval", type=click.FloatRange(min=0.01), default=1.0, show_default=True, help="Seconds between polls."
)
@click.option(
    "--confirmations", type=click.IntRange(min=0), default=0, show_default=True, help="Blocks before events count."
)
@click.option(
    "--bond/--no-bond",
    default=True,
    show_default=True,
    help="Post the aggregator's bond (the task's aggregatorBond) from this account while the task is open, unless "
    "the publisher posted it. A task does not start without it; it comes back at settlement unless a challenge "
    "against this aggregator's posts is upheld.",
)
@click.option(
    "--zero-client",
    hidden=True,
    metavar="ADDRESS@ROUND",
    help="Dishonest: post quality 0 for the client at ADDRESS in round ROUND (the demo's and the tests' attack).",
)
@click.option(
    "--crash-after-round",
    type=click.IntRange(min=1),
    hidden=True,
    help="Fault: die by SIGKILL right after posting this round, state unsaved (the tests' aggregator that goes silent).",
)
@session_options
def run(
    task_id: int,
    strategy: str | None,
    strategy_options: Path | None,
    quality: QualityChoice,
    data_root: str | None,
    device: str,
    state_path: Path | None,
    poll_interval: float,
    confirmations: int,
    bond: bool,
    zero_client: str | None,
    crash_after_round: int | None,
    **options: Any,
) -> None:
    """Run the rounds of a task until it is settled; SIGTERM stops it cleanly and a restart resumes.

    The signing account (FEDCHAIN_PRIVATE_KEY or --keystore) must be the task's aggregator.
    """
    from fedchain.aggregator.service import Aggregator, AggregatorSettings  # torch: loaded only to run, not for --help

    settings = AggregatorSettings(
        task_id=task_id,
        state_path=state_path or DEFAULT_STATE_DIR / f"aggregator-task-{task_id}.json",
        strategy=strategy,
        strategy_options=load_yaml(strategy_options) if strategy_options else None,
        quality=quality,
        data_root=data_root,
        device=device,
        poll_interval_s=poll_interval,
        confirmations=confirmations,
        bond=bond,
        zero_client=_address_at_round(zero_client),
        crash_after_round=crash_after_round,
    )
    state = Aggregator(session_from_options(**options), settings).run()
    click.echo(f"task {task_id}: {'settled' if state.finished else 'stopped'} (last block {state.last_block})")


def _address_at_round(text: str | None) -> tuple[str, int] | None:
    """``ADDRESS@ROUND`` as (client address, round)."""
    from eth_utils import is_address, to_checksum_address

    if text is None:
        return None
    address, _, round_number = text.partition("@")
    if not is_address(address) or not round_number.isdigit() or int(round_number) < 1:
        raise click.BadParameter(f"{text!r} is not ADDRESS@ROUND (for example 0xAB...@1)", param_hint="--zero-client")
    return to_checksum_address(address), int(round_number)
