"""Replaying a task's events: rebuild its history and recompute every number the contracts produced.

:func:`replay_task` walks the events in chain order (block, log index) the way
the contracts applied them, keeping its own copy of every client's reputation,
every job and the task's budget. At each event it recomputes what the event
should say with the Python mechanism (:mod:`fedchain.fl.reputation`, exact 1e18
fixed point) and records any difference in a :class:`~fedchain.audit.checks.Tally`:

* auctions: the winner and price of eq. 18 from the revealed bids, the escrow,
  and the standby bid that takes a slashed job over;
* reputation: r_a and r_t of every scored client after every round (with the
  posted cross-task priors of eq. 8 applied), and who falls below the
  thresholds and is removed;
* payments: each final round's eq. 15 payments after pro-rata scaling, the
  budget left, fog payments, the final bonuses of eq. 16, refunds and forfeits;
  and that every ``Credited`` event is one of these (and each of these has one).
  A fog node's deposits and payments count per transaction: a batch call
  (``commitBids``, ``commitUpdates``) moves them for all its jobs in one event;
* accountability: the aggregator's bond, every challenge, verdict and expiry,
  the fate each gives its entry (applied when the round is finalised), the
  bonds and slashes they move, and that every forfeit went to the
  deployment's sink (announced by the Treasury's ``SinkSet``), never to the
  publisher or the aggregator.

A post is pending: the replay scores a round when its ``RoundFinalized``
event comes, with the measurements of its ``RoundPosted`` event and the
fates of its challenged entries.

The chain's own values carry the replay on after a mismatch, so one wrong
event gives one finding rather than a cascade. Everything here is pure: events
in, history and findings out.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fedchain.audit.checks import CheckName, Tally
from fedchain.audit.history import (
    NO_WINNER,
    AuctionRecord,
    BidRecord,
    ChallengeRecord,
    ClientRecord,
    CommitRecord,
    CreditRecord,
    PostedRecord,
    RoundRecord,
    SlashRecord,
    TaskHistory,
    TaskRecord,
)
from fedchain.chain import bindings as b
from fedchain.chain.abi import ChainEvent
from fedchain.fl.reputation import (
    ABANDON_GRACE,
    ClientReputation,
    MechanismParams,
    RevealedBid,
    choose_winner,
    final_bonus,
    scale_pro_rata,
    score_round,
    standby_winner,
)
from fedchain.units import ETHER

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
BOND_SLASH = "BOND_SLASH"
CHALLENGE_REWARD = "CHALLENGE_REWARD"
CHALLENGE_REFUND = "CHALLENGE_REFUND"
CHALLENGE_FORFEIT = "CHALLENGE_FORFEIT"
FOG_COMPENSATION = "FOG_COMPENSATION"
FOG_SLASH = "FOG_SLASH"
#: Reasons of money taken from someone as a penalty: none may reach the publisher or the aggregator, who can
#: trigger them (DESIGN.md, Accountability).
FORFEIT_REASONS = frozenset({DEPOSIT_FORFEIT, BOND_SLASH, CHALLENGE_FORFEIT, FOG_SLASH})
#: The sink by default: the zero address (burned).
BURN_SINK = "0x0000000000000000000000000000000000000000"
#: The fates of a challenged entry, weakest first (IDisputes.Fate).
FATES = ("posted", "neutral", "corrected", "void")


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


# --------------------------------------------------------------------------- mutable replay state


@dataclass
class _Client:
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
class _Bid:
    bidder: str
    revealed: bool = False
    frequency: int = 0
    price: int = 0
    settled: bool = False


@dataclass
class _Job:
    client_index: int
    data_size: int
    bids: list[_Bid] = field(default_factory=list)
    #: ``bidding``, ``awarded``, ``vacant`` or ``settled``.
    status: str = "bidding"
    winner: int = NO_WINNER
    price: int = 0
    winner_price: int = 0
    escrow: int = 0
    released: int = 0
    paid_up_to: int = 0
    commits: dict[int, b.UpdateCommitted] = field(default_factory=dict)


@dataclass
class _Posted:
    """A posted round, pending until its RoundFinalized."""

    event: b.RoundPosted
    #: Block time of the post (the next round's start, or the task's finish), once known.
    posted_at: int | None = None
    final: bool = False
    #: The clients still in the task (no final removal) when the round opened.
    in_task_at_start: tuple[int, ...] = ()


@dataclass
class _Challenge:
    event: b.ChallengeOpened
    status: str = "open"
    fate: str = "posted"


class _Replayer:
    """Applies one task's events in order; see the module docstring."""

    def __init__(self, task_id: int, mechanism: MechanismParams | None, sink: str, verdict_window: int | None) -> None:
        self.task_id = task_id
        self.sink = sink
        self.verdict_window = verdict_window
        self.override = mechanism
        self.tally = Tally()
        self.created: b.TaskCreated | None = None
        self.mechanism: MechanismParams | None = mechanism
        self.status = "None"
        self.clients: list[_Client] = []
        self.jobs: dict[int, _Job] = {}
        self.budget_left = 0
        self.current_round = 0
        self.round_started_at = 0
        self.started_at: int | None = None
        self.finished_at: int | None = None
        self.abandoned_at: int | None = None
        self.target_reached = False
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
        self.posted: dict[int, _Posted] = {}
        self.finalized_up_to = 0
        self.pending_spend: tuple[int, int] | None = None
        self.challenges: dict[int, _Challenge] = {}
        #: (round, client index) -> (fate, the corrected measurement where the fate is ``corrected``).
        self.fates: dict[tuple[int, int], tuple[str, b.Measurement | None]] = {}
        #: Expected effects of a verdict in its own transaction: (tx, kind) -> what the event must say.
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

    def _credit(self, account: str, amount: int, reason: str) -> None:
        """A ``Credited`` event the contracts must emit (none for 0 wei)."""
        if amount:
            self.expected_credits[(account, amount, reason)] += 1

    def _credit_sink(self, amount: int, reason: str) -> None:
        """A ``Credited`` event to the deployment's sink the contracts must emit (none for 0 wei)."""
        self._credit(self.sink, amount, reason)

    def _client(self, index: int, at: ChainEvent) -> _Client | None:
        if self.tally.require(H, 0 <= index < len(self.clients), f"client index {index} never joined", at):
            return self.clients[index]
        return None

    def _job(self, index: int, at: ChainEvent, *statuses: str) -> _Job | None:
        job = self.jobs.get(index)
        if not self.tally.require(H, job is not None, f"no auction was opened for client {index}", at):
            return None
        assert job is not None
        self.tally.require(
            H, job.status in statuses, f"job {index} is {job.status}, expected {' or '.join(statuses)}", at
        )
        return job

    def _status(self, at: ChainEvent, *statuses: str) -> None:
        self.tally.require(H, self.status in statuses, f"task is {self.status}, expected {' or '.join(statuses)}", at)

    @staticmethod
    def _revealed(job: _Job) -> list[RevealedBid | None]:
        return [RevealedBid(bid.frequency, bid.price) if bid.revealed else None for bid in job.bids]

    # ------------------------------------------------------------------ dispatch

    def apply(self, event: ChainEvent) -> None:
        handler = _HANDLERS.get(type(event))
        if handler is None:
            return
        if self.created is None and not isinstance(event, b.TaskCreated):
            self.tally.fail(H, f"{type(event).__name__} before the task was created", event)
            return
        handler(self, event)

    # ------------------------------------------------------------------ TaskRegistry

    def on_task_created(self, e: b.TaskCreated) -> None:
        if not self.tally.require(H, self.created is None, "the task was created twice", e):
            return
        self.created = e
        self.mechanism = self.override or mechanism_of(e.params)
        self.status = "Open"
        self.budget_left = e.budget
        self.expected_deposits[(e.publisher, e.budget)] += 1

    def on_task_cancelled(self, e: b.TaskCancelled) -> None:
        self._status(e, "Open")
        self.tally.expect(P, "cancellation refund", self.budget_left, e.refund, e)
        self._credit(self.publisher, e.refund, BUDGET_REFUND)
        self.budget_left = 0
        self.status = "Cancelled"

    def on_task_abandoned(self, e: b.TaskAbandoned) -> None:
        self._status(e, "Running")
        self.tally.expect(H, "abandoned round", self.current_round, e.round, e)
        after = self.round_started_at + self.params.round_duration + ABANDON_GRACE
        self.tally.require(
            H,
            e.abandoned_at > after,
            f"task abandoned at {e.abandoned_at}, not after its round's deadline plus the grace ({after})",
            e,
        )
        self.status, self.abandoned_at = "Abandoned", e.abandoned_at

    def on_task_started(self, e: b.TaskStarted) -> None:
        self._status(e, "Open")
        self.tally.expect(H, "clients at start", len(self.clients), e.clients, e)
        self.status, self.current_round = "Running", 1
        self.started_at = self.round_started_at = e.started_at
        self.in_task_at_start = self._in_task()

    def on_round_closed(self, e: b.RoundClosed) -> None:
        if not self.tally.require(
            H,
            self.pending_close is not None and self.pending_close[0] == e.round,
            f"round {e.round} closed without being posted",
            e,
        ):
            return
        assert self.pending_close is not None
        _, finished = self.pending_close
        self.pending_close = None
        self.tally.expect(H, f"task finished after round {e.round}", finished, e.next_round_started_at == 0, e)
        if e.next_round_started_at != 0:
            self.posted[e.round].posted_at = e.next_round_started_at
            self.current_round += 1
            self.round_started_at = e.next_round_started_at
            self.in_task_at_start = self._in_task()

    def on_task_finished(self, e: b.TaskFinished) -> None:
        self._status(e, "Running")
        self.tally.expect(H, "last round", self.current_round, e.last_round, e)
        target = self.params.target_accuracy
        last = self.posted.get(e.last_round)
        reached = last is not None and target != 0 and last.event.accuracy >= target
        self.tally.expect(H, "target reached", reached, e.target_reached, e)
        if last is not None:
            last.posted_at = e.finished_at
        self.status, self.finished_at, self.target_reached = "Finished", e.finished_at, e.target_reached

    def on_budget_spent(self, e: b.BudgetSpent) -> None:
        expected = self.pending_spend
        self.pending_spend = None
        if not self.tally.require(
            H,
            expected is not None and expected[0] == e.round,
            f"budget spent on round {e.round}, which was not finalised",
            e,
        ):
            return
        assert expected is not None
        self.tally.expect(P, f"round {e.round} spent", expected[1], e.spent, e)
        self.tally.expect(P, f"budget left after round {e.round}", self.budget_left - e.spent, e.budget_left, e)
        self.budget_left = e.budget_left

    def on_task_settled(self, e: b.TaskSettled) -> None:
        self._status(e, "Finished", "Abandoned")
        self.tally.expect(P, "final bonuses", sum(self.expected_bonuses or ()), e.bonuses, e)
        self.tally.expect(P, "budget refund at settlement", self.budget_left - e.bonuses, e.refund, e)
        self._credit(self.publisher, e.refund, BUDGET_REFUND)
        self.settled_bonuses, self.settled_refund = e.bonuses, e.refund
        self.budget_left = 0
        if self.status == "Finished":
            self.status = "Settled"

    # ------------------------------------------------------------------ RoundLedger

    def on_client_joined(self, e: b.ClientJoined) -> None:
        self._status(e, "Open")
        self.tally.expect(H, "join index", len(self.clients), e.client_index, e)
        self.tally.expect(H, f"deposit of client {e.client_index}", self.params.client_deposit, e.deposit, e)
        assert self.mechanism is not None
        initial = self.mechanism.initial_reputation
        reputation = ClientReputation(loss_reputation=initial, time_reputation=initial)
        self.clients.append(_Client(len(self.clients), e.client, e.deposit, reputation, commitment=e.data_commitment))
        self.deposits_held += e.deposit
        self.expected_deposits[(e.client, e.deposit)] += 1

    def on_client_removed(self, e: b.ClientRemoved) -> None:
        self.pending_removals.append(e)  # emitted before the RoundPosted of the same transaction

    def on_priors_posted(self, e: b.PriorsPosted) -> None:
        self._status(e, "Running")
        self.tally.require(H, self.priors is None, "priors posted twice", e)
        self.tally.require(H, not self.rounds, "priors posted after round 1", e)
        self.tally.expect(H, "priors posted", len(self.clients), len(e.priors), e)
        cap = self.params.reputation_cap
        self.tally.require(R, all(p <= cap for p in e.priors), f"a prior above the reputation cap {cap}", e)
        self.priors = tuple(e.priors)

    def on_round_posted(self, e: b.RoundPosted) -> None:
        self._status(e, "Running")
        self.tally.expect(H, "posted round", self.current_round, e.round, e)
        n = len(self.clients)
        if not self.tally.expect(H, f"measurements in round {e.round}", n, len(e.measurements), e):
            return
        tolerance = self.params.time_tolerance
        for client, m in zip(self.clients, e.measurements, strict=True):
            if not client.active:  # removed by a final round: its entry is ignored
                continue
            i = client.index
            if self.params.self_trained:  # the client's own commit (contracts/README.md, "Tasks trained by ...")
                commit = self.own_commits.get((e.round, i))
                committed_at = commit.committed_at if commit is not None else None
            else:
                job = self.jobs.get(i)
                fog_commit = job.commits.get(e.round) if job is not None else None
                committed_at = fog_commit.committed_at if fog_commit is not None else None
            committed = committed_at is not None
            self.tally.expect(H, f"client {i} round {e.round} posted as committed", committed, m.committed, e)
            if committed_at is None:
                self.tally.require(H, not m.accepted, f"client {i} accepted in round {e.round} without a commit", e)
                continue
            # A self-trained client may commit before the chain's round began (0 s then).
            observed = max(0, committed_at - self.round_started_at)
            self.tally.require(
                H,
                abs(m.round_time - observed) <= tolerance,
                f"client {i} round {e.round}: posted round time {m.round_time} s, its commit came after {observed} s",
                e,
            )
        self.posted[e.round] = _Posted(e, in_task_at_start=self.in_task_at_start)
        target = self.params.target_accuracy
        finished = (target != 0 and e.accuracy >= target) or e.round >= self.params.rounds
        self.pending_close = (e.round, finished)

    def _in_task(self) -> tuple[int, ...]:
        return tuple(i for i, c in enumerate(self.clients) if c.removed_round is None)

    def on_round_finalized(self, e: b.RoundFinalized) -> None:
        mechanism = self.mechanism
        assert mechanism is not None
        posted = self.posted.get(e.round)
        expected_round = self.finalized_up_to + 1
        if not self.tally.require(
            H,
            posted is not None and e.round == expected_round,
            f"round {e.round} finalised, expected round {expected_round} (posted and next)",
            e,
        ):
            self.pending_removals.clear()
            return
        assert posted is not None
        opened = [c for c in self.challenges.values() if c.event.round == e.round and c.status == "open"]
        self.tally.require(D, not opened, f"round {e.round} finalised with {len(opened)} challenge(s) open", e)
        n = len(self.clients)
        payments = [0] * n
        scored = [False] * n
        removed: list[int] = []
        fates = []
        for client, m in zip(self.clients, self._effective(e.round, posted.event.measurements), strict=True):
            i = client.index
            fates.append(self.fates.get((e.round, i), ("posted", None))[0])
            if not client.active or m is None or not m.committed:
                continue
            prior = self.priors[i] if self.priors is not None and i < len(self.priors) else 0
            score = score_round(client.reputation, mechanism, m.quality, m.round_time, m.accepted, prior)
            client.reputation, scored[i], payments[i] = score.reputation, True, score.payment
            if score.removed:
                client.active, client.removed_round = False, e.round
                removed.append(i)
        scaled = scale_pro_rata(payments, self.budget_left)
        for client, payment in zip(self.clients, scaled, strict=True):
            client.earned += payment
        paid = sum(scaled)
        self.tally.expect(P, f"round {e.round} paid", paid, e.paid, e)
        self._check_removals(e, scored, removed)
        forfeited = len(removed) * self.params.client_deposit
        self.tally.expect(P, f"round {e.round} forfeited deposits", forfeited, e.forfeited, e)
        self.deposits_held -= forfeited
        self.rewards_held += e.paid
        self._credit_sink(forfeited, DEPOSIT_FORFEIT)
        self.pending_spend = (e.round, e.paid)
        posted.final = True
        self.finalized_up_to = e.round
        self.rounds.append(
            RoundRecord(
                round=e.round,
                model_hash=posted.event.model_hash,
                accuracy=posted.event.accuracy,
                measurements=tuple(posted.event.measurements),
                paid=e.paid,
                scored=tuple(scored),
                loss_reputation=tuple(c.reputation.loss_reputation for c in self.clients),
                time_reputation=tuple(c.reputation.time_reputation for c in self.clients),
                payments=tuple(scaled),
                removed=tuple(removed),
                fates=tuple(fates),
                forfeited=e.forfeited,
                demanded=sum(payments),
            )
        )

    def _check_removals(self, e: b.RoundFinalized, scored: list[bool], removed: list[int]) -> None:
        """Each scored client's removal decision (Algorithm 1) against the round's ClientRemoved events."""
        actual = {r.client_index: r for r in self.pending_removals if r.round == e.round}
        stray = [r for r in self.pending_removals if r.round != e.round]
        self.pending_removals.clear()
        for r in stray:
            self.tally.fail(
                R, f"client {r.client_index} removed in round {r.round} while round {e.round} was finalised", r
            )
        for i in (i for i, was_scored in enumerate(scored) if was_scored):
            rep = self.clients[i].reputation
            event = actual.pop(i, None)
            self.tally.expect(
                R,
                f"removal of client {i} in round {e.round} (r_a={rep.loss_reputation}, r_t={rep.time_reputation})",
                i in removed,
                event is not None,
                event or e,
            )
            if event is not None and i in removed:
                self.tally.expect(R, f"r_a of removed client {i}", rep.loss_reputation, event.loss_reputation, event)
                self.tally.expect(R, f"r_t of removed client {i}", rep.time_reputation, event.time_reputation, event)
        for i, event in actual.items():
            self.tally.fail(R, f"client {i} was removed in round {e.round} without being scored in it", event)

    def on_client_settled(self, e: b.ClientSettled) -> None:
        self._status(e, "Finished", "Cancelled", "Abandoned")
        pending = [r for r, p in self.posted.items() if not p.final]
        self.tally.require(H, not pending, f"client {e.client_index} settled while round(s) {pending} were pending", e)
        client = self._client(e.client_index, e)
        if client is None:
            return
        if self.expected_bonuses is None:
            self.expected_bonuses = self._bonuses()
        self.tally.expect(P, f"earned by client {client.index}", client.earned, e.earned, e)
        self.tally.expect(P, f"final bonus of client {client.index}", self.expected_bonuses[client.index], e.bonus, e)
        deposit = client.deposit if client.active else 0
        self.tally.expect(P, f"deposit returned to client {client.index}", deposit, e.deposit_returned, e)
        self._credit(client.account, e.earned + e.bonus, CLIENT_REWARD)
        self._credit(client.account, e.deposit_returned, DEPOSIT_RETURN)
        client.bonus, client.deposit_returned = e.bonus, e.deposit_returned
        self.deposits_held -= e.deposit_returned
        self.rewards_held -= e.earned

    def _bonuses(self) -> list[int]:
        """Eq. 16 for every client at settlement, scaled pro rata to the budget left (0 for a cancelled or abandoned task)."""
        if self.status != "Finished" or self.started_at is None or self.finished_at is None:
            return [0] * len(self.clients)
        duration = self.finished_at - self.started_at
        p = self.params
        bonuses = [
            final_bonus(p.phi, p.expected_duration, duration, c.reputation.total_reputation(p.reputation_cap))
            if c.active and c.reputation.rounds > 0
            else 0
            for c in self.clients
        ]
        self.bonuses_demanded = sum(bonuses)
        return scale_pro_rata(bonuses, self.budget_left)

    # ------------------------------------------------------------------ FogAuction

    def on_auction_opened(self, e: b.AuctionOpened) -> None:
        self._status(e, "Open")
        self.tally.require(H, not self.params.self_trained, "an auction opened in a self-trained task", e)
        client = self._client(e.client_index, e)
        if client is None:
            return
        self.tally.require(H, e.client_index not in self.jobs, f"a second auction for client {e.client_index}", e)
        self.tally.expect(
            H,
            f"reveal phase of job {e.client_index}",
            self.params.reveal_duration,
            e.reveal_deadline - e.bidding_deadline,
            e,
        )
        client.data_size = e.data_size
        self.jobs[e.client_index] = _Job(e.client_index, e.data_size)

    def on_bid_committed(self, e: b.BidCommitted) -> None:
        job = self._job(e.client_index, e, "bidding")
        if job is None:
            return
        self.tally.expect(H, f"bid index for job {e.client_index}", len(job.bids), e.bid_index, e)
        job.bids.append(_Bid(e.bidder))
        self.auction_held += self.params.fog_deposit
        self.bid_deposits[(e.transaction_hash, e.bidder)] += self.params.fog_deposit

    def on_bid_revealed(self, e: b.BidRevealed) -> None:
        job = self._job(e.client_index, e, "bidding")
        if job is None:
            return
        ok = 0 <= e.bid_index < len(job.bids) and job.bids[e.bid_index].bidder == e.bidder
        if self.tally.require(H, ok, f"bid {e.bid_index} of job {e.client_index} is not {e.bidder}'s", e):
            bid = job.bids[e.bid_index]
            twice = f"bid {e.bid_index} of job {e.client_index} revealed twice or at 0 Hz"
            self.tally.require(H, not bid.revealed and e.frequency > 0, twice, e)
            bid.revealed, bid.frequency, bid.price = True, e.frequency, e.price

    def on_auction_closed(self, e: b.AuctionClosed) -> None:
        job = self._job(e.client_index, e, "bidding")
        client = self._client(e.client_index, e)
        if job is None or client is None or self.mechanism is None:
            return
        outcome = choose_winner(self.mechanism, client.reputation.loss_reputation, job.data_size, self._revealed(job))
        winner = NO_WINNER if outcome.winner is None else outcome.winner
        self.tally.expect(A, f"winner of job {e.client_index}", winner, e.winner, e)
        self.tally.expect(A, f"price of job {e.client_index}", outcome.price, e.price, e)
        self.tally.expect(A, f"escrow of job {e.client_index}", e.price * self.params.rounds, e.escrow, e)
        unrevealed = [bid for bid in job.bids if not bid.revealed]
        for bid in unrevealed:
            bid.settled = True
        forfeited = len(unrevealed) * self.params.fog_deposit
        self._credit(client.account, forfeited, BID_FORFEIT)
        if e.escrow:
            self.expected_deposits[(client.account, e.escrow)] += 1
        self.auction_held += e.escrow - forfeited
        job.status = "vacant" if e.winner == NO_WINNER else "awarded"
        job.winner, job.price, job.winner_price, job.escrow = e.winner, e.price, e.price, e.escrow

    def on_update_committed(self, e: b.UpdateCommitted) -> None:
        job = self._job(e.client_index, e, "awarded")
        client = self._client(e.client_index, e)
        if job is None or client is None:
            return
        winner = job.bids[job.winner].bidder if job.winner < len(job.bids) else None
        self.tally.expect(H, f"committer of job {e.client_index}", winner, e.fog, e)
        self._status(e, "Running")
        self.tally.require(
            H,
            e.round == self.current_round and job.paid_up_to < e.round,
            f"job {e.client_index} committed round {e.round} during round {self.current_round}",
            e,
        )
        self.tally.require(H, client.active, f"job {e.client_index} committed for a removed client", e)
        deadline = self.round_started_at + self.params.round_duration
        late = f"job {e.client_index} committed at {e.committed_at}, after the deadline {deadline}"
        self.tally.require(H, e.committed_at <= deadline, late, e)
        self.tally.expect(P, f"fog payment of job {e.client_index} round {e.round}", job.winner_price, e.payment, e)
        job.commits[e.round] = e
        job.paid_up_to = e.round
        job.released += e.payment
        self.auction_held -= e.payment
        self.fog_payments[(e.transaction_hash, e.fog)] += e.payment
        self.commits.append(CommitRecord(e.client_index, e.round, e.fog, e.update_hash, e.committed_at, e.payment))

    def on_own_update_committed(self, e: b.OwnUpdateCommitted) -> None:
        client = self._client(e.client_index, e)
        self.tally.require(H, self.params.self_trained, "a client committed its own update in an auction task", e)
        self._status(e, "Running")
        if client is None:
            return
        self.tally.expect(H, f"committer of client {e.client_index}", client.account, e.client, e)
        self.tally.require(H, client.active, f"removed client {e.client_index} committed round {e.round}", e)
        self.tally.require(
            H,
            self.current_round <= e.round <= self.params.rounds,
            f"client {e.client_index} committed round {e.round} during round {self.current_round}",
            e,
        )
        deadline = self.round_started_at + self.params.round_duration
        late = f"client {e.client_index} committed round {e.round} at {e.committed_at}, after its deadline {deadline}"
        self.tally.require(H, e.round != self.current_round or e.committed_at <= deadline, late, e)
        key = (e.round, e.client_index)
        self.tally.require(
            H, key not in self.own_commits, f"client {e.client_index} committed round {e.round} twice", e
        )
        self.own_commits.setdefault(key, e)
        self.commits.append(CommitRecord(e.client_index, e.round, e.client, e.update_hash, e.committed_at, 0))

    def on_fog_slashed(self, e: b.FogSlashed) -> None:
        job = self._job(e.client_index, e, "awarded")
        client = self._client(e.client_index, e)
        if job is None or client is None:
            return
        winner = job.bids[job.winner] if job.winner < len(job.bids) else None
        self.tally.expect(H, f"slashed fog of job {e.client_index}", winner.bidder if winner else None, e.fog, e)
        self.tally.expect(H, f"missed round of job {e.client_index}", job.paid_up_to + 1, e.round, e)
        self.tally.expect(P, f"forfeited deposit of job {e.client_index}", self.params.fog_deposit, e.forfeited, e)
        if winner is not None:
            winner.settled = True
        self.auction_held -= e.forfeited
        self._credit(client.account, e.forfeited, BID_FORFEIT)
        self.last_slash = e

    def on_fog_fraud_slashed(self, e: b.FogFraudSlashed) -> None:
        expected = self.expected_in_tx.pop((e.transaction_hash, "fraud"), None)
        self.tally.require(
            D,
            expected == (e.client_index, e.fog, True),
            f"fog {e.fog} slashed for fraud on job {e.client_index} without an upheld fog challenge for it",
            e,
        )
        job = self._job(e.client_index, e, "awarded")
        client = self._client(e.client_index, e)
        if job is None or client is None:
            return
        winner = job.bids[job.winner] if job.winner < len(job.bids) else None
        self.tally.expect(H, f"slashed fog of job {e.client_index}", winner.bidder if winner else None, e.fog, e)
        deposit = self.params.fog_deposit
        paid_rounds = job.paid_up_to + 1 - e.round if job.paid_up_to >= e.round else 1
        compensation = min(paid_rounds * job.winner_price, deposit)
        self.tally.expect(P, f"compensation of client {e.client_index} for fog fraud", compensation, e.compensation, e)
        self.tally.expect(
            P, f"fog deposit of job {e.client_index} burned for fraud", deposit - compensation, e.burned, e
        )
        if winner is not None:
            winner.settled = True
        self.auction_held -= e.compensation + e.burned
        self._credit(client.account, e.compensation, FOG_COMPENSATION)
        self._credit_sink(e.burned, FOG_SLASH)
        self.fraud_committed_current = job.paid_up_to >= self.current_round and self.status == "Running"
        self.last_slash = e

    def on_job_reassigned(self, e: b.JobReassigned) -> None:
        job = self._job(e.client_index, e, "awarded")
        client = self._client(e.client_index, e)
        slash, self.last_slash = self.last_slash, None
        ok = slash is not None and slash.client_index == e.client_index and slash.transaction_hash == e.transaction_hash
        if not self.tally.require(H, ok, f"job {e.client_index} reassigned without a slash", e):
            return
        if job is None or client is None or self.mechanism is None:
            return
        assert slash is not None
        eligible = [bid.revealed and not bid.settled for bid in job.bids]
        loss_rep = client.reputation.loss_reputation
        best = standby_winner(self.mechanism, loss_rep, job.data_size, self._revealed(job), eligible, job.price)
        winner = NO_WINNER if best is None else best
        self.tally.expect(A, f"standby winner of job {e.client_index}", winner, e.winner, e)
        price = job.bids[e.winner].price if e.winner < len(job.bids) else 0
        self.tally.expect(A, f"standby price of job {e.client_index}", price, e.price, e)
        # The slashed winner's commit of the unposted round no longer counts (the contract resets committedAt).
        job.commits = {r: c for r, c in job.commits.items() if r in self.posted}
        self.commits = [
            dataclasses.replace(c, withdrawn=True)
            if c.client_index == e.client_index and c.round not in self.posted and c.fog == slash.fog
            else c
            for c in self.commits
        ]
        if e.winner == NO_WINNER:
            self.tally.expect(H, f"first round of vacant job {e.client_index}", 0, e.from_round, e)
            job.status, job.winner_price = "vacant", 0
        else:
            self.tally.require(
                H,
                e.from_round in (self.current_round, self.current_round + 1),
                f"job {e.client_index} reassigned from round {e.from_round} during round {self.current_round}",
                e,
            )
            job.paid_up_to = e.from_round - 1
            job.winner_price = e.price
        job.winner = e.winner
        if isinstance(slash, b.FogFraudSlashed):
            forfeited, kind = slash.compensation + slash.burned, "fraud"
            if e.winner != NO_WINNER and self.fraud_committed_current:  # a commit is never replaced: no redo
                self.tally.expect(
                    H,
                    f"first round of job {e.client_index} after its winner's fraud, the current round committed",
                    self.current_round + 1,
                    e.from_round,
                    e,
                )
        else:
            forfeited, kind = slash.forfeited, "missed"
        self.slashes.append(
            SlashRecord(
                e.client_index,
                slash.fog,
                slash.round,
                forfeited,
                None if e.winner == NO_WINNER else e.winner,
                e.price,
                e.from_round,
                kind,
            )
        )

    def on_job_settled(self, e: b.JobSettled) -> None:
        self._status(e, "Finished", "Settled", "Cancelled", "Abandoned")
        job = self._job(e.client_index, e, "bidding", "awarded", "vacant")
        client = self._client(e.client_index, e)
        if job is None or client is None:
            return
        self.tally.expect(P, f"escrow refund of job {e.client_index}", job.escrow - job.released, e.escrow_refund, e)
        # A cancelled or abandoned task slashes nobody at settlement.
        missed = (
            job.status == "awarded"
            and self.status not in ("Cancelled", "Abandoned")
            and job.paid_up_to < self.current_round
            and client.active
        )
        deposit = self.params.fog_deposit
        refunded: list[str] = []
        forfeited = 0
        for index, bid in enumerate(job.bids):
            if bid.settled:
                continue
            bid.settled = True
            if missed and index == job.winner:
                forfeited += deposit
            else:
                refunded.append(bid.bidder)
        refund = len(refunded) * deposit
        self.tally.expect(P, f"fog deposits refunded by job {e.client_index}", refund, e.deposits_refunded, e)
        self.tally.expect(P, f"fog deposits forfeited by job {e.client_index}", forfeited, e.deposits_forfeited, e)
        self._credit(client.account, e.escrow_refund, ESCROW_REFUND)
        self._credit(client.account, e.deposits_forfeited, BID_FORFEIT)
        for bidder in refunded:
            self._credit(bidder, deposit, BID_REFUND)
        self.auction_held -= e.escrow_refund + e.deposits_refunded + e.deposits_forfeited
        job.released = job.escrow
        job.status = "settled"

    # ------------------------------------------------------------------ Disputes

    def on_bond_posted(self, e: b.BondPosted) -> None:
        self._status(e, "Open")
        self.tally.require(D, self.bonder is None, "the aggregator's bond was posted twice", e)
        self.tally.expect(D, "aggregator bond", self.params.aggregator_bond, e.amount, e)
        self.bonder, self.bond, self.bond_left = e.bonder, e.amount, e.amount
        self.disputes_held += e.amount
        self.expected_deposits[(e.bonder, e.amount)] += 1

    def on_bond_released(self, e: b.BondReleased) -> None:
        self.tally.expect(D, "bonder", self.bonder, e.bonder, e)
        self.tally.expect(D, "bond returned at settlement", self.bond_left, e.amount, e)
        self._credit(e.bonder, e.amount, BOND_REFUND)
        self.disputes_held -= e.amount
        self.bond_left, self.bond_returned = 0, e.amount

    def on_challenge_opened(self, e: b.ChallengeOpened) -> None:
        posted = self.posted.get(e.round)
        if not self.tally.require(
            D,
            posted is not None and not posted.final,
            f"challenge {e.challenge_id} of round {e.round}, which is not a pending posted round",
            e,
        ):
            return
        assert posted is not None
        self.tally.require(
            D,
            0 <= e.client_index < len(self.clients),
            f"challenge {e.challenge_id} names client {e.client_index}, who never joined",
            e,
        )
        self.tally.expect(D, f"bond of challenge {e.challenge_id}", self.params.challenge_bond, e.bond, e)
        if self.verdict_window is not None and posted.posted_at is not None:
            opened_at = e.verdict_deadline - self.verdict_window
            closes = posted.posted_at + self.params.challenge_window
            self.tally.require(
                D,
                opened_at <= closes,
                f"challenge {e.challenge_id} opened at {opened_at}, after round {e.round}'s window ({closes})",
                e,
            )
        if e.kind == b.ChallengeKind.ENTRY:
            assert self.created is not None
            self.tally.expect(D, f"accused of entry challenge {e.challenge_id}", self.created.aggregator, e.accused, e)
        elif e.kind == b.ChallengeKind.FOG and 0 <= e.client_index < len(self.clients):
            self.tally.expect(
                D,
                f"challenger of fog challenge {e.challenge_id}",
                self.clients[e.client_index].account,
                e.challenger,
                e,
            )
        self.challenges[e.challenge_id] = _Challenge(e)
        self.disputes_held += e.bond
        self.expected_deposits[(e.challenger, e.bond)] += 1

    def on_challenge_resolved(self, e: b.ChallengeResolved) -> None:
        record = self.challenges.get(e.challenge_id)
        if not self.tally.require(
            D, record is not None and record.status == "open", f"challenge {e.challenge_id} resolved but not open", e
        ):
            return
        assert record is not None
        c = record.event
        status = e.status.name.lower()
        record.status = status
        self.disputes_held -= c.bond
        key = (c.round, c.client_index)
        fate, corrected = self.fates.get(key, ("posted", None))
        if status == "upheld":
            outcome = "void" if c.kind == b.ChallengeKind.FOG else "corrected"
        else:
            outcome = "neutral" if status == "expired" else "posted"
        if FATES.index(outcome) > FATES.index(fate):
            fate, corrected = outcome, (c.proposed if outcome == "corrected" else None)
        self.fates[key] = (fate, corrected)
        record.fate = fate
        self.tally.expect(
            D,
            f"fate of round {c.round} client {c.client_index} after challenge {c.challenge_id}",
            fate,
            FATES[int(e.fate)],
            e,
        )
        if status == "rejected":
            half = c.bond // 2
            self._credit(c.accused, half, CHALLENGE_FORFEIT)
            self._credit_sink(c.bond - half, CHALLENGE_FORFEIT)
        elif status == "expired":
            self._credit(c.challenger, c.bond, CHALLENGE_REFUND)
        elif c.kind == b.ChallengeKind.ENTRY:
            reward = self.bond_left // 2
            self._credit(c.challenger, c.bond, CHALLENGE_REFUND)
            self._credit(c.challenger, reward, CHALLENGE_REWARD)
            self._credit_sink(self.bond_left - reward, BOND_SLASH)
            if self.bond_left:
                self.expected_in_tx[(e.transaction_hash, "bond")] = (c.challenge_id, reward, self.bond_left - reward)
            self.disputes_held -= self.bond_left
            self.bond_left = 0
        else:
            self._credit(c.challenger, c.bond, CHALLENGE_REFUND)
            job = self.jobs.get(c.client_index)
            commit = job.commits.get(c.round) if job is not None else None
            self.tally.require(
                D,
                commit is not None and commit.fog == c.accused,
                f"fog challenge {c.challenge_id} upheld against {c.accused}, who did not commit round "
                f"{c.round} of job {c.client_index}",
                e,
            )
            holds = (
                job is not None
                and job.status == "awarded"
                and job.winner < len(job.bids)
                and job.bids[job.winner].bidder == c.accused
                and not job.bids[job.winner].settled
            )
            if holds:
                self.expected_in_tx[(e.transaction_hash, "fraud")] = (c.client_index, c.accused, True)

    def on_bond_slashed(self, e: b.BondSlashed) -> None:
        expected = self.expected_in_tx.pop((e.transaction_hash, "bond"), None)
        self.tally.expect(
            D, "aggregator bond slashed (challenge, reward, burned)", expected, (e.challenge_id, e.reward, e.burned), e
        )

    # ------------------------------------------------------------------ DataHandoff, Treasury

    def on_data_committed(self, e: b.DataCommitted) -> None:
        client = self._client(e.client_index, e)
        if client is not None:
            self.tally.require(H, client.data_hash is None, f"client {e.client_index} committed its data twice", e)
            client.data_hash = e.data_hash

    def on_deposited(self, e: b.Deposited) -> None:
        self.deposited += e.amount
        self.tally.expect(E, "pool after a deposit", self.deposited - self.credited, e.held, e)
        self.actual_deposits.append(e)

    def on_credited(self, e: b.Credited) -> None:
        pool = self.deposited - self.credited
        self.tally.require(E, e.amount <= pool, f"{e.amount} wei credited from a pool of {pool} wei", e)
        self.credited += e.amount
        self.actual_credits.append((e, reason_name(e.reason)))

    # ------------------------------------------------------------------ the end

    def finish(self, withdrawn: dict[str, int]) -> Replay:
        for r in self.pending_removals:
            self.tally.fail(R, f"client {r.client_index} removed outside a round's finalisation", r)
        for (tx, kind), expected in self.expected_in_tx.items():
            what = "fraud slash" if kind == "fraud" else "bond slash"
            self.tally.fail(
                D, f"the {what} an upheld challenge called for is missing from transaction {tx} ({expected})"
            )
        self._check_sink()
        for (_, bidder), amount in self.bid_deposits.items():
            self.expected_deposits[(bidder, amount)] += 1
        for (_, fog), amount in self.fog_payments.items():
            self._credit(fog, amount, FOG_PAYMENT)
        self._match_credits()
        self._match_deposits()
        history = self._history(withdrawn)
        pool = PoolParts(
            self.budget_left,
            self.deposits_held,
            self.rewards_held,
            self.auction_held,
            self.disputes_held,
            self.deposited,
            self.credited,
        )
        if self.created is not None:
            self.tally.expect(
                E,
                "the pool (deposited - credited) against the modules' holdings rebuilt from their events",
                pool.parts,
                pool.held,
            )
        return Replay(history=history, mechanism=self.mechanism, pool=pool, tally=self.tally)

    def _check_sink(self) -> None:
        """Every forfeit and slash went to the deployment's sink, except a rejected challenge's share for the accused
        (who did not trigger it: the challenger did); the publisher, who appoints the aggregator, received none."""
        if self.created is None:
            return
        accused = {c.event.accused for c in self.challenges.values() if c.status == "rejected"}
        for event, reason in self.actual_credits:
            if reason not in FORFEIT_REASONS:
                continue
            allowed = event.to == self.sink or (reason == CHALLENGE_FORFEIT and event.to in accused)
            self.tally.require(
                S, allowed, f"{reason} of {event.amount} wei went to {event.to}, not to the sink {self.sink}", event
            )
        received = [(e, r) for e, r in self.actual_credits if e.to == self.publisher and r in FORFEIT_REASONS]
        self.tally.require(S, not received, f"the publisher received forfeits: {[(r, e.amount) for e, r in received]}")

    def _match_credits(self) -> None:
        """Every Credited event is one the replay expects, and every expected credit happened."""
        expected = Counter(self.expected_credits)
        for event, reason in self.actual_credits:
            key = (event.to, event.amount, reason)
            unexplained = f"{reason} credit of {event.amount} wei to {event.to} is not explained by the task's events"
            if self.tally.require(P, expected[key] > 0, unexplained, event):
                expected[key] -= 1
        for (account, amount, reason), count in expected.items():
            for _ in range(count):
                self.tally.fail(P, f"{reason} credit of {amount} wei to {account} is missing")

    def _match_deposits(self) -> None:
        """Every Deposited event is a budget, a client deposit, a fog deposit or an escrow, and vice versa."""
        expected = Counter(self.expected_deposits)
        for event in self.actual_deposits:
            key = (event.from_, event.amount)
            unexplained = f"deposit of {event.amount} wei from {event.from_} is not explained by the task's events"
            if self.tally.require(E, expected[key] > 0, unexplained, event):
                expected[key] -= 1
        for (account, amount), count in expected.items():
            for _ in range(count):
                self.tally.fail(E, f"deposit of {amount} wei from {account} is missing from the Treasury's events")

    def _effective(self, n: int, measurements: Sequence[b.Measurement]) -> tuple[b.Measurement | None, ...]:
        """Round ``n``'s entries as finalisation takes them, by each entry's fate (see :attr:`PostedRecord.effective`)."""
        entries: list[b.Measurement | None] = []
        for i, m in enumerate(measurements):
            fate, corrected = self.fates.get((n, i), ("posted", None))
            if fate in ("void", "neutral"):
                entries.append(None)
            elif fate == "corrected" and corrected is not None:
                entries.append(m._replace(quality=corrected.quality, accepted=corrected.accepted))
            else:
                entries.append(m)
        return tuple(entries)

    def _history(self, withdrawn: dict[str, int]) -> TaskHistory:
        created = self.created
        task = TaskRecord(
            task_id=self.task_id,
            publisher=created.publisher if created else "",
            aggregator=created.aggregator if created else "",
            budget=created.budget if created else 0,
            params=created.params if created else None,
            status=self.status,
            started_at=self.started_at,
            finished_at=self.finished_at,
            abandoned_at=self.abandoned_at,
            last_round=self.rounds[-1].round if self.rounds else 0,
            target_reached=self.target_reached,
            bonuses=self.settled_bonuses,
            refund=self.settled_refund,
            bonder=self.bonder,
            bond=self.bond,
            bond_returned=self.bond_returned,
            posted_rounds=max(self.posted, default=0),
            final_rounds=self.finalized_up_to,
            sink=self.sink,
            bonuses_demanded=self.bonuses_demanded,
        )
        clients = tuple(
            ClientRecord(
                index=c.index,
                account=c.account,
                status="active" if c.active else "removed",
                deposit=c.deposit,
                data_size=c.data_size,
                rounds=c.reputation.rounds,
                sum_quality=c.reputation.sum_quality,
                sum_time_ratio=c.reputation.sum_time_ratio,
                loss_reputation=c.reputation.loss_reputation,
                time_reputation=c.reputation.time_reputation,
                earned=c.earned,
                bonus=c.bonus,
                deposit_returned=c.deposit_returned,
                removed_round=c.removed_round,
                data_hash=c.data_hash,
                commitment=c.commitment,
                total_reputation=c.reputation.total_reputation(self.params.reputation_cap) if created else 0,
            )
            for c in self.clients
        )
        auctions = tuple(
            AuctionRecord(
                client_index=index,
                data_size=job.data_size,
                bids=tuple(
                    BidRecord(i, bid.bidder, bid.revealed, bid.frequency, bid.price) for i, bid in enumerate(job.bids)
                ),
                winner=None if job.winner == NO_WINNER else job.winner,
                price=job.price,
                escrow=job.escrow,
                closed=job.status != "bidding",
            )
            for index, job in sorted(self.jobs.items())
        )
        credits = tuple(CreditRecord(event.to, event.amount, reason) for event, reason in self.actual_credits)
        accounts = {c.account for c in self.clients} | {bid.bidder for job in self.jobs.values() for bid in job.bids}
        if created:
            accounts |= {created.publisher}
        challenges = tuple(
            ChallengeRecord(
                challenge_id=c.event.challenge_id,
                round=c.event.round,
                client_index=c.event.client_index,
                kind=c.event.kind.name.lower(),
                challenger=c.event.challenger,
                accused=c.event.accused,
                proposed=c.event.proposed,
                bond=c.event.bond,
                verdict_deadline=c.event.verdict_deadline,
                status=c.status,
                fate=c.fate,
            )
            for _, c in sorted(self.challenges.items())
        )
        accounts |= {c.challenger for c in challenges} | ({self.bonder} if self.bonder else set())
        return TaskHistory(
            task=task,
            clients=clients,
            auctions=auctions,
            commits=tuple(self.commits),
            slashes=tuple(self.slashes),
            rounds=tuple(self.rounds),
            credits=credits,
            withdrawn=tuple(sorted((a, w) for a, w in withdrawn.items() if a in accounts)),
            challenges=challenges,
            posted=tuple(
                PostedRecord(
                    n,
                    p.event.model_hash,
                    p.event.accuracy,
                    tuple(p.event.measurements),
                    p.posted_at,
                    p.final,
                    self._effective(n, p.event.measurements),
                    p.in_task_at_start,
                )
                for n, p in sorted(self.posted.items())
            ),
        )


#: The replay's handler of each event type (events of other types do not change a task).
_HANDLERS: dict[type[ChainEvent], Callable[[_Replayer, Any], None]] = {
    b.TaskCreated: _Replayer.on_task_created,
    b.TaskCancelled: _Replayer.on_task_cancelled,
    b.TaskAbandoned: _Replayer.on_task_abandoned,
    b.TaskStarted: _Replayer.on_task_started,
    b.RoundClosed: _Replayer.on_round_closed,
    b.BudgetSpent: _Replayer.on_budget_spent,
    b.RoundFinalized: _Replayer.on_round_finalized,
    b.FogFraudSlashed: _Replayer.on_fog_fraud_slashed,
    b.BondPosted: _Replayer.on_bond_posted,
    b.BondReleased: _Replayer.on_bond_released,
    b.ChallengeOpened: _Replayer.on_challenge_opened,
    b.ChallengeResolved: _Replayer.on_challenge_resolved,
    b.BondSlashed: _Replayer.on_bond_slashed,
    b.TaskFinished: _Replayer.on_task_finished,
    b.TaskSettled: _Replayer.on_task_settled,
    b.ClientJoined: _Replayer.on_client_joined,
    b.ClientRemoved: _Replayer.on_client_removed,
    b.RoundPosted: _Replayer.on_round_posted,
    b.PriorsPosted: _Replayer.on_priors_posted,
    b.ClientSettled: _Replayer.on_client_settled,
    b.AuctionOpened: _Replayer.on_auction_opened,
    b.BidCommitted: _Replayer.on_bid_committed,
    b.BidRevealed: _Replayer.on_bid_revealed,
    b.AuctionClosed: _Replayer.on_auction_closed,
    b.UpdateCommitted: _Replayer.on_update_committed,
    b.OwnUpdateCommitted: _Replayer.on_own_update_committed,
    b.FogSlashed: _Replayer.on_fog_slashed,
    b.JobReassigned: _Replayer.on_job_reassigned,
    b.JobSettled: _Replayer.on_job_settled,
    b.DataCommitted: _Replayer.on_data_committed,
    b.Deposited: _Replayer.on_deposited,
    b.Credited: _Replayer.on_credited,
}


def replay_task(task_id: int, events: Iterable[ChainEvent], *, mechanism: MechanismParams | None = None) -> Replay:
    """Rebuild task ``task_id`` from ``events`` (a deployment's events, any order) and recompute every number.

    ``mechanism`` replaces the parameters the task was created with (to ask
    "what if"; an audit leaves it None). Events of other tasks are ignored,
    except withdrawals, which are per account, and the deployment's own
    (the Treasury's ``SinkSet``, the committee's ``CommitteeFormed``).
    """
    events = sorted(events)
    sinks = [e.sink for e in events if isinstance(e, b.SinkSet)]
    windows = [e.verdict_window for e in events if isinstance(e, b.CommitteeFormed)]
    replayer = _Replayer(task_id, mechanism, sinks[0] if sinks else BURN_SINK, windows[0] if windows else None)
    if not sinks:
        replayer.tally.note(S, "the deployment's SinkSet event is not among the events: the zero address is assumed")
    # Withdrawals are per account and asset: those in the task's asset (ether, or its token) count.
    asset = next((e.token for e in events if isinstance(e, b.TokenBound) and e.task_id == task_id), ETHER)
    withdrawn: dict[str, int] = {}
    for event in events:
        if isinstance(event, b.Withdrawn):
            if int(event.token, 16) == int(asset, 16):
                withdrawn[event.account] = withdrawn.get(event.account, 0) + event.amount
        elif getattr(event, "task_id", None) == task_id:
            replayer.apply(event)
    if replayer.created is None:
        replayer.tally.fail(H, f"no TaskCreated event for task {task_id}")
    return replayer.finish(withdrawn)
