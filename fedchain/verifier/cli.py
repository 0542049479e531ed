"""``fedchain verifier run``: a member of the deployment's arbiter committee."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from fedchain.agent.session import session_from_options, session_options

#: Where agents keep their state files unless told otherwise.
DEFAULT_STATE_DIR = Path(".fedchain/agents")


@click.group()
def verifier() -> None:
    """A member of the arbiter committee: judge challenges, sign verdicts."""


@verifier.command()
@click.option("--name", default="verifier", show_default=True, help="The agent's name in logs.")
@click.option("--data-root", help="Folder with the validation datasets. [default: $FEDCHAIN_DATA_ROOT]")
@click.option(
    "--device",
    default="cpu",
    show_default=True,
    help="Torch device for re-scoring and re-execution (the tolerances were measured on CPUs).",
)
@click.option(
    "--state",
    "state_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help=f"The agent's state file. [default: {DEFAULT_STATE_DIR}/verifier-ADDRESS.json]",
)
@click.option(
    "--poll-interval", type=click.FloatRange(min=0.01), default=1.0, show_default=True, help="Seconds between polls."
)
@click.option(
    "--confirmations", type=click.IntRange(min=0), default=0, show_default=True, help="Blocks before events count."
)
@session_options
def run(
    name: str,
    data_root: str | None,
    device: str,
    state_path: Path | None,
    poll_interval: float,
    confirmations: int,
    **options: Any,
) -> None:
    """Judge every challenge of the deployment, sign each verdict and see a quorum's verdict submitted.

    \b
    The signing key (FEDCHAIN_PRIVATE_KEY or --keystore) must be a member of the deployment's
    ArbiterCommittee, fixed when it was deployed (`fedchain deploy --arbiter ADDRESS ...`).
    An entry challenge is judged by re-scoring its round with the auditor's code; a fog challenge
    by re-executing the training job from its committed inputs. Members exchange their signed
    verdicts through the blob store (--store): they need the same store as the task's agents.
    SIGTERM stops it cleanly; a restart resumes.
    """
    from fedchain.verifier.service import Verifier, VerifierSettings  # torch: loaded only to run, not for --help

    session = session_from_options(**options)
    settings = VerifierSettings(
        state_path=state_path or DEFAULT_STATE_DIR / f"verifier-{session.address.lower()}.json",
        name=name,
        data_root=data_root,
        device=device,
        poll_interval_s=poll_interval,
        confirmations=confirmations,
    )
    state = Verifier(session, settings).run()
    click.echo(
        f"{name}: stopped at block {state.last_block}; {len(state.data.get('challenges', {}))} challenge(s) seen"
    )
