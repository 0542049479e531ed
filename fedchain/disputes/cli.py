"""``fedchain challenge``: challenge a posted entry or a fog update by hand, list a task's challenges, expire one."""

from __future__ import annotations

from typing import Any

import click

from fedchain.agent.session import ChainSession, read_options, read_session, session_from_options, session_options

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
        click.echo(f"waiting for round {round_number} of task {task_id} to be posted", err=True)
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
@click.option(
    "--segment",
    type=click.IntRange(min=0),
    default=None,
    help="Challenge this segment of the transcript without re-executing it yourself (you risk your bond). "
    "Without it the command re-executes every segment first and challenges the first that does not match.",
)
@click.option(
    "--device", default="cpu", show_default=True, help="Where to re-execute segments (the committee uses the CPU)."
)
@_wait_option
@session_options
def fog(
    task_id: int,
    round_number: int,
    segment: int | None,
    device: str,
    wait: bool,
    **options: Any,
) -> None:
    """Challenge the update your fog node committed for your job in a round (you must be the job's client).

    \b
    With the update the node committed the root of its training transcript: checkpoints every k steps of
    your job. The committee re-executes the segment your challenge names from the node's own checkpoint,
    with your data in the order the spec's seed fixes, and upholds when its end is beyond the segment
    tolerance (or the transcript does not bind the job: a missing checkpoint is the node's fault).
    Upheld: your round is void (not a removal), the node's deposit is slashed (the round's price back to
    you) and the job moves to the next bid. Rejected: you lose your bond.

    \b
    By default this command first re-executes the segments itself, in order, and challenges the first
    that does not match; when every one matches, it opens nothing. `fedchain client run` does this by
    itself. Examples:
      fedchain challenge fog --task 1 --round 2
      fedchain challenge fog --task 1 --round 2 --segment 3
    """
    from fedchain.disputes.service import await_post, open_fog_challenge
    from fedchain.errors import DisputeError
    from fedchain.publisher.service import require_task

    session = session_from_options(**options)
    if wait:
        require_task(session, task_id)
        click.echo(f"waiting for round {round_number} of task {task_id} to be posted", err=True)
        await_post(session, task_id, round_number)
    index = session.contracts.round_ledger.client_index(task_id, session.address)
    # Only the node that committed the round can be accused (the chain keeps who did).
    committer, _ = session.contracts.fog_auction.round_commit(task_id, index, round_number)
    if int(committer, 16) == 0:
        raise DisputeError(
            f"no fog node committed round {round_number} of your job in task {task_id}",
            hint="a missed round is slashed without a challenge (`reportMissedRound`)",
        )
    _warn_of_rejections(session, task_id, round_number, index)
    if segment is None:
        segment = _search_segment(session, task_id, round_number, index, device)
    opened = open_fog_challenge(session, task_id, round_number, index, committer, segment)
    click.echo(
        f"challenge {opened.challenge_id} opened against {committer} on segment {segment}; a verdict is due by "
        f"{opened.verdict_deadline} (chain time)"
    )


def _warn_of_rejections(session: ChainSession, task_id: int, round_number: int, index: int) -> None:
    """Warn (on stderr) of every earlier fog challenge of this job and round that the committee rejected."""
    from fedchain.chain.bindings import ChallengeKind, ChallengeOpened, ChallengeResolved, ChallengeStatus
    from fedchain.chain.events import LogQuery, fetch_events

    events = list(fetch_events(session.w3, session.transactor.registry, LogQuery.of(session.deployment)))
    segments = {
        e.challenge_id: e.value
        for e in events
        if isinstance(e, ChallengeOpened)
        and (e.task_id, e.round, e.client_index, e.kind) == (task_id, round_number, index, ChallengeKind.FOG)
    }
    for e in events:
        if isinstance(e, ChallengeResolved) and e.challenge_id in segments and e.status == ChallengeStatus.REJECTED:
            click.echo(
                f"warning: challenge {e.challenge_id} of this job's round {round_number} (segment "
                f"{segments[e.challenge_id]}) was rejected: the committee re-executed it within tolerance, and "
                "the same segment will be judged the same way",
                err=True,
            )


def _search_segment(session: ChainSession, task_id: int, round_number: int, index: int, device: str) -> int:
    """The first segment of the job's transcript that does not re-execute within tolerance (a progress bar on
    the terminal); a :class:`DisputeError` when every segment does (a challenge would lose its bond)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from fedchain.audit.replay import replay_task
    from fedchain.audit.rewards import reward_events
    from fedchain.chain.events import LogQuery, fetch_events
    from fedchain.disputes.judging import search_fog
    from fedchain.errors import DisputeError
    from fedchain.taskspec import load_spec
    from fedchain.transcripts.judge import SegmentJudgement, TranscriptJob
    from fedchain.transcripts.segments import SEGMENT_TOLERANCE

    events = list(fetch_events(session.w3, session.transactor.registry, LogQuery.of(session.deployment)))
    history = replay_task(task_id, events).history
    commitments = reward_events(task_id, events)
    assert history.task.params is not None
    spec = load_spec(session.store, history.task.params.dataset_id)
    with Progress(
        TextColumn("re-executing segments"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), transient=True
    ) as bar:
        shown = bar.add_task("segments", total=None)

        def sized(job: TranscriptJob) -> None:
            bar.update(shown, total=job.shape.segments)

        def advance(_: SegmentJudgement) -> None:
            bar.advance(shown)

        judgement = search_fog(
            session.store,
            spec,
            history,
            commitments,
            round_number,
            index,
            device=device,
            on_segment=advance,
            on_job=sized,
        )
    if judgement.excuse is not None:
        raise DisputeError(
            f"the fog node cannot be judged on round {round_number}: {judgement.excuse}",
            hint="a challenge would be rejected; nothing was opened",
        )
    convicting = judgement.convicting
    if convicting is None:
        raise DisputeError(
            f"every one of the {len(judgement.segments)} segments of your job's round {round_number} re-executes "
            f"within tolerance (largest distance {judgement.distance:.3g}, tolerance {SEGMENT_TOLERANCE}): the "
            "fog node trained as told, so nothing was opened",
            hint="to challenge anyway (and most likely lose your bond), name a segment with --segment N",
        )
    reason = convicting.fault or f"ends {convicting.distance:.3g} from its re-execution"
    click.echo(f"segment {convicting.segment}: {reason}")
    return convicting.segment


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
