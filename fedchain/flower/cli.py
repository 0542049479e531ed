"""``fedchain flower``: a Flower client's wallet steps, and the Flower example end to end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from fedchain.agent.session import session_from_options, session_options


@click.group()
def flower() -> None:
    """FedChain's incentives for a federation that runs on Flower (pip install 'fedchain[flower]').

    \b
    The task must be self-trained (fedchain task create --self-trained): each client trains its own job.
    Its ServerApp wraps its strategy in fedchain.flower.IncentiveStrategy, its ClientApps reply through
    fedchain.flower.FedChainClient. Each client, with its own key in FEDCHAIN_PRIVATE_KEY:
      fedchain flower join --task 1 --data-size 600     # before the publisher starts the task
      fedchain flower withdraw --task 1                 # after the last round is final
    """


@flower.command()
@click.option("--task", "task_id", type=click.IntRange(min=1), required=True, help="The self-trained task.")
@click.option(
    "--data-size",
    type=click.IntRange(min=1),
    required=True,
    help="Training samples this client holds: its updates are weighted by it, and its replies must say the same.",
)
@session_options
def join(task_id: int, data_size: int, **options: Any) -> None:
    """Join a self-trained task: pay the deposit and commit to the data size (once; again is a no-op)."""
    from fedchain.flower.client import FedChainClient

    client = FedChainClient(session_from_options(**options), task_id)
    index = client.join(data_size)
    click.echo(f"{client.account} is client {index} of task {task_id}")


@flower.command()
@click.option("--task", "task_id", type=click.IntRange(min=1), required=True, help="The task.")
@session_options
def withdraw(task_id: int, **options: Any) -> None:
    """Finalise what is due, settle the ended task and withdraw this client's pay and deposit."""
    from fedchain.chain.erc20 import read_asset, task_asset
    from fedchain.flower.client import FedChainClient

    session = session_from_options(**options)
    client = FedChainClient(session, task_id)
    settlement, amount = client.withdraw()
    if settlement.pending:
        click.echo(f"rounds {list(settlement.pending)} are not final yet (challenge window); try again later")
        return
    asset = read_asset(session.transactor, task_asset(session.contracts.treasury, task_id))
    click.echo(f"withdrew {asset.format(amount)} of task {task_id} to {client.account}")


@flower.command()
@click.option(
    "--app",
    "app_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("examples/flower"),
    show_default=True,
    help="The Flower app to run (FedChain's example).",
)
@click.option(
    "--clients", type=click.IntRange(min=2), default=3, show_default=True, help="SuperNodes, one wallet each."
)
@click.option("--rounds", type=click.IntRange(min=1), default=3, show_default=True, help="Rounds of the task.")
@click.option(
    "--samples", type=click.IntRange(min=32), default=600, show_default=True, help="MNIST samples per client."
)
@click.option(
    "--free-rider",
    type=click.IntRange(min=0),
    help="Partition id of a client that trains nothing and sends the model back: screened out, paid nothing.",
)
@click.option(
    "--lost-reply",
    type=click.IntRange(min=0),
    help="Partition id of a client whose round-2 reply is lost after it committed: scored from the store, paid.",
)
@click.option(
    "--baseline/--no-baseline",
    default=True,
    show_default=True,
    help="Run the app without FedChain first (plain FedAvg), to compare round times in the same run.",
)
@click.option(
    "--block-time",
    type=click.FloatRange(min=0),
    default=1.0,
    show_default=True,
    help="Seconds between the local chain's blocks (0: a block per transaction).",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("runs/flower"),
    show_default=True,
    help="Run folder: deployment, store, Flower's logs, figures.",
)
@click.option(
    "--simulation",
    is_flag=True,
    help="Run the apps in Flower's simulation engine (needs Ray: `make bench-flower` builds .venv-flower) instead "
    "of a SuperLink and SuperNodes.",
)
@click.option(
    "--aggregate",
    type=click.Choice(["wrapped", "fedchain"]),
    default="wrapped",
    show_default=True,
    help="The model each round posts: Flower's FedAvg over the accepted updates, or FedChain's own strategy's.",
)
@click.option("--data-root", help="Folder with the MNIST files. [default: $FEDCHAIN_DATA_ROOT]")
def example(
    app_dir: Path,
    clients: int,
    rounds: int,
    samples: int,
    free_rider: int | None,
    lost_reply: int | None,
    baseline: bool,
    block_time: float,
    out: Path,
    data_root: str | None,
    simulation: bool,
    aggregate: str,
) -> None:
    """Run the Flower example with FedChain's incentives, end to end, and print who earned what.

    A local chain, a self-trained task, a SuperLink and one SuperNode per client as real processes,
    `flwr run` with IncentiveStrategy around Flower's FedAvg, settlement, withdrawals, and an audit that
    re-runs every score. Takes a few minutes on a laptop CPU.
    """
    from fedchain.console import print_table, stdout_console
    from fedchain.flower.example import ExampleSettings, run_example
    from fedchain.flower.render import example_tables

    settings = ExampleSettings(
        app_dir=app_dir,
        run_dir=out,
        clients=clients,
        rounds=rounds,
        samples=samples,
        free_rider=free_rider,
        lost_reply=lost_reply,
        baseline=baseline,
        block_time=block_time or None,
        data_root=data_root,
        simulation=simulation,
        aggregate=aggregate,
    )
    console = stdout_console(160)
    result = run_example(settings, progress=lambda line: click.echo(line, err=True))
    for table in example_tables(result):
        print_table(console, table)
    if not result.audit.passed:
        raise SystemExit(1)
