"""``fedchain demo``: the whole system end to end, as separate processes, on a local chain it starts.

It starts a local Anvil (or uses ``--rpc-url`` with the key in
``FEDCHAIN_PRIVATE_KEY``), deploys, creates a task as the publisher, starts
the fog nodes, the aggregator and the clients as separate OS processes (each
with its own key, state file and log under the run folder), shows the task's
progress while they run, then audits the finished task and prints a table per
participant and the audit's verdict. The exit status is 1 when the audit fails.

The cast (:func:`fedchain.system.demo_roster`): clients of different sizes,
every odd one with noisy labels; fog nodes with different frequencies, energy
costs and margins, fog 0 a free rider that commits zero updates; and the
deployment's arbiter committee (three ``verifier run`` processes, quorum two).
Fog 0's client re-executes its job when its update is screened out, sees that
fog 0 did not train it and challenges; the committee upholds, fog 0 is
slashed, the client keeps its deposit and its job moves to the next bid.
With ``--dishonest-aggregator`` the aggregator also posts quality 0 for an
honest client in round 1; that client's agent re-scores its entry, challenges,
the committee upholds, and the client ends paid as if scored honestly while
the aggregator's bond is slashed.
"""

from __future__ import annotations

import contextlib
import logging
import math
import signal
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from fedchain.console import stdout_console
from fedchain.errors import AuditFailed, ConfigError, SigningKeyError
from fedchain.files import writable_folder
from fedchain.signals import handlers_set
from fedchain.taskspec import TRAIN_FROM, TrainFrom
from fedchain.units import WAD, Asset, fixed, to_units

if TYPE_CHECKING:  # the command's --help must not load torch or web3
    from fedchain.audit import AuditReport
    from fedchain.publisher.terms import TaskTerms
    from fedchain.system import Roster, SystemRun, TaskProgress
    from fedchain.system.figures import JobFigures, Sent
    from fedchain.system.roster import ClientPlan, FogPlan
    from fedchain.taskspec import TaskSpec

log = logging.getLogger(__name__)

#: T = T_ex / N, the expected seconds per round the publisher sets (the time reputation's yardstick).
EXPECTED_ROUND_S = 40
#: The cap on every reputation: a fog node committing within T / cap earns the client the full time reputation.
REPUTATION_CAP = 2.0
#: c, cycles per sample, of the demo's task (scales the frequencies the fog nodes bid).
CYCLES_PER_SAMPLE = 5 * 10**8
#: The reward budget the publisher escrows, wei.
BUDGET_WEI = 10**17
#: The wei a mid-sized job costs per round: well below the payments, so the auction rewards speed first.
TARGET_PRICE_WEI = 5 * 10**13
#: The auctions' bidding and reveal windows by default, seconds, and in blocks at least (task create needs 3).
AUCTION_S, AUCTION_BLOCKS = 15, 4
#: How far a posted round time may be from the chain's (commit block time - round start), seconds; at least a block.
TIME_TOLERANCE_S = 5
#: Columns of the tables when the output is not a terminal (a log file, a test).
PIPED_WIDTH = 160
#: Seconds between two redraws of the progress (each reads the chain).
PROGRESS_EVERY_S = 1.0
#: The challenge window by default, seconds: a client re-scored its entry (and re-executed its job) and had its
#: challenge mined within 5 s of the post in the default demo on a busy 2-core machine; on a chain with a block time,
#: CHALLENGE_WORK_S for that work plus CHALLENGE_BLOCKS blocks (the post's, the one the client sees it in, the
#: challenge's and spares) when that is longer.
CHALLENGE_S, CHALLENGE_BLOCKS = 12, 5
#: Seconds of that work, as the publisher's window check allows (``fedchain.publisher.terms.CHALLENGE_WORK_S``).
CHALLENGE_WORK_S = 10
#: The demo stablecoin's units for one ether of the demo's amounts: 1000 fcUSD (6 decimals), so the budget is
#: 100 fcUSD, a client's deposit 10 fcUSD and a job's price a few cents a round.
DEMO_TOKEN_RATE = 1000 * 10**6
#: Money in ether, as the tables show it unless the demo runs in a token.
ETHER_ASSET = Asset()
#: The committee's verdict window in the demo's deployment, seconds (a real deployment: a day).
VERDICT_S = 120


@dataclass(frozen=True)
class DemoConfig:
    """What ``fedchain demo`` runs.

    Attributes:
        strategy: aggregation strategy of the task (fedavg, quality, cgsv, fedfaim, fedave, fair).
        train_from: what fog nodes train a client's next round from: ``global`` (the global model) or
            ``reward`` (the client's reward of the round before, proven on chain; fedfaim and fedave only).
        dataset: mnist or fashion-mnist.
        clients: number of client processes.
        fogs: number of fog-node processes.
        rounds: N.
        samples_per_client: the mean client data size D (clients hold 0.5 to 1.5 times it). 1000 lets
            LeNet-5 pass 90% in 3 rounds despite the free rider and the noisy clients (64 ended at 47%);
            the largest client hands off 4.7 MB and a fog node trains in under a second a round.
        rpc_url: an existing chain (with FEDCHAIN_PRIVATE_KEY funding everyone) instead of a local Anvil.
        run_dir: the run folder (None: runs/demo-TIMESTAMP); must be empty or new.
        keep_running: keep the chain and the fog nodes up after the summary, until Ctrl-C.
        seed: the task's seed (initial model, training) and the clients' split and noise.
        data_root: dataset folder (None: FEDCHAIN_DATA_ROOT).
        validation_size: samples of the publisher's validation set (1000: the accuracy it reports,
            about 93%, has a standard error of 0.8 points, against 1.1 with 500).
        round_duration: seconds from a round's start to its commit deadline.
        auction_duration: seconds of sealed bidding, and again of reveals; None: 15 s, or
            AUCTION_BLOCKS blocks of the chain's block time when that is longer (``block_time``, or with
            ``rpc_url`` the interval the demo measures on that chain).
        verify_scores: let the audit re-run the aggregator's scoring from the stored updates.
        block_time: seconds between the local Anvil's blocks, as on a public chain (2: an L2, 12:
            Ethereum); 0 mines a block per transaction at once (automine). Ignored with ``rpc_url``.
        dishonest_aggregator: the aggregator posts quality 0 for an honest client in round 1 (that client
            challenges, the committee upholds, the aggregator's bond is slashed).
        store: the blob store's URL (``s3://bucket/prefix``, with the AWS variables naming its credentials and
            endpoint); None: the run folder's ``store/``.
        challenge_window: seconds after each post during which entries can be challenged; None: 12 s, or
            CHALLENGE_WORK_S plus CHALLENGE_BLOCKS blocks of the chain's block time when that is longer.
        token: run the task in a demo stablecoin (fcUSD, 6 decimals, with permit) that the demo deploys and mints
            to everyone; its amounts are the ether ones at DEMO_TOKEN_RATE, and the fog nodes bid at that rate.
    """

    strategy: str = "fedavg"
    train_from: TrainFrom = "global"
    dataset: str = "mnist"
    clients: int = 5
    fogs: int = 3
    rounds: int = 3
    samples_per_client: int = 1000
    rpc_url: str | None = None
    run_dir: Path | None = None
    keep_running: bool = False
    seed: int = 0
    data_root: Path | None = None
    validation_size: int = 1000
    round_duration: int = 90
    auction_duration: int | None = None
    verify_scores: bool = True
    block_time: float = 0.0
    dishonest_aggregator: bool = False
    challenge_window: int | None = None
    store: str | None = None
    token: bool = False

    def __post_init__(self) -> None:
        for name in (
            "clients",
            "fogs",
            "rounds",
            "validation_size",
            "round_duration",
            "auction_duration",
            "challenge_window",
        ):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ConfigError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}")
        if self.block_time < 0:
            raise ConfigError(
                f"--block-time must be 0 (automine) or a positive number of seconds, got {self.block_time}"
            )
        if self.block_time and self.rpc_url is not None:
            raise ConfigError(
                "--block-time sets the local chain's clock; an --rpc-url chain has its own",
                hint="drop --block-time, or drop --rpc-url to run on a local Anvil",
            )
        if self.samples_per_client < 2:
            raise ConfigError(f"--samples-per-client must be at least 2, got {self.samples_per_client}")

    def auction_window_on(self, block_time: float) -> int:
        """Seconds of bidding, and again of reveals, on a chain with ``block_time`` seconds between blocks (0:
        automine): ``auction_duration``, or by default 15 s and at least AUCTION_BLOCKS blocks, so that fog nodes
        see an auction, bid and reveal."""
        if self.auction_duration is not None:
            return self.auction_duration
        return max(AUCTION_S, math.ceil(AUCTION_BLOCKS * block_time))

    @property
    def challenge_seconds(self) -> int:
        """Seconds of each round's challenge window on the local chain (:meth:`challenge_seconds_on`)."""
        return self.challenge_seconds_on(self.block_time)

    def challenge_seconds_on(self, block_time: float) -> int:
        """Seconds of each round's challenge window on a chain with ``block_time`` seconds between blocks (0:
        automine): ``challenge_window``, or by default 12 s and at least CHALLENGE_WORK_S plus CHALLENGE_BLOCKS
        blocks, so that a client sees the post, re-scores and gets its challenge mined."""
        if self.challenge_window is not None:
            return self.challenge_window
        return max(CHALLENGE_S, CHALLENGE_WORK_S + math.ceil(CHALLENGE_BLOCKS * block_time))

    @property
    def zeroed_client(self) -> str | None:
        """With ``dishonest_aggregator``: the name of the honest client the aggregator zeroes in round 1, a clean one
        that the free rider does not serve (fog 0 is fitted to the smallest client, client 0); None otherwise."""
        if not self.dishonest_aggregator:
            return None
        clean = [i for i in range(self.clients) if i % 2 == 0 and i != 0] or [0]
        return f"client-{clean[-1]}"

    def terms(self, block_time: float | None = None) -> TaskTerms:
        """The task's on-chain terms, their windows sized for a chain with ``block_time`` seconds between blocks
        (None: the local chain's ``block_time``; the demo on another chain passes the interval it measured)."""
        from fedchain.publisher.terms import TaskTerms

        clock = self.block_time if block_time is None else block_time
        return TaskTerms(
            rounds=self.rounds,
            expected_duration=EXPECTED_ROUND_S * self.rounds,
            psi=10**15,
            phi=10**12,
            min_loss_reputation=0.1,
            min_time_reputation=0.1,
            min_quality=0.5,
            max_round_time=self.round_duration,
            reputation_cap=REPUTATION_CAP,
            client_deposit=10**16,
            fog_deposit=2 * 10**16,
            cycles_per_sample=CYCLES_PER_SAMPLE,
            round_duration=self.round_duration,
            bidding_duration=self.auction_window_on(clock),
            reveal_duration=self.auction_window_on(clock),
            time_tolerance=max(TIME_TOLERANCE_S, math.ceil(clock)),
            max_clients=self.clients,
            challenge_window=self.challenge_seconds_on(clock),
            # Second price: the winner is paid up to the runner-up's price, so the client's escrow covers the
            # runner-up, who can take the job over when the winner is slashed (first price: only cheaper bids
            # qualify, and with every bid fast enough for the cap the winner is the cheapest).
            second_price=True,
        )

    def spec(self) -> TaskSpec:
        """The task spec every agent reads from the store."""
        from fedchain.taskspec import TaskSpec, ValidationSpec

        return TaskSpec(  # local training: the defaults that learn on MNIST-sized data (TrainConfig)
            dataset=self.dataset,
            model="lenet5",
            seed=self.seed,
            strategy=self.strategy,
            validation=ValidationSpec(size=self.validation_size, seed=self.seed),
            train_from=self.train_from,
        )

    def roster(self) -> Roster:
        """The clients and fog nodes (:func:`fedchain.system.demo_roster`)."""
        from fedchain.system.roster import AuctionScale, demo_roster

        scale = AuctionScale(CYCLES_PER_SAMPLE, EXPECTED_ROUND_S, REPUTATION_CAP, TARGET_PRICE_WEI)
        return demo_roster(self.clients, self.fogs, self.samples_per_client, scale)


@dataclass(frozen=True)
class DemoResult:
    """What a demo run produced."""

    task_id: int
    run_dir: Path
    report: AuditReport
    #: Seconds from the start to the audit's verdict.
    wall_s: float
    #: Each participant's mined transactions (and reverts), by name ("deployer" funded and deployed).
    transactions: dict[str, Sent]
    #: Jobs that went unbid and client-rounds without a commit.
    jobs: JobFigures


def run_demo(config: DemoConfig, console: Console) -> DemoResult:
    """Run the demo (module docstring); SIGTERM and Ctrl-C stop every process it started."""
    started = time.monotonic()
    from fedchain.chain.blocktime import block_interval
    from fedchain.chain.keys import resolve_account
    from fedchain.chain.node import AnvilNode, AnvilSettings, connect
    from fedchain.data.datasets import load_dataset, resolve_data_root
    from fedchain.publisher import PublishConfig
    from fedchain.store import open_store
    from fedchain.system import AGGREGATOR, PUBLISHER, AgentOptions, RunSettings, Supervisor, SystemRun, required_funds
    from fedchain.system.roster import GAS_ALLOWANCE_WEI

    data_root = resolve_data_root(config.data_root)
    load_dataset(config.dataset, train=True, root=data_root)  # a missing dataset fails here, before any process
    if config.store is not None:
        open_store(config.store)  # a missing bucket or refused credentials stop the demo here, before any process
    run_dir = _fresh_run_dir(config.run_dir)  # created here: a refused demo leaves no folder
    roster, spec = config.roster(), config.spec()
    with _sigterm_as_interrupt(), contextlib.ExitStack() as stack:
        if config.rpc_url is None:
            node = stack.enter_context(AnvilNode(AnvilSettings(accounts=1, block_time=config.block_time or None)))
            w3, rpc_url, funder = node.web3(), node.rpc_url, node.dev_account(0)
            clock = f"a block every {config.block_time:g} s" if config.block_time else "a block per transaction"
            console.print(f"local chain: Anvil at {rpc_url}, {clock}")
            terms = config.terms()
        else:
            funder = resolve_account()
            if funder is None:
                raise SigningKeyError("--rpc-url needs a funded key to deploy and pay the participants")
            w3, rpc_url = connect(config.rpc_url), config.rpc_url
            interval = block_interval(w3)  # the windows span the chain's own blocks, as with --block-time
            console.print(f"chain at {rpc_url}, {interval.describe()}, funded by {funder.address}")
            terms = config.terms(0.0 if interval.on_demand else interval.seconds)
        timeout = _timeouts(config, terms)
        supervisor = stack.enter_context(Supervisor())
        settings = RunSettings(
            run_dir, AgentOptions(data_root, seed=config.seed), verdict_window=VERDICT_S, store=config.store
        )
        run = SystemRun(w3, funder, rpc_url, settings, supervisor)
        run.deploy(rehearse=config.rpc_url is not None)
        needs = required_funds(
            roster, terms, BUDGET_WEI, publisher=PUBLISHER, aggregator=AGGREGATOR, verifiers=settings.verifiers
        )
        budget, asset = BUDGET_WEI, ETHER_ASSET
        if not config.token:
            run.fund(needs)
        else:  # gas in ether; every payment in the token, the ether amounts at the demo's rate
            run.fund(dict.fromkeys(needs, GAS_ALLOWANCE_WEI))
            minted = {
                name: to_units(wei - GAS_ALLOWANCE_WEI, DEMO_TOKEN_RATE) * 11 // 10 for name, wei in needs.items()
            }
            token = run.deploy_demo_token({name: units for name, units in minted.items() if units}, DEMO_TOKEN_RATE)
            asset = Asset(token, "fcUSD", 6)
            terms, budget = terms.in_units(DEMO_TOKEN_RATE), to_units(BUDGET_WEI, DEMO_TOKEN_RATE)
            console.print(f"demo stablecoin fcUSD at {token}: the task's money, {asset.format(budget)} of budget")
        task_id = run.create_task(PublishConfig(terms=terms, spec=spec, budget=budget))
        console.print(
            f"task {task_id} created: {config.rounds} rounds of {spec.strategy} on {spec.dataset}; run folder {run_dir}"
        )
        display = ProgressDisplay(run, console)
        with display:
            run.start_verifiers()
            run.start_fogs(roster.fogs, timeout_s=timeout["start"], tick=display.tick)
            zeroed = config.zeroed_client
            run.start_aggregator(zero_client=None if zeroed is None else (run.account(zeroed).address, 1))
            run.start_clients(roster.clients)
            run.await_handoffs(len(roster.clients), timeout_s=timeout["auction"], tick=display.tick)
            run.start_task(timeout_s=timeout["start"], tick=display.tick)
            run.await_settled([fog.name for fog in roster.fogs], timeout_s=timeout["rounds"], tick=display.tick)
        report = run.audit(verify_scores=config.verify_scores)
        wall_s = time.monotonic() - started
        transactions, jobs = _figures(run, roster, funder.address, report)
        console.print(participant_tables(roster, report, run, asset))
        console.print(*audit_verdict(report))
        kept = (
            "logs, states, store and audit.json"
            if config.store is None
            else f"logs, states and audit.json (store {config.store})"
        )
        console.print(f"wall time {wall_s:.0f} s; {kept} in {run_dir}")
        if config.keep_running:
            supervisor.stop([child.name for child in supervisor.children if child.spec.exits_when_done])
            console.print(
                f"the chain ({rpc_url}) and the fog nodes keep running; deployment file "
                f"{run.folder.deployment_file}, store {run.folder.store_url}. Ctrl-C stops them."
            )
            try:
                while True:
                    supervisor.check()
                    time.sleep(1.0)
            except KeyboardInterrupt:  # the way out of --keep-running: the verdict above stands
                console.print("stopping the chain and the fog nodes")
    return DemoResult(task_id, run_dir, report, wall_s, transactions, jobs)


def _figures(run: SystemRun, roster: Roster, funder: str, report: AuditReport) -> tuple[dict[str, Sent], JobFigures]:
    """What the run did on chain: every participant's transactions, unbid jobs and missed client-rounds."""
    from fedchain.system import AGGREGATOR, PUBLISHER
    from fedchain.system.figures import job_figures, transactions_by_sender

    names = {run.account(name).address: name for name in (PUBLISHER, AGGREGATOR, *run.settings.verifiers)}
    members: tuple[ClientPlan | FogPlan, ...] = (*roster.clients, *roster.fogs)
    names.update({run.account(plan.name).address: plan.name for plan in members})
    names[funder] = "deployer"
    return transactions_by_sender(run.w3, run.deployment.block_number, names), job_figures(report.history)


def _fresh_run_dir(requested: Path | None) -> Path:
    if requested is None:
        requested = Path("runs") / datetime.now(UTC).strftime("demo-%Y%m%d-%H%M%S")
    elif requested.is_dir() and any(requested.iterdir()):
        raise ConfigError(
            f"the run folder {requested} is not empty",
            hint="pass a new --run-dir (agents would resume from the states of another chain), or delete it",
        )
    return writable_folder(requested, option="--run-dir")


def _timeouts(config: DemoConfig, terms: TaskTerms) -> dict[str, float]:
    """Generous bounds for each stage (process start-up on a busy CPU dominates)."""
    return {
        "start": 240.0,
        "auction": 240.0 + terms.bidding_duration + terms.reveal_duration,
        "rounds": 180.0 + config.rounds * (config.round_duration + 60.0) + terms.challenge_window + VERDICT_S,
    }


def _sigterm_as_interrupt() -> contextlib.AbstractContextManager[bool]:
    """Turn SIGTERM into KeyboardInterrupt, so both unwind the same way (every child stopped)."""

    def interrupt(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    return handlers_set({signal.SIGTERM: interrupt})


class ProgressDisplay:
    """The task's progress and the processes' states: live on a terminal, a line per change elsewhere."""

    def __init__(self, run: SystemRun, console: Console) -> None:
        self.run = run
        self.console = console
        self._live = Live(console=console, refresh_per_second=4) if console.is_terminal else None
        self._last_read = 0.0
        self._last_line = ""

    def __enter__(self) -> ProgressDisplay:
        if self._live is not None:
            self._live.__enter__()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        if self._live is not None:
            self._live.__exit__(*exc_info)

    def tick(self) -> None:
        """Read the chain (at most once per PROGRESS_EVERY_S) and redraw."""
        now = time.monotonic()
        if now - self._last_read < PROGRESS_EVERY_S:
            return
        self._last_read = now
        progress = self.run.progress()
        line = progress_line(progress)
        if self._live is not None:
            self._live.update(Group(Text(line, style="bold"), self.processes()))
        elif line != self._last_line:
            self.console.print(line)
        self._last_line = line

    def processes(self) -> Table:
        table = Table(title="processes", title_justify="left", show_edge=False)
        for column, width in (("name", len("aggregator")), ("pid", 7), ("state", len("exited 137"))):
            table.add_column(column, no_wrap=True, min_width=width)  # always whole; the log line gets what is left
        table.add_column("last log line", overflow="ellipsis", no_wrap=True, ratio=1)
        for child in self.run.supervisor.children:
            code = child.returncode
            state = "running" if code is None else f"exited {code}"
            table.add_row(child.name, str(child.pid), state, child.log_tail(1).strip()[-100:])
        return table


def progress_line(progress: TaskProgress) -> str:
    """One line: status, round, jobs, commits, posts, accuracy."""
    accuracy = "-" if progress.accuracy is None else f"{progress.accuracy:.1%}"
    return (
        f"task {progress.status.name.lower()}: round {progress.round}/{progress.rounds} | "
        f"clients {progress.clients} | jobs awarded {progress.awarded}, data handed off {progress.handed_off} | "
        f"commits {progress.commits}/{progress.active} | posted {progress.posted}, final {progress.final} | "
        f"challenges {progress.challenges[0]} ({progress.challenges[1]} open) | accuracy {accuracy}"
    )


def _money(asset: Asset, units: int) -> str:
    """An amount of the task's asset in whole units, to 5 decimals (fewer when the token has fewer)."""
    return asset.number(units, min(5, asset.decimals))


def _fixed(value: int) -> str:
    return fixed(value, 3)


def _table(title: str, columns: tuple[str, ...], left: int) -> Table:
    """A compact table whose first ``left`` columns are text (left-aligned), the rest numbers."""
    table = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
    for i, column in enumerate(columns):
        table.add_column(column, justify="left" if i < left else "right", no_wrap=i == 0)
    return table


def participant_tables(roster: Roster, report: AuditReport, run: SystemRun, asset: Asset = ETHER_ASSET) -> Group:
    """Who earned what: a row per client (data, reputation, payments, deposit, final accuracy), a row per
    fog node (jobs, payments, slashes, deposits), and the publisher's budget and refund. Money in the task's
    asset (ETH, or the token's whole units)."""
    history = report.history
    members: tuple[ClientPlan | FogPlan, ...] = (*roster.clients, *roster.fogs)
    plans = {run.account(plan.name).address: plan for plan in members}
    names = {c.index: plans[c.account].name if c.account in plans else c.account for c in history.clients}
    final = history.rounds[-1].accuracy if history.rounds else None
    clients = _table(
        f"task {report.task_id}: clients ({asset.symbol}; reputation 1.0 = 1e18)",
        ("client", "data", "samples", "r_a", "r_t", "paid", "deposit back", "final accuracy"),
        2,
    )
    for client in sorted(history.clients, key=lambda c: names[c.index]):
        plan = plans.get(client.account)
        removed = client.removed_round is not None
        clients.add_row(
            names[client.index],
            plan.behaviour if plan else "",
            str(client.data_size),
            _fixed(client.loss_reputation),
            _fixed(client.time_reputation),
            _money(asset, client.earned + (client.bonus or 0)),
            f"0 (removed in round {client.removed_round})"
            if removed
            else _money(asset, history.credited_to(client.account).get("DEPOSIT_RETURN", 0)),
            "-" if removed or final is None else f"{final / WAD:.1%}",
        )
    fogs = _table(
        f"fog nodes ({asset.symbol})", ("fog", "behaviour", "jobs", "paid", "slashes", "deposits back", "lost"), 3
    )
    fog_deposit = history.task.params.fog_deposit if history.task.params is not None else 0
    for fog in sorted(history.fog_nodes, key=lambda address: plans[address].name if address in plans else address):
        plan = plans.get(fog)
        credited = history.credited_to(fog)
        jobs = sorted({names[c.client_index] for c in history.commits if c.fog == fog})
        slashes = [s for s in history.slashes if s.fog == fog]
        unrevealed = sum(1 for a in history.auctions for bid in a.bids if bid.bidder == fog and not bid.revealed)
        fogs.add_row(
            plan.name if plan else fog,
            plan.behaviour if plan else "",
            ", ".join(jobs) or "-",
            _money(asset, credited.get("FOG_PAYMENT", 0)),
            str(len(slashes)),
            _money(asset, credited.get("BID_REFUND", 0)),
            _money(asset, sum(s.forfeited for s in slashes) + unrevealed * fog_deposit),
        )
    publisher = history.credited_to(history.task.publisher)
    forfeits = sum(amount for reason, amount in publisher.items() if reason != "BUDGET_REFUND")
    summary = Text(
        f"publisher: budget {_money(asset, history.task.budget)}, refunded {_money(asset, publisher.get('BUDGET_REFUND', 0))}, "
        f"forfeits received {_money(asset, forfeits)}; "
        f"final accuracy {'-' if final is None else f'{final / WAD:.1%}'} after {len(history.rounds)} round(s)"
    )
    return Group(
        clients, Text(""), fogs, Text(""), accountability_table(report, names_of(run, roster), asset), Text(""), summary
    )


def names_of(run: SystemRun, roster: Roster) -> dict[str, str]:
    """Address -> participant name, for every participant of the run (the committee's members too)."""
    from fedchain.system import AGGREGATOR, PUBLISHER

    members: tuple[ClientPlan | FogPlan, ...] = (*roster.clients, *roster.fogs)
    named = [*(plan.name for plan in members), PUBLISHER, AGGREGATOR, *run.settings.verifiers]
    return {run.account(name).address: name for name in named}


def accountability_table(report: AuditReport, names: dict[str, str], asset: Asset = ETHER_ASSET) -> Group:
    """The aggregator's bond, every challenge with its verdict, and what went to the sink. Money in ETH."""
    history = report.history
    task = history.task
    challenges = _table(
        "challenges and verdicts", ("#", "round", "entry of", "against", "by", "verdict", "entry became"), 5
    )
    client_names = {c.index: names.get(c.account, c.account) for c in history.clients}
    for c in history.challenges:
        against = f"{names.get(c.accused, c.accused)}'s update" if c.kind == "fog" else f"aggregator ({c.kind})"
        challenges.add_row(
            str(c.challenge_id),
            str(c.round),
            client_names.get(c.client_index, str(c.client_index)),
            against,
            names.get(c.challenger, c.challenger),
            c.status,
            c.fate,
        )
    sink = history.to_sink
    slashed = sum(x.amount for x in history.credits if x.reason in ("BOND_SLASH", "CHALLENGE_REWARD"))
    lines = Text(
        f"aggregator bond: {_money(asset, task.bond)} posted by {names.get(task.bonder or '', task.bonder or '-')}, "
        f"{_money(asset, slashed)} slashed"
        + (f", {_money(asset, task.bond_topped_up)} topped up" if task.bond_topped_up else "")
        + f", {'-' if task.bond_returned is None else _money(asset, task.bond_returned)} returned; "
        f"sink ({'burned' if int(task.sink or '0x0', 16) == 0 else task.sink}): {_money(asset, sum(sink.values()))}"
        + (
            f" ({', '.join(f'{reason} {_money(asset, amount)}' for reason, amount in sorted(sink.items()))})"
            if sink
            else ""
        )
    )
    if not history.challenges:
        return Group(Text("challenges and verdicts: none"), lines)
    return Group(challenges, lines)


def audit_verdict(report: AuditReport) -> list[Any]:
    """The audit's checks table and its verdict line (as ``fedchain audit`` prints them)."""
    from fedchain.audit.render import checks_table, verdict_line

    return [checks_table(report), verdict_line(report)]


def _default(name: str, text: str, kind: type = str) -> Any:
    """A click option for the DemoConfig field ``name``, with its default shown."""
    return click.option(
        f"--{name.replace('_', '-')}", type=kind, default=getattr(DemoConfig, name), show_default=True, help=text
    )


@click.command()
@_default("strategy", "Aggregation strategy: fedavg, quality, cgsv, fedfaim, fedave, fair.")
@click.option(
    "--train-from",
    type=click.Choice(TRAIN_FROM),
    default=DemoConfig.train_from,
    show_default=True,
    help="What a client's next round trains from: the global model, or its reward (fedfaim, fedave).",
)
@_default("dataset", "mnist or fashion-mnist.")
@_default("clients", "Client processes.", int)
@_default("fogs", "Fog-node processes (fog 0 is a free rider).", int)
@_default("rounds", "Rounds N.", int)
@_default("samples_per_client", "Mean samples per client (clients hold 0.5x to 1.5x).", int)
@click.option(
    "--rpc-url", help="Use this chain instead of a local Anvil; FEDCHAIN_PRIVATE_KEY deploys and funds everyone."
)
@click.option(
    "--run-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Run folder (new or empty).  [default: runs/demo-TIMESTAMP]",
)
@click.option(
    "--keep-running/--no-keep-running",
    default=False,
    show_default=True,
    help="Keep the chain and the fog nodes up after the summary, until Ctrl-C.",
)
@_default("seed", "Seed of the model, training, split and noise.", int)
@click.option(
    "--data-root",
    type=click.Path(file_okay=False, path_type=Path),
    help="Dataset folder.  [default: FEDCHAIN_DATA_ROOT]",
)
@_default("round_duration", "Seconds per round before a missing commit is slashed.", int)
@click.option(
    "--auction-duration",
    type=int,
    help=f"Seconds of bidding, and of reveals.  [default: {AUCTION_S}, or {AUCTION_BLOCKS} blocks when longer]",
)
@click.option(
    "--verify-scores/--no-verify-scores",
    default=True,
    show_default=True,
    help="Let the audit re-run the aggregator's scoring.",
)
@_default(
    "block_time",
    "Seconds between the local chain's blocks, as on a public chain (2: an L2, 12: Ethereum); "
    "0 mines each transaction at once.",
    float,
)
@click.option(
    "--dishonest-aggregator",
    is_flag=True,
    default=False,
    help="The aggregator posts quality 0 for an honest client in round 1: watch that client challenge, the "
    "committee uphold, and the aggregator's bond pay for it.",
)
@click.option(
    "--challenge-window",
    type=int,
    help=f"Seconds after each post during which entries can be challenged.  [default: {CHALLENGE_S}, or "
    f"{CHALLENGE_WORK_S} s plus {CHALLENGE_BLOCKS} blocks when longer]",
)
@click.option(
    "--token",
    is_flag=True,
    default=False,
    help="Run the task in a demo stablecoin (fcUSD, 6 decimals) that the demo deploys: budget, deposits, bids, "
    "bonds and payments in fcUSD.",
)
@click.option(
    "--store",
    help="Blob store URL for every participant, such as s3://bucket/prefix (credentials and endpoint from the "
    "AWS_* variables or profile).  [default: the run folder's store/]",
)
def demo(**options: Any) -> None:
    """Run FedChain end to end: a local chain, a task, clients, fog nodes and the aggregator as
    separate processes on real data; then the audit, and who earned what.

    \b
    Everything one run writes (deployment, blob store, agents' states and logs, audit.json)
    goes to the run folder. The exit status is 1 when the audit fails. Ctrl-C stops every process.
    """
    config = DemoConfig(**options)
    console = stdout_console(PIPED_WIDTH)
    result = run_demo(config, console)
    if not result.report.passed:
        failed = ", ".join(name.value for name in result.report.failed_checks)
        raise AuditFailed(f"the audit of task {result.task_id} failed: {failed}")
