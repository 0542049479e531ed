"""``fedchain challenge``: challenge a posted entry or a fog update by hand, list a task's challenges, expire one."""

from __future__ import annotations

from typing import Any

import click

from fedchain.agent.session import read_options, read_session, session_from_options, session_options

#: ``--wait`` of the commands that challenge a round.
_wait_option = click.option(
    "--wait",
    is_flag=True,
    help="Wait until the round is posted, then challenge at once (start it ahead: the challenge then goes out at the "
    "start of the round's challenge window).",
)


@click.group()
def challenge() -> None:
    """Challenges of posted rounds: a client's entry, a fog node's update, the accuracy that ended a task early,
    a cross-task prior (the agents open the first two by themselves; these are for people)."""


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
@_wait_option
@session_options
def entry(
    task_id: int, round_number: int, client_index: int, quality: float, rejected: bool, wait: bool, **options: Any
) -> None:
    """Challenge one client's entry of a posted round, naming what it should be; escrows the task's challenge bond.

    \b
    The entry's round time and commit stay as posted (the chain checked them). The arbiter committee
    re-scores the round: upheld, the entry is corrected and you get your bond back plus half an entry
    slash of the aggregator's bond (the first challenge opened of the entry takes it); rejected, you
    lose your bond. Example:
      fedchain challenge entry --task 1 --round 2 --client 3 --quality 0.97
    """
    from fedchain.agent.finality import posted_measurements
    from fedchain.disputes.service import await_post, open_entry_challenge
    from fedchain.errors import DisputeError
    from fedchain.publisher.service import require_task
    from fedchain.units import WAD

    session = session_from_options(**options)
    require_task(session, task_id)
    if wait:
        await_post(session, task_id, round_number)
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
@_wait_option
@session_options
def fog(task_id: int, round_number: int, wait: bool, **options: Any) -> None:
    """Challenge the update your fog node committed for your job in a round (you must be the job's client).

    \b
    The arbiter committee re-executes the job from its committed inputs (the round's start model, the
    data you handed off, the spec's settings and seed). Upheld: your round is void (not a removal), the
    fog node's deposit is slashed (the round's price back to you) and the job moves to the next bid.
    Rejected (it trained as told): you lose your bond. `fedchain client run` does this by itself.
    """
    from fedchain.disputes.service import await_post, open_fog_challenge
    from fedchain.errors import DisputeError
    from fedchain.publisher.service import require_task

    session = session_from_options(**options)
    if wait:
        require_task(session, task_id)
        await_post(session, task_id, round_number)
    index = session.contracts.round_ledger.client_index(task_id, session.address)
    # Only the node that committed the round can be accused (the chain keeps who did).
    committer, _ = session.contracts.fog_auction.round_commit(task_id, index, round_number)
    if int(committer, 16) == 0:
        raise DisputeError(
            f"no fog node committed round {round_number} of your job in task {task_id}",
            hint="a missed round is slashed without a challenge (`reportMissedRound`)",
        )
    opened = open_fog_challenge(session, task_id, round_number, index, committer)
    click.echo(
        f"challenge {opened.challenge_id} opened against {committer}; a verdict is due by "
        f"{opened.verdict_deadline} (chain time)"
    )


@challenge.command()
@click.option("--task", "task_id", type=click.IntRange(min=1), required=True, help="The task.")
@click.option(
    "--round", "round_number", type=click.IntRange(min=1), required=True, help="The round whose post ended the task."
)
@click.option(
    "--accuracy",
    type=click.FloatRange(min=0, max=1),
    required=True,
    help="What the posted model's validation accuracy is (a fraction, below the task's target).",
)
@session_options
def accuracy(task_id: int, round_number: int, accuracy: float, **options: Any) -> None:
    """Challenge the accuracy that finished a task early, at its target before its last round.

    \b
    The arbiter committee evaluates the posted model on the task's validation set. Upheld (or
    unanswered): the early finish moves no money (the final bonus counts the rounds left as posted at
    their deadlines) and you get your bond back, plus half an entry slash of the aggregator's bond when
    upheld; rejected, you lose your bond. Only that post's accuracy moves money. Example:
      fedchain challenge accuracy --task 1 --round 2 --accuracy 0.71
    """
    from fedchain.disputes.service import open_accuracy_challenge
    from fedchain.units import WAD

    session = session_from_options(**options)
    opened = open_accuracy_challenge(session, task_id, round_number, round(accuracy * WAD))
    click.echo(f"challenge {opened.challenge_id} opened; a verdict is due by {opened.verdict_deadline} (chain time)")


@challenge.command()
@click.option("--task", "task_id", type=click.IntRange(min=1), required=True, help="The task.")
@click.option("--client", "client_index", type=click.IntRange(min=0), required=True, help="The client.")
@click.option(
    "--prior", type=click.FloatRange(min=0), required=True, help="What its cross-task prior should be (1.0 = 1e18)."
)
@session_options
def prior(task_id: int, client_index: int, prior: float, **options: Any) -> None:
    """Challenge one client's cross-task prior (eq. 6), within the challenge window of the priors' post.

    \b
    The arbiter committee recomputes it from the earlier tasks on chain, with the auditor's code
    (`fedchain audit` checks it too). Upheld: round 1 applies your prior instead, you get your bond
    back and half an entry slash of the aggregator's bond; rejected, you lose your bond. Example:
      fedchain challenge prior --task 3 --client 1 --prior 0.42
    """
    from fedchain.disputes.service import open_prior_challenge
    from fedchain.units import WAD

    session = session_from_options(**options)
    opened = open_prior_challenge(session, task_id, client_index, round(prior * WAD))
    click.echo(f"challenge {opened.challenge_id} opened; a verdict is due by {opened.verdict_deadline} (chain time)")


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
    click.echo(f"{'id':>4} {'round':>5} {'client':>6} {'kind':<8} {'status':<8} {'fate':<9} challenger")
    for c in history.challenges:
        client = "-" if c.kind == "accuracy" else str(c.client_index)
        click.echo(f"{c.challenge_id:>4} {c.round:>5} {client:>6} {c.kind:<8} {c.status:<8} {c.fate:<9} {c.challenger}")


@challenge.command(name="expire")
@click.option("--id", "challenge_id", type=click.IntRange(min=1), required=True, help="The challenge.")
@session_options
def expire_(challenge_id: int, **options: Any) -> None:
    """Expire a challenge the committee did not judge within its verdict window: its entry is neutral for the round
    (no pay, no removal) and the challenger gets its bond back. Anyone may."""
    from fedchain.disputes.service import expire

    receipt = expire(session_from_options(**options), challenge_id)
    click.echo(f"challenge {challenge_id} " + ("expired" if receipt is not None else "was closed already"))
