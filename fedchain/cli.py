"""The ``fedchain`` command: a thin layer over the packages.

Subcommands are registered by import path and imported only when used, so
``fedchain --help`` answers at once without loading torch or web3. Every
:class:`~fedchain.errors.FedchainError` is caught here, in one place, and
printed with its hint; the exit status is then 1 (2 for usage errors).
"""

from __future__ import annotations

import importlib
import logging
import sys
from typing import Any

import click

from fedchain.errors import FedchainError

#: name -> ("module:attribute", one-line help). The attribute is a click command or group.
COMMANDS: dict[str, tuple[str, str]] = {
    "deploy": (
        "fedchain.chain.commands:deploy",
        "Deploy the FedChain contracts (to a local chain it starts, or --rpc-url).",
    ),
    "chain": ("fedchain.chain.commands:chain", "Run a local chain node for development."),
    "bench": ("fedchain.bench:bench", "Measure gas and training speed; prints figures (--json for machines)."),
    "simulate": ("fedchain.experiments.simulate:simulate", "Run a federated experiment in one process, no chain."),
    "reproduce": ("fedchain.experiments.reproduce:reproduce", "Reproduce the papers' tables on real data."),
    "demo": ("fedchain.demo:demo", "Run the whole system on a local chain and print who earned what."),
    "task": ("fedchain.publisher.cli:task", "Publish and manage tasks: create, start, watch, show, settle, cancel."),
    "withdraw": ("fedchain.publisher.cli:withdraw", "Withdraw your claimable balance (refunds, rewards, deposits)."),
    "aggregator": (
        "fedchain.aggregator.cli:aggregator",
        "Run a task's aggregator: verify, score, aggregate, post rounds.",
    ),
    "audit": (
        "fedchain.audit.cli:audit",
        "Replay a task's events, recompute every payment, check the money and the store.",
    ),
    "fog": ("fog.cli:fog", "Run a fog node: bid for training jobs, train the jobs won, commit updates."),
    "client": ("fedchain.client.cli:client", "Run a client: join a task, auction its training job, hand off its data."),
    "verifier": (
        "fedchain.verifier.cli:verifier",
        "Run a member of the arbiter committee: judge challenges, sign verdicts.",
    ),
    "challenge": (
        "fedchain.disputes.cli:challenge",
        "Challenge a posted round's entry or a fog update; list a task's challenges.",
    ),
    "flower": (
        "fedchain.flower.cli:flower",
        "Pay a Flower federation's clients: join and withdraw as a client, or run the Flower example.",
    ),
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use."""

    def __init__(self, *args: Any, lazy: dict[str, tuple[str, str]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self._lazy))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self._lazy:
            target, _ = self._lazy[name]
            module_name, attribute = target.split(":")
            try:
                module = importlib.import_module(module_name)
            except ModuleNotFoundError as err:
                if err.name and module_name.startswith(err.name):
                    return _unavailable(name)
                raise
            return getattr(module, attribute)
        return super().get_command(ctx, name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, self._lazy[name][1]) for name in sorted(self._lazy)]
        rows += [(name, cmd.get_short_help_str()) for name, cmd in sorted(self.commands.items())]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _unavailable(name: str) -> click.Command:
    @click.command(name=name, help="Not available in this build.")
    def command() -> None:
        raise FedchainError(f"the `{name}` command is not part of this build yet")

    return command


@click.group(
    cls=LazyGroup,
    lazy=COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.option("-v", "--verbose", count=True, help="More log output (-v info, -vv debug).")
@click.version_option(package_name="fedchain")
def cli(verbose: int) -> None:
    """FedChain: pay fairly for a model trained on data you cannot see.

    \b
    Typical session on a local chain:
      fedchain demo                      # everything, end to end, in a few minutes
      fedchain chain start               # a local chain that stays up (prints its URL)
      fedchain deploy --rpc-url URL      # the contracts (writes .fedchain/deployment.json)
      fedchain task create --config task.yaml   # as the publisher (prints the task id)
      fedchain aggregator run / fog run / client run  # each in its own terminal
      fedchain verifier run              # each member of the deployment's arbiter committee
      fedchain task start --task 1 --wait  # round 1, once the clients' data is with their fog nodes
      fedchain task watch --task 1       # a live table of the task until it ends
      fedchain audit --task 1            # replay the chain, recompute every wei
    Without a chain:
      fedchain simulate --config configs/mnist-fedave-dir.yaml  # one experiment: metrics, plots
      fedchain reproduce fairness        # the papers' tables on real MNIST
      fedchain bench train               # trainer speed against a plain loop

    Every command has its own --help.
    """
    level = logging.WARNING - 10 * verbose
    logging.basicConfig(level=max(level, logging.DEBUG), format="%(asctime)s %(levelname)-7s %(name)s: %(message)s")


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the CLI and turn FedChain errors into a message and exit status 1."""
    try:
        cli.main(args=argv, prog_name="fedchain", standalone_mode=False)
    except FedchainError as err:
        click.secho(f"error: {err}", fg="red", err=True)
        return 1
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return 130
    except click.ClickException as err:
        err.show()
        return err.exit_code
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
