"""``fedchain deploy`` and ``fedchain chain``: the command line over the chain layer.

Later commands read the deployment through :func:`deployment_option` (a
``--deployment FILE`` option) and :func:`fedchain.chain.deployment.open_deployment`.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click

from fedchain.chain.deployment import DEFAULT_DEPLOYMENT_FILE, Deployment, Recipe
from fedchain.chain.deployment import deploy as deploy_with
from fedchain.chain.keys import KEYSTORE_PASSWORD_ENV, PRIVATE_KEY_ENV, resolve_account
from fedchain.chain.node import DEFAULT_CHAIN_ID, DEFAULT_MNEMONIC, AnvilNode, AnvilSettings, connect, mnemonic_account
from fedchain.chain.recipe import BURN_SINK, DEFAULT_VERDICT_WINDOW_S, ArbiterSettings, deploy_fedchain
from fedchain.errors import ConfigError, DeploymentError, SigningKeyError
from fedchain.files import keep_aside, writable_folder
from fedchain.signals import STOP_SIGNALS, handlers_set

log = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])

#: Seconds between blocks of a local chain started for a deployment that waits for confirmations.
CONFIRMING_BLOCK_TIME_S = 0.5


def deployment_option(function: F) -> F:
    """The ``--deployment FILE`` option every command after `fedchain deploy` takes."""
    return click.option(
        "--deployment",
        "deployment_file",
        type=click.Path(dir_okay=False, path_type=Path),
        default=DEFAULT_DEPLOYMENT_FILE,
        show_default=True,
        envvar="FEDCHAIN_DEPLOYMENT",
        help="The deployment file written by `fedchain deploy` (or $FEDCHAIN_DEPLOYMENT).",
    )(function)


def _password_prompt(label: str) -> str:
    return click.prompt(label, hide_input=True)


@dataclass(frozen=True)
class DeployRequest:
    """What `fedchain deploy` was asked to do."""

    rpc_url: str | None = None
    chain_id: int | None = None
    keystore: Path | None = None
    confirmations: int = 0
    out: Path = DEFAULT_DEPLOYMENT_FILE
    #: The arbiter committee and the sink (None: the deployer alone, allowed on a throw-away local chain only).
    arbiters: ArbiterSettings | None = None


def run_deploy(request: DeployRequest, *, recipe: Recipe | None = None, interactive: bool = False) -> Deployment:
    """Deploy as `fedchain deploy` does and save the deployment file; returns the deployment.

    Without ``rpc_url`` a local Anvil is started, deployed to and stopped
    again (its state is then gone; the file records where things were).
    A file already at ``out`` is kept aside (:func:`~fedchain.files.keep_aside`): a deployment
    file may be the only record of contracts that hold funds, so it is never overwritten,
    and its folder is checked before anything is deployed.
    """
    writable_folder(request.out.parent, option="--out")
    account = resolve_account(request.keystore, prompt=_password_prompt if interactive else None)
    if recipe is None and request.arbiters is not None:
        recipe = functools.partial(deploy_fedchain, arbiters=request.arbiters)
    if request.rpc_url is not None:
        if account is None:
            raise SigningKeyError(f"no key to deploy with to {request.rpc_url}")
        if recipe is None:
            raise ConfigError(
                "a deployment on a chain that stays up needs its arbiter committee, fixed for good at deployment",
                hint="name each member with --arbiter ADDRESS (each runs `fedchain verifier run`), and --quorum M",
            )
        w3 = connect(request.rpc_url, chain_id=request.chain_id)
        deployment = deploy_with(
            w3, account, rpc_url=request.rpc_url, recipe=recipe, confirmations=request.confirmations
        )
    else:
        settings = AnvilSettings(
            chain_id=request.chain_id or DEFAULT_CHAIN_ID,
            block_time=CONFIRMING_BLOCK_TIME_S if request.confirmations else None,
        )
        with AnvilNode(settings) as node:
            account = account or node.dev_account(0)
            deployment = deploy_with(
                node.web3(), account, rpc_url=node.rpc_url, recipe=recipe, confirmations=request.confirmations
            )
    backup = keep_aside(request.out)
    if backup is not None:
        log.warning("the deployment file that was at %s is kept as %s", request.out, backup)
    try:
        deployment.save(request.out)
    except OSError as err:  # the folder was checked, but disks fill up and mounts go away
        raise DeploymentError(
            f"the contracts are deployed, but the deployment file could not be written to {request.out}: {err.strerror or err}",
            hint=f"keep this record of where they are: {deployment.to_json()}",
        ) from err
    return deployment


@click.command()
@click.option(
    "--rpc-url", help="JSON-RPC URL of the chain to deploy to. Default: a local Anvil started and stopped for this."
)
@click.option(
    "--chain-id", type=int, help="The chain id the node must serve (refuses another); for the local chain, its id."
)
@click.option(
    "--keystore",
    type=click.Path(dir_okay=False, path_type=Path),
    help=f"Encrypted JSON keystore of the deployer (password from {KEYSTORE_PASSWORD_ENV} or a prompt).",
)
@click.option(
    "--confirmations",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Blocks to wait on top of each transaction.",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=DEFAULT_DEPLOYMENT_FILE,
    show_default=True,
    envvar="FEDCHAIN_DEPLOYMENT",
    help="Where to write the deployment file (or $FEDCHAIN_DEPLOYMENT, which the later commands read too; a file "
    "already there is renamed NAME.replaced-TIME.json, never lost).",
)
@click.option(
    "--arbiter",
    "arbiters",
    multiple=True,
    metavar="ADDRESS",
    help="A member of the arbiter committee that judges challenges (repeat for each; at most 31). Fixed for good: "
    "no task party chooses or changes it. Required with --rpc-url.",
)
@click.option(
    "--quorum",
    type=click.IntRange(min=1),
    help="Signatures a verdict needs: a majority of the members.  [default: the smallest majority]",
)
@click.option(
    "--verdict-window",
    default=str(DEFAULT_VERDICT_WINDOW_S),
    show_default=True,
    metavar="SECONDS",
    help="Seconds the committee has to judge a challenge before it expires neutral (1d, 3h, 90s also work).",
)
@click.option(
    "--sink",
    default=BURN_SINK,
    show_default=True,
    metavar="ADDRESS",
    help="Where forfeits and slashes go that no wronged party is owed. The zero address burns them.",
)
def deploy(
    rpc_url: str | None,
    chain_id: int | None,
    keystore: Path | None,
    confirmations: int,
    out: Path,
    arbiters: tuple[str, ...],
    quorum: int | None,
    verdict_window: str,
    sink: str,
) -> None:
    """Deploy the FedChain contracts and write the deployment file.

    \b
    The deployer's key comes from the environment, never from a flag:
      FEDCHAIN_PRIVATE_KEY=0x...                 a hex private key, or
      --keystore FILE                            an encrypted keystore
    Without --rpc-url the contracts go to a local Anvil started for this
    command and stopped after it (Anvil's public test account 0 deploys):
    a dry run of the whole set-up. For a chain that stays up, run
    `fedchain chain start` in another terminal and pass its URL.
    
    The arbiter committee is fixed at deployment, like everything else:
      --arbiter 0xA... --arbiter 0xB... --arbiter 0xC... --quorum 2 --verdict-window 1d
    """
    committee = None
    if arbiters:
        committee = ArbiterSettings.of(arbiters, quorum=quorum, verdict_window=parse_seconds(verdict_window), sink=sink)
    else:
        # Without members the throw-away local chain gets its deployer as the committee and burns forfeits.
        alone = [
            flag
            for flag, given in (
                ("--quorum", quorum is not None),
                ("--verdict-window", verdict_window != str(DEFAULT_VERDICT_WINDOW_S)),
                ("--sink", sink != BURN_SINK),
            )
            if given
        ]
        if alone:
            raise click.UsageError(
                f"{', '.join(alone)} set the arbiter committee: name its members too, with --arbiter ADDRESS for each"
            )
    request = DeployRequest(rpc_url, chain_id, keystore, confirmations, out, committee)
    deployment = run_deploy(request, interactive=True)
    click.echo(deployment.to_json(), nl=False)
    click.echo(f"deployment written to {out}", err=True)
    if rpc_url is None:
        click.echo(
            "the local chain was stopped and its state is gone; for one that stays up: "
            "`fedchain chain start`, then `fedchain deploy --rpc-url URL`",
            err=True,
        )


@click.group()
def chain() -> None:
    """Run a local chain node for development."""


@chain.command()
@click.option("--port", type=int, default=0, help="Port to listen on (default: a free one).")
@click.option("--chain-id", type=int, default=DEFAULT_CHAIN_ID, show_default=True)
@click.option("--block-time", type=float, help="Seconds between blocks (default: a block per transaction).")
def start(port: int, chain_id: int, block_time: float | None) -> None:
    """Start a local Anvil and keep it up until Ctrl-C, printing its URL."""
    stop = threading.Event()
    with (
        handlers_set(dict.fromkeys(STOP_SIGNALS, lambda *_: stop.set())),
        AnvilNode(AnvilSettings(port=port, chain_id=chain_id, block_time=block_time)) as node,
    ):
        account = mnemonic_account(DEFAULT_MNEMONIC, 0)
        click.echo(node.rpc_url)
        click.echo(
            f"chain id {chain_id}; to deploy with Anvil's public test account 0 ({account.address}):\n"
            f"  export {PRIVATE_KEY_ENV}=0x{account.key.hex()}\n"
            f"  fedchain deploy --rpc-url {node.rpc_url}\n"
            "Ctrl-C stops the node (and forgets the chain).",
            err=True,
        )
        while not stop.wait(0.5):
            if not node.running:
                raise click.ClickException("anvil exited")
    click.echo("stopped", err=True)


#: The participants of a rehearsal, each played by one of Anvil's ten public test accounts (by index).
ROLES: tuple[tuple[str, int], ...] = (
    ("PUBLISHER", 0),
    ("AGGREGATOR", 1),
    ("ARBITER1", 2),
    ("ARBITER2", 3),
    ("ARBITER3", 4),
    ("FOG1", 5),
    ("FOG2", 6),
    ("CLIENT1", 7),
    ("CLIENT2", 8),
    ("CLIENT3", 9),
)


@chain.command()
@click.option(
    "--rpc-url", default="http://127.0.0.1:8545", show_default=True, help="The local chain's URL (exported as RPC)."
)
def roles(rpc_url: str) -> None:
    """Print shell exports that cast Anvil's public test accounts as a task's participants, for a rehearsal.

    \b
    eval "$(fedchain chain roles --rpc-url URL)" sets RPC, and for each of
    PUBLISHER, AGGREGATOR, ARBITER1-3, FOG1-2 and CLIENT1-3 its key (NAME_KEY)
    and address (NAME). These keys are public: on a real chain each participant
    has its own funded key, never one of these.
    """
    lines = [f"export RPC={rpc_url}"]
    for name, index in ROLES:
        account = mnemonic_account(DEFAULT_MNEMONIC, index)
        lines.append(f"export {name}_KEY=0x{account.key.hex()} {name}={account.address}  # Anvil test account {index}")
    click.echo("\n".join(lines))


#: Seconds per unit of a duration written as ``90s``, ``15m``, ``3h`` or ``1d``.
DURATION_UNITS = {"s": 1, "m": 60, "h": 3_600, "d": 86_400}


def parse_seconds(text: str) -> int:
    """A duration in whole seconds from ``3600``, ``90s``, ``15m``, ``3h`` or ``1d``."""
    match = re.fullmatch(r"\s*(\d+)\s*([smhd]?)\s*", text.lower())
    if match is None or int(match.group(1)) < 1:
        raise ConfigError(f"{text!r} is not a duration", hint="write seconds (3600) or a number with s, m, h or d (1d)")
    return int(match.group(1)) * DURATION_UNITS[match.group(2) or "s"]
