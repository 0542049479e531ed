"""``fedchain challenge``: challenge a posted entry or a fog update by hand, list a task's challenges, expire one."""

from __future__ import annotations

from typing import Any

import click

from fedchain.agent.session import read_options, read_session, session_from_options, session_options


@click.group()
def challenge() -> None:
    """Challenges of posted rounds (the agents open them by themselves; these are for people)."""


@challenge.command()
@click.option("--task", "task_id", type=click.IntRange(min=1), required=True, help="The task.")
@click.option(
    "--round", "round_number", type=click.IntRange(min=1), required=True, help="A posted, not yet final round."
)
@click.option(
    "--client", "client_index", type=click.IntRange(min=0), required=True, help="The client whose entry is wrong."
)
@click.option("--quality", type=click.FloatRange(min=0), required=True, help="What its quality should be (1.0 = 1e18).")
@click.option("--rejected", is_flag=True, help="Its update should have been rejected (scored quality 0).")
@session_options
def entry(task_id: int, round_number: int, client_index: int, quality: float, rejected: bool, **options: Any) -> None:
    """Challenge one client's entry of a posted round, naming what it should be; escrows the task's challenge bond.

    \b
    The entry's round time and commit stay as posted (the chain checked them). The arbiter committee
    re-scores the round: upheld, the entry is corrected and you get your bond back plus half the
    aggregator's bond; rejected, you lose your bond. Example:
      fedchain challenge entry --task 1 --round 2 --client 3 --quality 0.97
    """
    from fedchain.agent.finality import posted_measurements
    from fedchain.disputes.service import open_entry_challenge
    from fedchain.errors import DisputeError
    from fedchain.publisher.service import require_task
    from fedchain.units import WAD

    session = session_from_options(**options)
    require_task(session, task_id)
    posted = posted_measurements(session, task_id).get(round_number)
    if posted is None or client_index >= len(posted):
        raise DisputeError(
            f"round {round_number} of task {task_id} has no posted entry for client {client_index}",
            hint="give a posted round (`fedchain task show`) and a client index below the task's count",
        )
    proposed = posted[client_index]._replace(quality=0 if rejected else round(quality * WAD), accepted=not rejected)
    opened = open_entry_challenge(session, task_id, round_number, client_index, proposed)
    click.echo(f"challenge {opened.challenge_id} opened; a verdict is due by {opened.verdict_deadline} (chain time)")


@challenge.command()
@click.option("--task", "task_id", type=click.IntRange(min=1), required=True, help="The task.")
@click.option(
    "--round", "round_number", type=click.IntRange(min=1), required=True, help="A posted, not yet final round."
)
@session_options
def fog(task_id: int, round_number: int, **options: Any) -> None:
    """Challenge the update your fog node committed for your job in a round (you must be the job's client).

    \b
    The arbiter committee re-executes the job from its committed inputs (the round's start model, the
    data you handed off, the spec's settings and seed). Upheld: your round is void (not a removal), the
    fog node's deposit is slashed (the round's price back to you) and the job moves to the next bid.
    Rejected (it trained as told): you lose your bond. `fedchain client run` does this by itself.
    """
    from fedchain.chain.bindings import UpdateCommitted
    from fedchain.chain.events import LogQuery, iter_events
    from fedchain.disputes.service import open_fog_challenge
    from fedchain.errors import DisputeError

    session = session_from_options(**options)
    index = session.contracts.round_ledger.client_index(task_id, session.address)
    query = LogQuery(addresses=(session.contracts.fog_auction.address,), from_block=session.deployment.block_number)
    commits = [
        e
        for e in iter_events(session.w3, session.transactor.registry, query)
        if isinstance(e, UpdateCommitted) and (e.task_id, e.client_index, e.round) == (task_id, index, round_number)
    ]
    if not commits:
        raise DisputeError(
            f"no fog node committed round {round_number} of your job in task {task_id}",
            hint="a missed round is slashed without a challenge (`reportMissedRound`)",
        )
    opened = open_fog_challenge(session, task_id, round_number, index, commits[-1].fog)
    click.echo(
        f"challenge {opened.challenge_id} opened against {commits[-1].fog}; a verdict is due by "
        f"{opened.verdict_deadline} (chain time)"
    )


@challenge.command(name="list")
@click.option("--task", "task_id", type=click.IntRange(min=1), required=True, help="The task.")
@read_options
def list_(task_id: int, **options: Any) -> None:
    """Every challenge of a task: what it disputes, who opened it, and how it ended (no key needed)."""
    from fedchain.audit.replay import replay_task
    from fedchain.chain.events import LogQuery, fetch_events
    from fedchain.publisher.service import require_task

    session = read_session(**options)
    require_task(session, task_id)
    events = fetch_events(session.w3, session.transactor.registry, LogQuery.of(session.deployment))
    history = replay_task(task_id, events).history
    if not history.challenges:
        click.echo(f"task {task_id}: no challenge")
        return
    click.echo(f"{'id':>4} {'round':>5} {'client':>6} {'kind':<5} {'status':<8} {'fate':<9} challenger")
    for c in history.challenges:
        click.echo(
            f"{c.challenge_id:>4} {c.round:>5} {c.client_index:>6} {c.kind:<5} {c.status:<8} {c.fate:<9} {c.challenger}"
        )


@challenge.command(name="expire")
@click.option("--id", "challenge_id", type=click.IntRange(min=1), required=True, help="The challenge.")
@session_options
def expire_(challenge_id: int, **options: Any) -> None:
    """Expire a challenge the committee did not judge within its verdict window: its entry is neutral for the round
    (no pay, no removal) and the challenger gets its bond back. Anyone may."""
    from fedchain.disputes.service import expire

    receipt = expire(session_from_options(**options), challenge_id)
    click.echo(f"challenge {challenge_id} " + ("expired" if receipt is not None else "was closed already"))
