"""``fedchain client run``: one client of one task, from flags or a YAML file."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from fedchain.agent.session import SESSION_OPTIONS, session_from_options, session_options
from fedchain.config import load_yaml

#: Flags that set fields of the nested partition config (``partition:`` in the YAML file).
PARTITION_FLAGS = {"partitions": "n_clients", "partition": "kind", "partition_seed": "seed", "dirichlet_alpha": "alpha"}


def merge_flags(
    base: Mapping[str, Any], flags: Mapping[str, Any], nested: str, nested_flags: Mapping[str, str]
) -> dict[str, Any]:
    """The YAML mapping ``base`` updated by the flags given (neither None nor empty); the flags named in
    ``nested_flags`` (flag -> field) update the nested mapping ``base[nested]`` instead."""
    data = dict(base)
    inner = dict(data.get(nested) or {})
    for flag, value in flags.items():
        if value is None or value == ():
            continue
        if flag in nested_flags:
            inner[nested_flags[flag]] = value
        else:
            data[flag] = value
    if inner:
        data[nested] = inner
    return data


@click.group()
def client() -> None:
    """Take part in a task as a client: join, auction your training job, hand off your data, get paid.

    \b
    The signing key comes from FEDCHAIN_PRIVATE_KEY or --keystore. Example:
      fedchain client run --task 1 --partition-index 0 --partitions 5 --max-samples 600
    """


@client.command()
@click.option("--task", "task_id", type=click.IntRange(min=1), help="The task to join.")
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="YAML file of ClientConfig fields (flags win).",
)
@click.option("--name", help="The agent's name in logs and state.  [default: client]")
@click.option(
    "--state",
    "state_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="State file.  [default: .fedchain/client.json]",
)
@click.option("--partition-index", type=int, help="Which part of the dataset's split this client holds (0-based).")
@click.option("--partitions", type=int, help="Number of parts the dataset is split into.")
@click.option("--partition", type=click.Choice(["iid", "pow", "cla", "dir"]), help="How it is split.  [default: iid]")
@click.option("--partition-seed", type=int, help="Seed of the split (the same for every client of a task).")
@click.option("--dirichlet-alpha", type=float, help="Concentration of the dir split.")
@click.option("--max-samples", type=int, help="Keep at most this many samples.")
@click.option("--noisy-labels", type=float, help="Fault: fraction of labels replaced by a wrong class.")
@click.option("--flip-labels", is_flag=True, default=None, help="Fault: flip every label.")
@click.option("--epsilon", type=float, help="Local privacy budget per pixel. Default: the task spec's.")
@click.option(
    "--data-root", type=click.Path(file_okay=False, path_type=Path), help="Dataset folder. Default: FEDCHAIN_DATA_ROOT."
)
@click.option("--seed", type=int, help="Seed of the label and privacy noise.")
@click.option("--poll-interval", "poll_interval_s", type=float, help="Seconds between polls.")
@click.option(
    "--confirmations",
    type=click.IntRange(min=0),
    help="Blocks on top of an event before acting on it: the depth the task was created for.  [default: 0]",
)
@click.option(
    "--watch",
    type=click.Choice(["reexecute", "committee", "off"]),
    help="How it watches its own entries: re-score each posted round and re-execute its job when its update was "
    "screened out, challenging the aggregator or its fog node when they are wrong (reexecute); leave the "
    "re-execution to the arbiters (committee: risks its bond when its fog node was honest); or never challenge.  "
    "[default: reexecute]",
)
@click.option("--device", help="Torch device for re-scoring and re-execution.  [default: cpu]")
@session_options
def run(config_path: Path | None, **options: Any) -> None:
    """Join the task, open and close the job's auction, hand off the data, watch its own entries (challenging
    wrong ones within each round's challenge window), then settle and withdraw."""
    from fedchain.client.agent import ClientAgent
    from fedchain.client.config import load_client_config

    session = {key: options.pop(key) for key in SESSION_OPTIONS}
    data = merge_flags(load_yaml(config_path) if config_path else {}, options, "partition", PARTITION_FLAGS)
    if "task_id" not in data:
        raise click.UsageError("give the task to join: --task ID (or task_id in --config)")
    config = load_client_config(None, data)
    root = logging.getLogger()
    root.setLevel(min(root.level, logging.INFO))  # an agent's log lines are its output
    state = ClientAgent(session_from_options(**session), config).run()
    if state.finished:
        click.echo(f"{config.name}: task {config.task_id} settled; withdrew {state.data.get('withdrawn', 0)} wei")
    else:
        click.echo(f"{config.name} stopped at block {state.last_block}; run it again to resume")


@client.command()
@click.option("--task", "task_id", type=click.IntRange(min=1), required=True, help="The task.")
@click.option(
    "--round", "round_number", type=click.IntRange(min=1), help="One round's reward.  [default: every committed round]"
)
@click.option("--client", "client_address", help="The client's address.  [default: the signing account]")
@click.option(
    "--save",
    "save_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the reward (of --round, else the last round) to this safetensors file.",
)
@click.option(
    "--accuracy", is_flag=True, help="Also evaluate each reward on the task's validation set (needs the data root)."
)
@click.option("--data-root", help="Folder with the validation dataset.  [default: $FEDCHAIN_DATA_ROOT]")
@session_options
def reward(
    task_id: int,
    round_number: int | None,
    client_address: str | None,
    save_path: Path | None,
    accuracy: bool,
    data_root: str | None,
    **options: Any,
) -> None:
    """Show your rewards in kind (round, hash, proven on chain, accuracy) or save one.

    \b
    Every reward is fetched from the store and proven against the Merkle root the
    aggregator committed with its round (RoundLedger.verifyReward). Example:
      fedchain client reward --task 1 --save my-model.safetensors
    """
    from fedchain.rewards import client_rewards

    session = session_from_options(**options, read_only=True)
    rows = client_rewards(
        session,
        task_id,
        client_address or session.address,
        round_number=round_number,
        accuracy=accuracy,
        data_root=data_root,
    )
    for row in rows:
        shown = "" if row.accuracy is None else f"  accuracy {row.accuracy:.2%}"
        click.echo(
            f"round {row.round}  reward 0x{row.reward_hash.hex()}  verified on chain: {'yes' if row.verified else 'NO'}{shown}"
        )
    if save_path is not None:
        from fedchain.errors import RewardNotVerified
        from fedchain.files import write_atomic

        last = rows[-1]
        if not last.verified:
            raise RewardNotVerified(
                f"the reward of round {last.round} does not verify against the root on chain; not saved"
            )

        write_atomic(save_path, session.store.get(last.reward_hash))
        click.echo(f"saved the reward of round {last.round} to {save_path}")
