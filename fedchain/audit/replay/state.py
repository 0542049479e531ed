"""What the replay keeps while it walks a task's events: its copy of every client, job, round and challenge.

:class:`ReplayState` is the one mutable object of a replay; the handlers of
:mod:`~fedchain.audit.replay.tasks`, :mod:`~fedchain.audit.replay.rounds`,
:mod:`~fedchain.audit.replay.auctions`, :mod:`~fedchain.audit.replay.disputes` and
:mod:`~fedchain.audit.replay.money` read and update it, and record what the chain
must show (credits, deposits, effects in the same transaction) for the final
matching. Its helpers raise nothing: a mismatch is a finding in its
:class:`~fedchain.audit.checks.Tally`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from fedchain.audit.checks import CheckName, Tally
from fedchain.audit.history import NO_WINNER, CommitRecord, RoundRecord, SlashRecord, TaskHistory
from fedchain.chain import bindings as b
from fedchain.chain.abi import ChainEvent
from fedchain.fl.reputation import ClientReputation, MechanismParams, RevealedBid

H, A, R, P, E = CheckName.HISTORY, CheckName.AUCTIONS, CheckName.REPUTATION, CheckName.PAYMENTS, CheckName.ESCROW_TASK
D, S = CheckName.DISPUTES, CheckName.SINK

#: ``Reasons`` codes of the Treasury's ``Credited`` events.
BUDGET_REFUND = "BUDGET_REFUND"
CLIENT_REWARD = "CLIENT_REWARD"
DEPOSIT_RETURN = "DEPOSIT_RETURN"
DEPOSIT_FORFEIT = "DEPOSIT_FORFEIT"
FOG_PAYMENT = "FOG_PAYMENT"
BID_REFUND = "BID_REFUND"
BID_FORFEIT = "BID_FORFEIT"
ESCROW_REFUND = "ESCROW_REFUND"
BOND_REFUND = "BOND_REFUND"
BOND_FORFEIT = "BOND_FORFEIT"
BOND_SLASH = "BOND_SLASH"
CHALLENGE_REWARD = "CHALLENGE_REWARD"
CHALLENGE_REFUND = "CHALLENGE_REFUND"
CHALLENGE_FORFEIT = "CHALLENGE_FORFEIT"
FOG_COMPENSATION = "FOG_COMPENSATION"
FOG_SLASH = "FOG_SLASH"
#: Reasons of money taken from someone as a penalty: none may reach the publisher or the aggregator, who can
#: trigger them (DESIGN.md, Accountability).
FORFEIT_REASONS = frozenset({DEPOSIT_FORFEIT, BOND_SLASH, BOND_FORFEIT, CHALLENGE_FORFEIT, FOG_SLASH})
#: The sink by default: the zero address (burned).
BURN_SINK = "0x0000000000000000000000000000000000000000"
#: The fates of a challenged entry, weakest first (IDisputes.Fate).
FATES = ("posted", "neutral", "corrected", "void")
#: The entry (client index) of a round's accuracy (Disputes.ACCURACY_ENTRY).
ACCURACY_ENTRY = 2**32 - 1


def reason_name(reason: bytes) -> str:
    """A ``Reasons`` code (a left-aligned bytes32 string) as text."""
    return bytes(reason).rstrip(b"\0").decode("ascii", errors="replace")


def mechanism_of(params: b.TaskParams) -> MechanismParams:
    """The mechanism parameters of a task, from its on-chain ``TaskParams``."""
    return MechanismParams.of(params)


@dataclass(frozen=True)
class PoolParts:
    """What the task's Treasury pool should hold, rebuilt from events, by the contract that accounts for it (wei)."""

    #: TaskRegistry: the budget not yet spent.
    budget_left: int
    #: RoundLedger: client deposits of active clients before settlement.
    deposits_held: int
    #: RoundLedger: per-round payments credited to clients at settlement, not yet paid.
    rewards_held: int
    #: FogAuction: fog deposits and unreleased job escrow.
    auction_held: int
    #: Disputes: what is left of the aggregator's bond and the open challenges' bonds.
    disputes_held: int
    #: Treasury: everything deposited into and credited out of the pool.
    deposited: int
    credited: int

    @property
    def held(self) -> int:
        """deposited - credited: what the pool holds by the Treasury's own events."""
        return self.deposited - self.credited

    @property
    def parts(self) -> int:
        """The sum of the modules' shares; equals :attr:`held` when no wei is lost or created."""
        return self.budget_left + self.deposits_held + self.rewards_held + self.auction_held + self.disputes_held


@dataclass(frozen=True)
class Replay:
    """The outcome of replaying one task: its history, the mechanism used, the pool's parts and the findings."""

    history: TaskHistory
    mechanism: MechanismParams | None
    pool: PoolParts
    tally: Tally


@dataclass
class ClientState:
    index: int
    account: str
    deposit: int
    reputation: ClientReputation
    active: bool = True
    earned: int = 0
    data_size: int | None = None
    removed_round: int | None = None
    bonus: int | None = None
    deposit_returned: int | None = None
    data_hash: bytes | None = None
    commitment: bytes = b""


@dataclass
class BidState:
    bidder: str
    revealed: bool = False
    frequency: int = 0
    price: int = 0
    settled: bool = False
    #: The client's utility of the revealed bid (eq. 18), wei.
    utility: int | None = None
    #: ``ranked``, ``rejected`` (utility < 0, deposit to the client) or ``outranked`` (deposit back) once revealed.
    outcome: str = ""


@dataclass
class JobState:
    client_index: int
    data_size: int
    bids: list[BidState] = field(default_factory=list)
    #: ``bidding``, ``awarded``, ``vacant`` or ``settled``.
    status: str = "bidding"
    closed: bool = False
    winner: int = NO_WINNER
    price: int = 0
    winner_price: int = 0
    escrow: int = 0
    released: int = 0
    paid_up_to: int = 0
    bidding_deadline: int = 0
    reveal_deadline: int = 0
    #: The bid indices in contention, best first (FogAuction's ranking).
    ranked: tuple[int, ...] = ()
    commits: dict[int, b.UpdateCommitted] = field(default_factory=dict)

    def revealed(self) -> list[RevealedBid | None]:
        return [RevealedBid(bid.frequency, bid.price) if bid.revealed else None for bid in self.bids]


@dataclass
class PostedState:
    """A posted round (round 0: the priors), pending until its RoundFinalized."""

    event: b.RoundPosted | None
    #: Block time of the post (the next round's start, or the task's finish), once known.
    posted_at: int | None = None
    final: bool = False
    #: The clients still in the task (no final removal) when the round opened.
    in_task_at_start: tuple[int, ...] = ()


@dataclass
class ChallengeState:
    event: b.ChallengeOpened
    status: str = "open"
    fate: str = "posted"


@dataclass
class EntryState:
    """One challenged entry (round, client; ``ACCURACY_ENTRY`` for a round's accuracy) as Disputes keeps it."""

    fate: str = "posted"
    open: int = 0
    #: The earliest-opened upheld entry, accuracy or prior challenge: its proposal and its reward.
    first_upheld: int | None = None
    corrected: b.Measurement | None = None
    value: int = 0
    paid: bool = False
    applied: bool = False


class ReplayState:
    """Everything the replay knows of one task so far; see the module docstring."""

    def __init__(self, task_id: int, mechanism: MechanismParams | None, sink: str, verdict_window: int | None) -> None:
        self.task_id = task_id
        self.sink = sink
        self.verdict_window = verdict_window
        self.override = mechanism
        self.tally = Tally()
        self.created: b.TaskCreated | None = None
        self.mechanism: MechanismParams | None = mechanism
        self.status = "None"
        self.clients: list[ClientState] = []
        self.jobs: dict[int, JobState] = {}
        self.budget_left = 0
        self.current_round = 0
        self.round_started_at = 0
        self.started_at: int | None = None
        self.finished_at: int | None = None
        self.abandoned_at: int | None = None
        self.target_reached = False
        self.early_finish_voided = False
        self.settled_bonuses: int | None = None
        self.settled_refund: int | None = None
        self.expected_bonuses: list[int] | None = None
        #: The final bonuses eq. 16 asked for before scaling (None until computed at settlement).
        self.bonuses_demanded: int | None = None
        self.deposits_held = 0
        self.rewards_held = 0
        self.auction_held = 0
        self.deposited = 0
        self.credited = 0
        self.pending_removals: list[b.ClientRemoved] = []
        #: The clients still in the task when the current round opened (a removal counts once its round is final).
        self.in_task_at_start: tuple[int, ...] = ()
        #: The posted cross-task priors H_i (eq. 8), one per client; None until PriorsPosted (all 0).
        self.priors: tuple[int, ...] | None = None
        self.pending_close: tuple[int, bool] | None = None
        self.last_slash: b.FogSlashed | b.FogFraudSlashed | None = None
        #: Whether the last fraud slash's winner had committed the current round (which no later commit replaces).
        self.fraud_committed_current = False
        self.expected_credits: Counter[tuple[str, int, str]] = Counter()
        self.actual_credits: list[tuple[b.Credited, str]] = []
        self.expected_deposits: Counter[tuple[str, int]] = Counter()
        self.actual_deposits: list[b.Deposited] = []
        #: Fog deposits and fog payments by (transaction, fog): a batch call (``commitBids``,
        #: ``commitUpdates``) moves one fog's money for all its entries in one Treasury event.
        self.bid_deposits: Counter[tuple[str, str]] = Counter()
        self.fog_payments: Counter[tuple[str, str]] = Counter()
        self.commits: list[CommitRecord] = []
        #: A self-trained task's own commits by (round, client index).
        self.own_commits: dict[tuple[int, int], b.OwnUpdateCommitted] = {}
        self.slashes: list[SlashRecord] = []
        self.rounds: list[RoundRecord] = []
        self.disputes_held = 0
        self.bond_left = 0
        self.bond = 0
        self.bonder: str | None = None
        self.bond_returned: int | None = None
        self.bond_forfeited: int | None = None
        self.topped_up = 0
        self.posted: dict[int, PostedState] = {}
        self.finalized_up_to = 0
        self.pending_spend: tuple[int, int] | None = None
        self.challenges: dict[int, ChallengeState] = {}
        #: The entries challenges named: (round, client index) -> their fate and payment.
        self.entries: dict[tuple[int, int], EntryState] = {}
        #: Expected effects in one transaction: (tx, kind) -> what the event must say.
        self.expected_in_tx: dict[tuple[str, str], Any] = {}

    # ------------------------------------------------------------------ helpers

    @property
    def params(self) -> b.TaskParams:
        assert self.created is not None
        return self.created.params

    @property
    def publisher(self) -> str:
        assert self.created is not None
        return self.created.publisher

    @property
    def aggregator(self) -> str:
        assert self.created is not None
        return self.created.aggregator

    def credit(self, account: str, amount: int, reason: str) -> None:
        """A ``Credited`` event the contracts must emit (none for 0 wei)."""
        if amount:
            self.expected_credits[(account, amount, reason)] += 1

    def credit_sink(self, amount: int, reason: str) -> None:
        """A ``Credited`` event to the deployment's sink the contracts must emit (none for 0 wei)."""
        self.credit(self.sink, amount, reason)

    def expect_in_tx(self, tx: str, kind: str, what: Any) -> None:
        """An event of ``kind`` that transaction ``tx`` must also emit, saying ``what``."""
        self.expected_in_tx[(tx, kind)] = what

    def take_expected(self, tx: str, kind: str) -> Any:
        return self.expected_in_tx.pop((tx, kind), None)

    def client(self, index: int, at: ChainEvent) -> ClientState | None:
        if self.tally.require(H, 0 <= index < len(self.clients), f"client index {index} never joined", at):
            return self.clients[index]
        return None

    def job(self, index: int, at: ChainEvent, *statuses: str) -> JobState | None:
        job = self.jobs.get(index)
        if not self.tally.require(H, job is not None, f"no auction was opened for client {index}", at):
            return None
        assert job is not None
        self.tally.require(
            H, job.status in statuses, f"job {index} is {job.status}, expected {' or '.join(statuses)}", at
        )
        return job

    def require_status(self, at: ChainEvent, *statuses: str) -> None:
        self.tally.require(H, self.status in statuses, f"task is {self.status}, expected {' or '.join(statuses)}", at)

    def in_task(self) -> tuple[int, ...]:
        return tuple(i for i, c in enumerate(self.clients) if c.removed_round is None)

    def entry(self, round_number: int, client_index: int) -> EntryState:
        return self.entries.setdefault((round_number, client_index), EntryState())
