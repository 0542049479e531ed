"""The publisher's actions on chain: create, start, cancel, abandon, settle a task, withdraw; and a task's overview.

Each function takes a :class:`~fedchain.agent.session.ChainSession` and
returns what happened; the command line (:mod:`fedchain.publisher.cli`) only
formats it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from fedchain.agent.chainloop import chain_now
from fedchain.agent.finality import finalize_due, pending_rounds
from fedchain.agent.session import ChainSession
from fedchain.chain.bindings import (
    Bid,
    ClientInfo,
    ClientSettled,
    DisputeAlreadyBonded,
    Job,
    JobSettled,
    JobStatus,
    TaskAbandoned,
    TaskAbandonTooEarly,
    TaskCreated,
    TaskParams,
    TaskState,
    TaskStatus,
    TaskUnknown,
    TaskWrongStatus,
    TreasuryNothingToWithdraw,
)
from fedchain.chain.blocktime import BlockInterval, block_interval, next_block_time
from fedchain.chain.erc20 import ensure_allowance, payment_value, read_asset, task_asset
from fedchain.chain.events import task_events
from fedchain.chain.tx import Receipt
from fedchain.errors import (
    AbandonTooEarly,
    ContractRevert,
    FedchainError,
    TaskNotAbandonable,
    TaskNotFound,
    TaskNotReady,
)
from fedchain.publisher.terms import PublishConfig, check_windows, windows_error
from fedchain.taskspec import TaskSpec, load_spec, put_initial_model, put_spec
from fedchain.units import ETHER, Asset, is_ether

log = logging.getLogger(__name__)

#: Gas limit of an ``abandonTask`` sent after the estimate refused it on a stale latest block (it used 96,064 on Anvil).
ABANDON_GAS = 150_000


@dataclass(frozen=True)
class CreatedTask:
    """A task just created: its id, the store keys of its spec and initial model, and the transaction."""

    task_id: int
    dataset_id: bytes
    model_id: bytes
    receipt: Receipt


def create_task(session: ChainSession, config: PublishConfig) -> CreatedTask:
    """Write the spec and the initial model to the store, then create the task on chain escrowing the budget.

    The publisher also posts the aggregator's bond when it said so (``fund_bond``) or is its own aggregator;
    otherwise the aggregator posts it (:func:`post_bond`, done by ``fedchain aggregator run``)."""
    dataset_id = put_spec(session.store, config.spec)
    model_id = put_initial_model(session.store, config.spec)
    params = config.params(model_id=model_id, dataset_id=dataset_id)
    aggregator = config.aggregator or session.address
    registry = session.contracts.task_registry
    if config.token is None:
        receipt = registry.create_task(params, aggregator, value=config.budget)
    else:
        ensure_allowance(session.transactor, config.token, session.contracts.treasury.address, config.budget)
        receipt = registry.create_token_task(params, aggregator, config.token, config.budget)
    (event,) = receipt.events_of(TaskCreated)
    log.info(
        "task created task=%d asset=%s aggregator=%s budget=%d bond=%d dataset_id=0x%s model_id=0x%s tx=%s",
        event.task_id,
        config.token or "ether",
        aggregator,
        config.budget,
        params.aggregator_bond,
        dataset_id.hex(),
        model_id.hex(),
        receipt.transaction_hash,
    )
    if config.fund_bond or aggregator == session.address:
        post_bond(session, event.task_id)
    return CreatedTask(event.task_id, dataset_id, model_id, receipt)


def post_bond(session: ChainSession, task_id: int) -> Receipt | None:
    """Post the task's aggregator bond from the session's account, unless it is posted already (then None)."""
    disputes = session.contracts.disputes
    if disputes.bonded(task_id):
        return None
    bond = session.contracts.task_registry.params(task_id).aggregator_bond
    try:
        receipt = disputes.post_bond(task_id, value=payment_value(session.contracts.treasury, task_id, bond))
    except DisputeAlreadyBonded:
        return None  # posted meanwhile by someone else: done
    log.info("aggregator bond posted task=%d amount=%d tx=%s", task_id, bond, receipt.transaction_hash)
    return receipt


def check_task_windows(session: ChainSession, config: PublishConfig) -> BlockInterval:
    """Refuse terms whose windows are too short on the session's chain (:func:`~fedchain.publisher.terms.check_windows`).

    Reads the chain's recent block interval, which it returns; raises
    :class:`~fedchain.errors.WindowsTooShort` naming every window too short for
    agents acting at ``config.confirmations``. Sends nothing.
    """
    interval = block_interval(session.w3)
    log.info("chain makes %s (over %d gaps)", interval.describe(), interval.gaps)
    problems = check_windows(config.terms, interval, config.confirmations)
    if problems:
        raise windows_error(problems, interval, config.confirmations)
    return interval


def require_task(session: ChainSession, task_id: int) -> TaskState:
    """The task's state; :class:`~fedchain.errors.TaskNotFound` (naming the ids there are) when there is no such task."""
    registry = session.contracts.task_registry
    try:
        state = registry.state(task_id)
    except TaskUnknown:
        state = None
    if state is None or state.status == TaskStatus.NONE:
        count = registry.task_count()
        there = f"tasks 1 to {count}" if count > 1 else "task 1" if count == 1 else "no task yet"
        raise TaskNotFound(f"there is no task {task_id} on this deployment ({there}; registry {registry.address})")
    return state


def job_waiting(job: Job, data_hash: bytes, now: int) -> str | None:
    """Why a client's job holds up the task's start, or None when it is ready: awarded with its data handed off,
    or vacant (no fog node won it: the client sits the task out)."""
    if job.status == JobStatus.NONE:
        return "has not opened its job's auction yet"
    if job.status == JobStatus.BIDDING:
        if now <= job.bidding_deadline:
            return f"its auction takes bids for {job.bidding_deadline - now} s more"
        if now <= job.reveal_deadline:
            return f"its auction takes reveals for {job.reveal_deadline - now} s more"
        return "its auction is over but not closed yet (the client closes it)"
    if job.status == JobStatus.AWARDED and data_hash == bytes(32):
        return "has not handed its data to the fog node that won its job yet"
    return None


@dataclass(frozen=True)
class Readiness:
    """Whether a task can start: how many clients joined, whether the aggregator is bonded, and the clients whose
    job is not ready (index, account, why)."""

    clients: int
    bonded: bool
    waiting: tuple[tuple[int, str, str], ...]

    @property
    def ready(self) -> bool:
        return self.clients > 0 and self.bonded and not self.waiting

    def reasons(self) -> list[str]:
        """One line per thing the start waits for."""
        lines = [f"client {index} ({account}): {why}" for index, account, why in self.waiting]
        if not self.clients:
            lines.append("no client has joined yet")
        if not self.bonded:
            lines.append("the aggregator has not posted its bond yet (`fedchain aggregator run` does when it starts)")
        return lines


def readiness(session: ChainSession, task_id: int) -> Readiness:
    """Read whether ``task_id`` can start (:class:`Readiness`); :class:`~fedchain.errors.TaskNotFound` if none."""
    require_task(session, task_id)
    contracts = session.contracts
    now = session.block_time()
    count = contracts.round_ledger.client_count(task_id)
    waiting: list[tuple[int, str, str]] = []
    if contracts.task_registry.params(task_id).self_trained:  # each client trains its own job: nothing to wait for
        return Readiness(count, contracts.disputes.bonded(task_id), ())
    for index in range(count):
        why = job_waiting(
            contracts.fog_auction.job(task_id, index), bytes(contracts.data_handoff.data_hash(task_id, index)), now
        )
        if why is not None:
            waiting.append((index, contracts.round_ledger.client(task_id, index).account, why))
    return Readiness(count, contracts.disputes.bonded(task_id), tuple(waiting))


def start_task(session: ChainSession, task_id: int, *, force: bool = False) -> Receipt:
    """Start round 1 (publisher only; the task needs at least one client and the aggregator's bond).

    An open task whose clients' jobs are not all ready (still in their auction, or their data not handed off to
    the fog node that won) is refused with :class:`~fedchain.errors.TaskNotReady` naming them, unless ``force``:
    a job still in its auction then cannot be won, and its client trains nothing.
    """
    state = require_task(session, task_id)
    if state.status == TaskStatus.OPEN and state.publisher == session.address:  # others: the contract's refusal
        ready = readiness(session, task_id)
        if ready.waiting and not force:
            raise TaskNotReady(
                f"task {task_id} is not ready to start:\n" + "\n".join(f"  - {line}" for line in ready.reasons())
            )
        for index, account, why in ready.waiting:
            log.warning("starting without client %d (%s): %s", index, account, why)
    receipt = session.contracts.task_registry.start_task(task_id)
    log.info("task started task=%d tx=%s", task_id, receipt.transaction_hash)
    return receipt


def start_when_ready(
    session: ChainSession,
    task_id: int,
    *,
    clients: int = 1,
    poll_s: float = 2.0,
    report: Callable[[Readiness], None] | None = None,
) -> Receipt:
    """Wait until at least ``clients`` clients joined, every job is ready and the aggregator is bonded, then start
    the task (:func:`start_task`); ``report`` sees every reading while waiting."""
    while True:
        ready = readiness(session, task_id)
        if ready.ready and ready.clients >= clients:
            return start_task(session, task_id)
        if report is not None:
            report(ready)
        time.sleep(poll_s)


def cancel_task(session: ChainSession, task_id: int) -> Receipt:
    """Cancel an open task; the budget is credited back to the publisher (publisher only)."""
    require_task(session, task_id)
    receipt = session.contracts.task_registry.cancel_task(task_id)
    log.info("task cancelled task=%d tx=%s", task_id, receipt.transaction_hash)
    return receipt


def abandon_task(session: ChainSession, task_id: int) -> Receipt:
    """Abandon a running task whose aggregator did not post the current round by its deadline plus ABANDON_GRACE.

    Anyone may; the unspent budget is credited back to the publisher at
    settlement, once the rounds posted before are final. Raises
    :class:`~fedchain.errors.AbandonTooEarly` saying from when it can be
    abandoned, or :class:`~fedchain.errors.TaskNotAbandonable` for a task that
    is not running.
    """
    require_task(session, task_id)
    registry = session.contracts.task_registry
    try:
        receipt = registry.abandon_task(task_id)
    except TaskAbandonTooEarly as refused:
        receipt = _abandon_if_due(session, task_id, refused)
    except TaskWrongStatus as err:
        raise TaskNotAbandonable(
            f"task {task_id} is {err.status.name.lower()}, not running: there is no round left for its aggregator to miss"
        ) from err
    (event,) = receipt.events_of(TaskAbandoned)
    log.info("task abandoned task=%d round=%d tx=%s", task_id, event.round, receipt.transaction_hash)
    return receipt


def _abandon_if_due(session: ChainSession, task_id: int, refused: TaskAbandonTooEarly) -> Receipt:
    """Abandon a task the gas estimate found too early, if the next block will be late enough.

    On an automining chain the estimate runs on the latest block, which may be
    hours old, while the block the transaction makes carries the time now; there
    it is sent with a fixed gas limit. Otherwise the estimate was right.
    """
    due = next_block_time(session.w3, block_interval(session.w3))
    if due <= refused.abandonable_after:
        opens = refused.abandonable_after + 1  # the contract needs a block time strictly after abandonableAfter
        raise AbandonTooEarly(
            f"task {task_id} cannot be abandoned before {_utc(opens)}, in {_duration(opens - due)} by the chain's clock: "
            "its aggregator may still post the current round until a day (ABANDON_GRACE) after the round's deadline",
            abandonable_from=opens,
        ) from refused
    registry = session.contracts.task_registry
    return registry.transactor.send(registry.address, registry.encode("abandonTask(uint256)", task_id), gas=ABANDON_GAS)


def _utc(timestamp: int) -> str:
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _duration(seconds: int) -> str:
    """``seconds`` in words: ``1 d 2 h``, ``23 h 59 min``, ``4 min 10 s``, ``9 s``."""
    days, rest = divmod(max(seconds, 0), 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, secs = divmod(rest, 60)
    parts = [(days, "d"), (hours, "h"), (minutes, "min"), (secs, "s")]
    first = next((i for i, (amount, _) in enumerate(parts) if amount), len(parts) - 1)
    return " ".join(
        f"{amount} {unit}" for amount, unit in parts[first : first + 2] if amount or first == len(parts) - 1
    )


@dataclass(frozen=True)
class Settlement:
    """What :func:`settle_task` did: the ledger's settlement (None if done before) and the jobs it settled; or,
    while posted rounds are still pending (``pending``), nothing yet."""

    ledger: Receipt | None
    jobs: tuple[int, ...]
    #: Posted rounds not final yet: settlement waits for them (try again later).
    pending: tuple[int, ...] = ()


def settle_task(session: ChainSession, task_id: int, jobs: Sequence[int] | None = None) -> Settlement:
    """Settle a finished, cancelled or abandoned task: finalise the rounds that are due
    (:func:`~fedchain.agent.finality.finalize_due`), then the clients (:func:`settle_clients`), then its jobs
    (:func:`settle_jobs`): ``jobs``, or every job when None. While a posted round is still pending (its
    challenge window, or a verdict) nothing is settled and ``pending`` says which. Idempotent and race-safe."""
    require_task(session, task_id)
    finalize_due(session, task_id)
    pending = tuple(pending_rounds(session, task_id))
    if pending:
        return Settlement(None, (), pending)
    receipt = settle_clients(session, task_id)
    if jobs is None:
        jobs = range(session.contracts.round_ledger.client_count(task_id))
    return Settlement(receipt, settle_jobs(session, task_id, jobs))


def settle_clients(session: ChainSession, task_id: int) -> Receipt | None:
    """RoundLedger.settle: pay the clients' earnings, bonuses and deposits; None when it was settled before.

    A settlement that reverts because another account settled first (in the same
    block, on a chain with a block time) counts as done: after a revert the chain
    is read again, and only a revert that left the task unsettled is raised.
    """
    ledger = session.contracts.round_ledger
    if ledger.settled(task_id):
        return None
    try:
        receipt = ledger.settle(task_id)
    except ContractRevert:
        if not ledger.settled(task_id):
            raise
        log.info("task settled by another account first task=%d", task_id)
        return None
    log.info("task settled task=%d tx=%s", task_id, receipt.transaction_hash)
    return receipt


def settle_jobs(session: ChainSession, task_id: int, jobs: Iterable[int]) -> tuple[int, ...]:
    """FogAuction.settleJobs over those of ``jobs`` not settled yet, in one transaction; returns the ones it settled.

    Race-safe: the contract skips a job someone else settled first (in the same
    block, on a chain with a block time), so a lost race settles nothing and is done.
    """
    auction = session.contracts.fog_auction
    views = {index: auction.job(task_id, index) for index in jobs}
    pending = [index for index, job in views.items() if job.status not in (JobStatus.NONE, JobStatus.SETTLED)]
    # An auction never closed settles once its reveals are over (its bidders may still reveal): the contract
    # skips it until then.
    now = chain_now(session)
    waiting = [index for index in pending if not views[index].closed and now <= views[index].reveal_deadline]
    for index in waiting:
        log.info(
            "job %d of task %d settles after its reveal deadline (%d)", index, task_id, views[index].reveal_deadline
        )
    pending = [index for index in pending if index not in waiting]
    if not pending:
        return ()
    receipt = auction.settle_jobs(task_id, pending)
    settled = tuple(event.client_index for event in receipt.events_of(JobSettled))
    log.info("jobs settled task=%d jobs=%s tx=%s", task_id, list(settled), receipt.transaction_hash)
    return settled


def withdraw(session: ChainSession, asset: str = ETHER, to: str | None = None) -> int:
    """Withdraw the signing account's whole claimable balance in ``asset`` (a token's address; default ether) to
    ``to`` (default: itself); returns the units withdrawn (0 when nothing was due)."""
    treasury = session.contracts.treasury
    amount = int(treasury.claimable_in(asset, session.address))
    if amount == 0:
        return 0
    try:
        if is_ether(asset) and to is None:
            receipt = treasury.withdraw()
        else:
            receipt = treasury.withdraw_to(asset, to or session.address)
    except TreasuryNothingToWithdraw:
        return 0
    log.info(
        "withdrew account=%s asset=%s to=%s units=%d tx=%s",
        session.address,
        "ether" if is_ether(asset) else asset,
        to or session.address,
        amount,
        receipt.transaction_hash,
    )
    return amount


def withdraw_task_asset(session: ChainSession, task_id: int) -> int:
    """Withdraw the signing account's claimable balance in the asset of ``task_id`` (what its agents do at the end)."""
    return withdraw(session, task_asset(session.contracts.treasury, task_id))


def withdraw_cost(session: ChainSession) -> int:
    """What a ``withdraw`` would cost the signing account in gas at the chain's current gas price, wei."""
    treasury = session.contracts.treasury
    gas = session.w3.eth.estimate_gas(
        {"from": session.address, "to": treasury.address, "data": "0x" + treasury.encode("withdraw()").hex()}
    )
    return int(gas) * int(session.w3.eth.gas_price)


@dataclass(frozen=True)
class ClientView:
    """One client of a task and its job."""

    index: int
    info: ClientInfo
    job: Job
    bids: tuple[Bid, ...]
    #: Why the job holds up the task's start (:func:`job_waiting`); None when it is ready.
    waiting: str | None = None
    #: Whether the client committed the hash of the data it handed to its fog node.
    data_handed_off: bool = False
    #: Its settlement (earnings over all rounds, final bonus, deposit returned) once the task is settled.
    settled: ClientSettled | None = None
    #: Whether its update of the current round is committed (by its fog node, or in a self-trained task its own).
    committed: bool = False

    @property
    def winner(self) -> Bid | None:
        """The bid training the job now, if any."""
        if self.job.status != JobStatus.AWARDED or self.job.winner >= len(self.bids):
            return None
        return self.bids[self.job.winner]


@dataclass(frozen=True)
class TaskView:
    """A task as the chain has it now: parameters, state, clients with their jobs, and its spec when found."""

    task_id: int
    params: TaskParams
    state: TaskState
    clients: tuple[ClientView, ...]
    spec: TaskSpec | None
    claimable_by_publisher: int
    #: Whether the aggregator's bond is posted.
    bonded: bool = False
    #: The last posted and the last final round.
    rounds: tuple[int, int] = (0, 0)
    #: Whether the clients were settled (paid their earnings, bonuses and deposits).
    ledger_settled: bool = False
    #: The task's money: ether, or its token's symbol and decimals.
    asset: Asset = field(default_factory=Asset)

    @property
    def status(self) -> TaskStatus:
        return self.state.status

    @property
    def readiness(self) -> Readiness:
        """Whether the task can start, as :func:`readiness` reads it."""
        waiting = tuple((c.index, c.info.account, c.waiting) for c in self.clients if c.waiting)
        return Readiness(len(self.clients), self.bonded, waiting)


def task_view(session: ChainSession, task_id: int) -> TaskView:
    """Read everything about ``task_id`` (:class:`~fedchain.errors.TaskNotFound` when there is no such task)."""
    contracts = session.contracts
    state = require_task(session, task_id)
    params = contracts.task_registry.params(task_id)
    ledger_settled = bool(contracts.round_ledger.settled(task_id))
    settlements = client_settlements(session, task_id) if ledger_settled else {}
    now = session.block_time()
    clients = []
    current = int(state.current_round)
    for i in range(contracts.round_ledger.client_count(task_id)):
        job = contracts.fog_auction.job(task_id, i)
        if params.self_trained:
            committed = current > 0 and contracts.round_ledger.own_commit(task_id, current, i)[1] != 0
        else:
            committed = job.paid_up_to >= current > 0
        data_hash = bytes(contracts.data_handoff.data_hash(task_id, i))
        clients.append(
            ClientView(
                index=i,
                info=contracts.round_ledger.client(task_id, i),
                job=job,
                bids=tuple(contracts.fog_auction.bids(task_id, i)),
                waiting=None if params.self_trained else job_waiting(job, data_hash, now),
                data_handed_off=data_hash != bytes(32),
                settled=settlements.get(i),
                committed=committed,
            )
        )
    try:
        spec = load_spec(session.store, params.dataset_id)
    except FedchainError as err:  # the overview still shows the chain's side without the spec
        log.warning(
            "task %d: spec 0x%s not readable from %s: %s", task_id, params.dataset_id.hex(), session.store.url, err
        )
        spec = None
    posted, final = contracts.round_ledger.rounds(task_id)
    asset = read_asset(session.transactor, task_asset(contracts.treasury, task_id))
    return TaskView(
        task_id,
        params,
        state,
        tuple(clients),
        spec,
        int(contracts.treasury.claimable_in(asset.address, state.publisher)),
        bonded=contracts.disputes.bonded(task_id),
        rounds=(int(posted), int(final)),
        ledger_settled=ledger_settled,
        asset=asset,
    )


def client_settlements(session: ChainSession, task_id: int) -> dict[int, ClientSettled]:
    """The task's ``ClientSettled`` events by client index (empty before settlement): what each client was paid."""
    events = task_events(
        session.w3,
        session.contracts.round_ledger.address,
        ClientSettled,
        task_id,
        from_block=session.deployment.block_number,
    )
    return {event.client_index: event for event in events}
