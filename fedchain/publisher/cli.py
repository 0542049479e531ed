"""``fedchain task ...`` and ``fedchain withdraw``: the publisher's commands, a thin layer over :mod:`.service`."""

from __future__ import annotations

import dataclasses
import re
import time
import typing
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click
from rich.console import Group
from rich.live import Live
from rich.table import Table

from fedchain.agent.session import (
    SESSION_OPTIONS,
    ChainSession,
    read_options,
    read_session,
    session_from_options,
    session_options,
)
from fedchain.chain.bindings import JobStatus, TaskAbandoned, TaskStatus
from fedchain.chain.erc20 import read_asset
from fedchain.config import checked_address
from fedchain.console import print_table, stdout_console
from fedchain.publisher.service import (
    ClientView,
    Readiness,
    TaskView,
    abandon_task,
    cancel_task,
    check_task_windows,
    create_task,
    settle_task,
    start_task,
    start_when_ready,
    task_view,
    withdraw_cost,
)
from fedchain.publisher.service import (
    withdraw as withdraw_balance,
)
from fedchain.publisher.terms import AMOUNT_FIELDS, WAD, TaskTerms, budget_warning, load_publish_config
from fedchain.taskspec import TaskSpec
from fedchain.units import Asset, ether

#: TaskSpec fields that `task create` offers as flags (the rest come from --config).
SPEC_FLAGS: tuple[str, ...] = (
    "dataset",
    "model",
    "num_classes",
    "in_channels",
    "lr",
    "momentum",
    "batch_size",
    "local_epochs",
    "max_grad_norm",
    "seed",
    "strategy",
    "privacy_epsilon",
    "train_from",
)

#: Columns of `task show` output when it does not go to a terminal.
PIPED_WIDTH = 240


def field_docs(cls: type) -> dict[str, str]:
    """``name -> text`` from the ``Attributes:`` section of a dataclass's docstring."""
    docs: dict[str, str] = {}
    current = None
    for line in (cls.__doc__ or "").splitlines():
        match = re.match(r"^\s{8}(\w+): (.*)$", line)
        if match:
            current = match.group(1)
            docs[current] = match.group(2)
        elif current and re.match(r"^\s{12}\S", line):
            docs[current] += " " + line.strip()
        elif not line.strip():
            current = None
    return {name: text.replace("``", "") for name, text in docs.items()}  # reST literals read plain in --help


def _field_options(
    cls: type, names: tuple[str, ...] | None, prefix: str
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Click options for the fields of dataclass ``cls`` (``--name-with-dashes``), default None (= the config's)."""
    docs = field_docs(cls)
    hints = typing.get_type_hints(cls)
    fields = [f for f in dataclasses.fields(cls) if names is None or f.name in names]

    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        for f in reversed(fields):
            hint = hints[f.name]
            default = f.default if f.default is not dataclasses.MISSING else None
            kind: Any = str
            if hint is bool:
                kind = bool
            elif hint is int and f.name not in AMOUNT_FIELDS:
                kind = int
            elif hint in (float, float | None):
                kind = float
            text = docs.get(f.name, "")
            shown = f"{default} wei" if f.name in AMOUNT_FIELDS and isinstance(default, int) else default
            flag = "--" + f.name.replace("_", "-")
            if kind is bool:
                flag = f"{flag}/--no-{f.name.replace('_', '-')}"
            function = click.option(
                flag, f"{prefix}{f.name}", type=kind, default=None, help=f"{text} [default: {shown}]"
            )(function)
        return function

    return decorate


def _task_id_option(function: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--task", "task_id", type=click.IntRange(min=1), required=True, help="The task id.")(function)


@click.group()
def task() -> None:
    """Publish and manage federated-learning tasks (publisher's commands).

    \b
    The signing key comes from FEDCHAIN_PRIVATE_KEY or --keystore. Typical flow:
      fedchain task create --rounds 5 --budget 1ether --aggregator 0x...   # prints the task id
      fedchain task show --task 1          # clients join and auction their jobs meanwhile
      fedchain task start --task 1         # round 1 begins; the aggregator runs the rounds
      fedchain task settle --task 1        # after the last round (the aggregator also does it)
      fedchain task abandon --task 1       # anyone, once the aggregator is a day late with a round
      fedchain withdraw                    # take out refunds and the bond (forfeits go to the sink)
    """


@task.command()
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="YAML file with the terms (top level or under terms:), spec:, budget and aggregator; flags override it.",
)
@click.option(
    "--budget", help="Reward budget escrowed with the task: wei, or with a unit (1ether, 500gwei). [default: 1ether]"
)
@click.option("--aggregator", help="Address of the aggregator that will post rounds. [default: the publisher]")
@click.option(
    "--token",
    help="Address of the ERC-20 token the task's money is in (the budget, deposits, bids and bonds, all then in its "
    "smallest unit: 100 USDC is 100000000). You approve the Treasury once, unlimited (it pulls only what your own calls pay).  [default: ether]",
)
@click.option(
    "--validation-size",
    type=click.IntRange(min=1),
    help="Samples of the test split the aggregator scores every client's model on. [default: 1000]",
)
@click.option(
    "--confirmations",
    type=click.IntRange(min=0),
    help="Blocks the task's fog nodes, clients and aggregator wait on top of an event before acting on it; "
    "the windows are checked against it and the chain's block interval. [default: 0, for a local chain]",
)
@click.option(
    "--fund-bond",
    is_flag=True,
    default=None,
    help="Post the aggregator's bond yourself, on its behalf (it comes back to you at settlement unless a challenge "
    "against the aggregator is upheld). [default: the aggregator posts it when it starts]",
)
@click.option(
    "--expected-clients",
    type=click.IntRange(min=1),
    help="Clients you expect to join: the budget is checked against their pay, with a warning and the budget that "
    "would cover it when it falls short.  [default: max_clients]",
)
@_field_options(TaskTerms, None, "term_")
@_field_options(TaskSpec, SPEC_FLAGS, "spec_")
@session_options
def create(
    config_path: Path | None,
    budget: str | None,
    aggregator: str | None,
    token: str | None,
    validation_size: int | None,
    confirmations: int | None,
    fund_bond: bool | None,
    expected_clients: int | None,
    **options: Any,
) -> None:
    """Create a task: write its spec and initial model to the store, escrow the budget on chain.

    Amounts are wei unless a unit is given (0.01ether, 20gwei); fractions
    (reputations, quality, accuracy) are plain numbers (0.1 = 10%); times are
    seconds. Prints the new task's id on stdout.

    On a chain with a block clock (a testnet, an L2) the bidding, reveal,
    round and challenge windows and the time tolerance must span enough blocks
    for the agents to act at their confirmation depth: a window too short is
    refused before anything is sent, with the smallest workable value for this chain.

    A round's money moves only after its challenge window (--challenge-window),
    and the task starts only once its aggregator is bonded (--aggregator-bond,
    by default the least the contract accepts: every deposit plus one round's
    most pay).

    The budget is checked against the pay the terms imply for the expected
    clients over every round (eq. 15 per round, eq. 16 at the end); when it
    falls short, a warning gives the figures and the budget that would do.
    Once a budget is spent, pay is scaled down pro rata.
    """
    terms = {k.removeprefix("term_"): v for k, v in options.items() if k.startswith("term_")}
    spec = {k.removeprefix("spec_"): v for k, v in options.items() if k.startswith("spec_")}
    if validation_size is not None:
        spec["validation"] = {"size": validation_size}
    config = load_publish_config(
        config_path,
        terms=terms,
        spec=spec,
        budget=budget,
        aggregator=aggregator,
        confirmations=confirmations,
        fund_bond=fund_bond,
        expected_clients=expected_clients,
        token=token,
    )
    session = session_from_options(**{k: options[k] for k in SESSION_OPTIONS})
    asset = read_asset(session.transactor, config.token) if config.token is not None else Asset()
    check_task_windows(session, config)
    warning = budget_warning(config, asset)
    if warning:
        click.secho(f"warning: {warning}", fg="yellow", err=True)
    created = create_task(session, config)
    click.echo(created.task_id)
    bond = config.terms.bond(config.budget)
    click.echo(
        f"task {created.task_id} created (budget {_money(asset, config.budget)}, "
        f"aggregator {config.aggregator or session.address}, "
        f"aggregator bond {_money(asset, bond)}, dataset id 0x{created.dataset_id.hex()}, model id 0x{created.model_id.hex()}, "
        f"tx {created.receipt.transaction_hash})",
        err=True,
    )


@task.command()
@_task_id_option
@click.option(
    "--wait",
    is_flag=True,
    help="Wait until every joined client's job is won and its data handed off (and the aggregator bonded), then start.",
)
@click.option(
    "--clients",
    "min_clients",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="With --wait: also wait until at least this many clients joined.",
)
@click.option("--force", is_flag=True, help="Start even though some clients' jobs are not ready (they train nothing).")
@session_options
def start(task_id: int, wait: bool, min_clients: int, force: bool, **options: Any) -> None:
    """Start round 1 of an open task once its clients' jobs are ready.

    A job is ready when a fog node won its auction and the client handed its
    data over (or nobody bid: the client then sits the task out). Starting
    earlier would shut the open auctions out, so it is refused, naming the
    clients still waiting, unless --force; --wait starts the moment they are
    all ready (`fedchain task show` says who is waiting).
    """
    if wait and force:
        raise click.UsageError("--wait and --force contradict each other: give one")
    session = session_from_options(**options)
    if wait:
        last: list[str] = []

        def report(ready: Readiness) -> None:
            lines = ready.reasons()
            if ready.clients < min_clients:
                lines.append(f"{ready.clients} of at least {min_clients} clients joined")
            stage = [re.sub(r"for \d+ s more", "", line) for line in lines]  # a countdown is not news
            if stage != last:
                last[:] = stage
                click.echo(f"task {task_id} waits for: " + "; ".join(lines), err=True)

        receipt = start_when_ready(session, task_id, clients=min_clients, report=report)
    else:
        receipt = start_task(session, task_id, force=force)
    click.echo(f"task {task_id} started (tx {receipt.transaction_hash})")


@task.command()
@_task_id_option
@session_options
def cancel(task_id: int, **options: Any) -> None:
    """Cancel an open task; its budget is credited back to you (then `fedchain withdraw`)."""
    receipt = cancel_task(session_from_options(**options), task_id)
    click.echo(f"task {task_id} cancelled (tx {receipt.transaction_hash})")


@task.command()
@_task_id_option
@session_options
def abandon(task_id: int, **options: Any) -> None:
    """Abandon a running task whose aggregator is a day (ABANDON_GRACE) past a round's deadline. Anyone may.

    Then `fedchain task settle` (once the rounds posted before are final) credits the clients their earnings,
    their deposits and the final bonus of a task whose remaining rounds were posted neutral at their deadlines,
    the publisher the unspent budget, and the sink the silent aggregator's bond.
    """
    receipt = abandon_task(session_from_options(**options), task_id)
    (event,) = receipt.events_of(TaskAbandoned)
    click.echo(
        f"task {task_id} abandoned at round {event.round} (tx {receipt.transaction_hash}); "
        f"next: fedchain task settle --task {task_id}"
    )


@task.command(name="top-up-bond")
@_task_id_option
@session_options
def top_up_bond_(task_id: int, **options: Any) -> None:
    """Make the aggregator's bond whole again after upheld challenges took from it (whoever posted it only).

    A bond that is not whole posts no round: the task stops until it is topped up, and a task stopped for a day
    past a round's deadline can be abandoned (its bond then goes to the sink). `fedchain aggregator run` tops up
    by itself when it posted the bond.
    """
    from fedchain.disputes.service import top_up_bond

    receipt = top_up_bond(session_from_options(**options), task_id)
    click.echo(
        f"task {task_id}: "
        + ("the bond is whole" if receipt is None else f"bond topped up (tx {receipt.transaction_hash})")
    )


@task.command()
@_task_id_option
@session_options
def settle(task_id: int, **options: Any) -> None:
    """Settle a finished, cancelled or abandoned task: bonuses, deposits and refunds become claimable. Anyone may.

    The rounds whose challenge window has passed are finalised first; while a posted round is still pending (its
    window, or a verdict) nothing is settled and the command says which rounds to wait for.
    """
    result = settle_task(session_from_options(**options), task_id)
    if result.pending:
        click.echo(
            f"task {task_id}: round(s) {', '.join(map(str, result.pending))} not final yet (challenge window "
            "or a verdict); settle again later"
        )
        return
    ledger = f"tx {result.ledger.transaction_hash}" if result.ledger else "already settled"
    click.echo(f"task {task_id} settled ({ledger}; jobs settled: {', '.join(map(str, result.jobs)) or 'none'})")


@task.command()
@_task_id_option
@read_options
def show(task_id: int, **options: Any) -> None:
    """Show a task's parameters, state, clients and jobs (reads only: no signing key needed).

    While the task is open, the data column says which clients' jobs are not ready for `fedchain task start`;
    once it is settled, the earned and bonus columns say what each client was paid.
    """
    # Piped output is not cut to 80 columns: addresses and hashes stay whole for scripts.
    console = stdout_console(PIPED_WIDTH)
    summary, clients = render_task(task_view(read_session(**options), task_id))
    console.print(summary)
    print_table(console, clients, labels=2)


@task.command()
@_task_id_option
@click.option(
    "--interval", type=click.FloatRange(min=0.1), default=2.0, show_default=True, help="Seconds between reads."
)
@read_options
def watch(task_id: int, interval: float, **options: Any) -> None:
    """Watch a task live until it is settled: its auctions, hand-offs, commits, posted and final rounds, and pay.

    On a terminal the tables of `fedchain task show` are redrawn in place; piped
    (into a file or a log) one line is written whenever the task moves on, then
    the final tables. Reads only: no signing key needed. Ctrl-C stops watching.
    """
    session = read_session(**options)
    console = stdout_console(PIPED_WIDTH)
    if console.is_terminal:
        with Live(console=console, auto_refresh=False) as live:
            for view in watched(session, task_id, interval):
                live.update(Group(progress_line(view), *render_task(view)), refresh=True)
        return
    last = ""
    for view in watched(session, task_id, interval):
        line = progress_line(view)
        if line != last:
            console.print(line)
            last = line
    summary, clients = render_task(view)
    console.print(summary)
    print_table(console, clients, labels=2)


def watched(session: ChainSession, task_id: int, interval: float) -> Iterator[TaskView]:
    """The task read every ``interval`` seconds, until and including the reading where it is done (:func:`watch_done`)."""
    while True:
        view = task_view(session, task_id)
        yield view
        if watch_done(view):
            return
        time.sleep(interval)


def watch_done(view: TaskView) -> bool:
    """Whether a watched task has nothing left to show: settled, or cancelled or abandoned with its ledger settled."""
    return view.status == TaskStatus.SETTLED or (
        view.status in (TaskStatus.CANCELLED, TaskStatus.ABANDONED) and view.ledger_settled
    )


def progress_line(view: TaskView) -> str:
    """Where a task stands, in one line: status, round, auctions and hand-offs, commits, posts, pay."""
    s, p = view.state, view.params
    jobs = Counter(c.job.status.name.lower() for c in view.clients)
    handed = sum(1 for c in view.clients if c.data_handed_off)
    committed = sum(1 for c in view.clients if c.committed)
    earned = sum(c.settled.earned + c.settled.bonus if c.settled else c.info.earned for c in view.clients)
    parts = [
        f"task {view.task_id}: {view.status.name.lower()}",
        f"round {s.current_round} of {p.rounds}",
        f"{len(view.clients)} client(s)",
        "jobs " + ", ".join(f"{n} {status}" for status, n in sorted(jobs.items())) if jobs else "no jobs",
        f"data handed off {handed}/{len(view.clients)}",
        f"round {s.current_round} committed {committed}/{len(view.clients)}" if s.current_round else "",
        f"posted {view.rounds[0]}, final {view.rounds[1]}",
        f"paid to clients {view.asset.format(earned)}, budget left {view.asset.format(s.budget_left)}",
    ]
    return " · ".join(part for part in parts if part)


@click.command()
@click.option("--anyway", is_flag=True, help="Withdraw even when the gas would cost more than the amount.")
@click.option(
    "--token",
    help="Withdraw your balance in this ERC-20 token (a token task's payments) instead of ether.  [default: ether]",
)
@click.option(
    "--to",
    "recipient",
    help="Send it to this address instead (a payee the token blacklists, a cold wallet).  [default: yourself]",
)
@session_options
def withdraw(anyway: bool, token: str | None, recipient: str | None, **options: Any) -> None:
    """Withdraw the signing account's claimable balance (refunds, rewards, returned deposits).

    An amount smaller than the gas the withdrawal would cost at the current gas price is left in the treasury
    (it stays yours) unless --anyway. Ether balances and each token's are apart: --token names the token.
    A transfer the token refuses (a paused token, a blacklisted recipient) changes nothing: try again later,
    or with --to.
    """
    session = session_from_options(**options)
    asset = read_asset(session.transactor, checked_address("--token", token)) if token is not None else Asset()
    to = checked_address("--to", recipient) if recipient is not None else None
    claimable = int(session.contracts.treasury.claimable_in(asset.address, session.address))
    if claimable and not anyway and asset.ether:
        cost = withdraw_cost(session)
        if cost >= claimable:
            click.echo(
                f"not withdrawn: {claimable} wei ({ether(claimable)} ether) is claimable, but the withdrawal would cost "
                f"about {cost} wei of gas at the current gas price; it stays yours in the treasury "
                "(--anyway to withdraw regardless)"
            )
            return
    amount = withdraw_balance(session, asset.address, to)
    if not amount:
        click.echo("nothing to withdraw")
    elif asset.ether:
        click.echo(f"withdrew {amount} wei ({ether(amount)} ether)" + (f" to {to}" if to else ""))
    else:
        click.echo(f"withdrew {asset.format(amount)} ({amount} units)" + (f" to {to}" if to else ""))


def _money(asset: Asset, units: int) -> str:
    """An amount as `task` commands print it: wei for ether, whole units with the symbol for a token."""
    return f"{units} wei" if asset.ether else f"{asset.format(units)} ({units} units)"


def _fraction(wad: int) -> str:
    return f"{wad / WAD:.4g}"


def render_task(view: TaskView) -> list[Table]:
    """The tables `task show` prints: parameters and state, then one row per client and its job."""
    p, s = view.params, view.state
    summary = Table(title=f"task {view.task_id}: {view.status.name.lower()}", show_header=False)
    summary.add_column(no_wrap=True)
    summary.add_column(overflow="fold")  # a hash or an address wraps whole rather than losing its end
    rows = [
        ("publisher", s.publisher),
        ("aggregator", s.aggregator),
        ("round", f"{s.current_round} of {p.rounds}"),
        (
            "money",
            "ether"
            if view.asset.ether
            else f"{view.asset.symbol} ({view.asset.address}, {view.asset.decimals} decimals)",
        ),
        ("budget", f"{_money(view.asset, s.budget)} ({_money(view.asset, s.budget_left)} left)"),
        ("target accuracy", _fraction(p.target_accuracy)),
        ("expected duration", f"{p.expected_duration} s"),
        ("psi / phi", f"{_money(view.asset, p.psi)} / {_money(view.asset, p.phi)} per s"),
        (
            "r_a_min / r_t_min / q_min",
            f"{_fraction(p.min_loss_reputation)} / {_fraction(p.min_time_reputation)} / {_fraction(p.min_quality)}",
        ),
        ("t_max / cap", f"{p.max_round_time} s / {_fraction(p.reputation_cap)}"),
        ("deposits client / fog", f"{_money(view.asset, p.client_deposit)} / {_money(view.asset, p.fog_deposit)}"),
        (
            ("round", f"{p.round_duration} s")
            if p.self_trained
            else ("round / bidding / reveal", f"{p.round_duration} / {p.bidding_duration} / {p.reveal_duration} s")
        ),
        ("challenge window / bond", f"{p.challenge_window} s / {_money(view.asset, p.challenge_bond)}"),
        (
            "aggregator bond",
            f"{_money(view.asset, p.aggregator_bond)} ({'posted' if view.bonded else 'not posted yet'})",
        ),
        ("rounds posted / final", f"{view.rounds[0]} / {view.rounds[1]}"),
        (
            ("training", "self-trained: each client its own job, no auction")
            if p.self_trained
            else ("auction", "second price" if p.second_price else "first price")
        ),
        ("dataset id", "0x" + p.dataset_id.hex()),
        ("model id", "0x" + p.model_id.hex()),
    ]
    if view.spec is not None:
        spec = view.spec
        rows.append(
            ("spec", f"{spec.dataset}, {spec.model}, strategy {spec.strategy}, lr {spec.lr}, batch {spec.batch_size}")
        )
    rows.append(("publisher claimable", _money(view.asset, view.claimable_by_publisher)))
    for key, value in rows:
        summary.add_row(key, str(value))
    if view.status == TaskStatus.OPEN:
        ready = view.readiness
        waiting = ", ".join(str(index) for index, _, _ in ready.waiting)
        summary.add_row(
            "ready to start",
            "yes"
            if ready.ready
            else f"no: waiting for client(s) {waiting}"
            if waiting
            else "no: no client yet"
            if not ready.clients
            else "no: the aggregator's bond",
        )
    clients = Table(title="clients and jobs")
    for column in (
        "#",
        "client",
        "status",
        "rounds",
        "r_a",
        "r_t",
        "earned (wei)",
        "bonus (wei)",
        "job",
        "data",
        "fog",
        "price (wei)",
        "paid up to",
    ):
        clients.add_column(column)
    for c in view.clients:
        winner = c.winner
        # Settlement moves the earnings to the treasury and zeroes them in the ledger: show what was paid.
        earned, bonus = (c.settled.earned, str(c.settled.bonus)) if c.settled else (c.info.earned, "-")
        clients.add_row(
            str(c.index),
            c.info.account,
            c.info.status.name.lower(),
            str(c.info.rounds),
            *((_fraction(c.info.loss_reputation), _fraction(c.info.time_reputation)) if c.info.rounds else ("-", "-")),
            str(earned),
            bonus,
            c.job.status.name.lower(),
            _data_column(c),
            winner.bidder if winner else "-",
            str(c.job.winner_price),
            str(c.job.paid_up_to),
        )
    return [summary, clients]


def _data_column(client: ClientView) -> str:
    """Whether a job's data is with its fog node: handed off, waiting (and why), or none (no fog node won it)."""
    if client.waiting:
        return f"waiting: {client.waiting}"
    if client.job.status == JobStatus.VACANT:
        return "none (no winner)"
    return "handed off" if client.data_handed_off else "-"
