"""``fedchain demo``: for now, the contracts deployed to a local chain it starts, printed.

A later issue replaces this with the whole system end to end (publisher,
clients, fog nodes, aggregator, auditor) on that chain.
"""

from __future__ import annotations

from pathlib import Path

import click

from fedchain.chain.commands import DeployRequest, run_deploy
from fedchain.chain.deployment import DEFAULT_DEPLOYMENT_FILE


@click.command()
@click.option(
    "--out", type=click.Path(dir_okay=False, path_type=Path), default=DEFAULT_DEPLOYMENT_FILE, show_default=True,
    help="Where to write the deployment file.",
)
def demo(out: Path) -> None:
    """Start a local chain, deploy the FedChain contracts, print the deployment, stop the chain."""
    deployment = run_deploy(DeployRequest(out=out))
    click.echo(f"FedChain deployed on a local chain (chain id {deployment.chain_id}) by {deployment.deployer}:")
    width = max((len(c.name) for c in deployment.contracts), default=0)
    for contract in deployment.contracts:
        click.echo(f"  {contract.name:<{width}}  {contract.address}  code {contract.code_hash[:18]}...")
    click.echo(f"deployment file: {out}; the local chain was stopped (its state is gone).")
