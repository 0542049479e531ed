"""A task's history as the auditor rebuilds it from events: plain frozen records, no logic.

Units as on chain: wei for money, seconds for times, 1e18 fixed point for
reputations, qualities and accuracy. Client indices are join order (0-based);
rounds are 1-based.
"""

from __future__ import annotations

from dataclasses import dataclass

from fedchain.chain.bindings import Measurement, TaskParams

#: The bid index the contracts use for "no winner" (type(uint32).max).
NO_WINNER = 2**32 - 1


@dataclass(frozen=True)
class TaskRecord:
    """The task itself: who, what, and where its life cycle ended up."""

    task_id: int
    publisher: str
    aggregator: str
    budget: int
    #: None when the task's creation is not among the events.
    params: TaskParams | None
    #: ``Open``, ``Running``, ``Finished``, ``Settled``, ``Cancelled`` or ``Abandoned``.
    status: str
    started_at: int | None
    finished_at: int | None
    #: Block time at which a stranded task was abandoned (None otherwise).
    abandoned_at: int | None
    last_round: int
    target_reached: bool
    #: Wei credited as final bonuses and refunded to the publisher at settlement (None before).
    bonuses: int | None
    refund: int | None
    #: Who posted the aggregator's bond (None before), what it was, and what went back at settlement (None before).
    bonder: str | None = None
    bond: int = 0
    bond_returned: int | None = None
    #: The last posted and the last final round.
    posted_rounds: int = 0
    final_rounds: int = 0
    #: The deployment's sink (where forfeits go), as the Treasury announced it.
    sink: str | None = None
    #: Wei of final bonuses that eq. 16 asked for before pro-rata scaling to the budget left (None before settlement).
    bonuses_demanded: int | None = None
    #: What was left of an abandoned task's bond, sent to the sink at settlement (None: not abandoned or not settled).
    bond_forfeited: int | None = None
    #: Wei the bonder added to make the bond whole after upheld challenges took from it.
    bond_topped_up: int = 0
    #: Whether the accuracy that finished the task early was found wrong (or its challenge went unanswered).
    early_finish_voided: bool = False

    @property
    def bonuses_scaled_down(self) -> bool:
        """Whether the budget left could not pay the final bonuses in full."""
        return self.bonuses is not None and self.bonuses_demanded is not None and self.bonuses < self.bonuses_demanded


@dataclass(frozen=True)
class ClientRecord:
    """One client: its standing, reputation and money after the replay."""

    index: int
    account: str
    #: ``active`` or ``removed``.
    status: str
    deposit: int
    data_size: int | None
    #: Rounds in which it was scored.
    rounds: int
    sum_quality: int
    sum_time_ratio: int
    loss_reputation: int
    time_reputation: int
    #: Eq. 15 payments credited over all rounds (after pro-rata scaling), wei.
    earned: int
    #: Final bonus (eq. 16) and deposit returned at settlement, wei (None before settlement).
    bonus: int | None
    deposit_returned: int | None
    removed_round: int | None
    #: keccak256 of the data it handed to its fog node (DataHandoff), if committed.
    data_hash: bytes | None
    #: r_at = min(cap, r_a * r_t) (eq. 10), fixed point.
    total_reputation: int = 0
    #: keccak256(abi.encode(dataSize, salt)) committed at join (a self-trained client's replies open it).
    commitment: bytes = b""


@dataclass(frozen=True)
class BidRecord:
    """One sealed bid of a fog node for a client's job."""

    index: int
    bidder: str
    revealed: bool
    frequency: int
    price: int
    #: ``ranked``, ``rejected`` (negative utility: its deposit went to the client) or ``outranked`` (deposit back);
    #: empty until revealed.
    outcome: str = ""


@dataclass(frozen=True)
class AuctionRecord:
    """A client's job auction and its outcome."""

    client_index: int
    data_size: int
    bids: tuple[BidRecord, ...]
    #: Bid index of the winner, or None when no bid was revealed (or the auction is still open).
    winner: int | None
    price: int
    escrow: int
    closed: bool
    #: The bids in contention at the end, best first (bid indices).
    ranked: tuple[int, ...] = ()


@dataclass(frozen=True)
class CommitRecord:
    """An on-chain commit of one round's update: a fog node's, or in a self-trained task the client's own (then
    ``fog`` is the client's account and ``payment`` 0)."""

    client_index: int
    round: int
    fog: str
    update_hash: bytes
    committed_at: int
    #: Wei released to the fog node by this commit.
    payment: int
    #: Whether a fraud verdict on the committing node took the commit back before its round was posted: the round
    #: then scored no update of the job (contracts/README.md, "One commit per job and round"). The node keeps its pay.
    withdrawn: bool = False
    #: The root of the fog node's training transcript (:mod:`fedchain.transcripts`); None for a client's own commit.
    transcript_root: bytes | None = None


@dataclass(frozen=True)
class SlashRecord:
    """A winner that was slashed (it missed a round, or the committee found its update fraudulent), and who took
    the job over."""

    client_index: int
    fog: str
    round: int
    #: Wei of its deposit taken: to the client for a missed round; to the client (compensation) and the sink for fraud.
    forfeited: int
    #: Bid index of the new winner, or None when the job fell vacant.
    new_winner: int | None
    new_price: int
    from_round: int
    #: ``missed`` (no commit by the deadline) or ``fraud`` (an upheld fog challenge).
    kind: str = "missed"


@dataclass(frozen=True)
class ChallengeRecord:
    """A challenge of a posted round and how it ended."""

    challenge_id: int
    round: int
    client_index: int
    #: ``entry`` (against the aggregator) or ``fog`` (against the fog node that committed the round).
    kind: str
    challenger: str
    accused: str
    #: The measurement the entry should be (entry challenges).
    proposed: Measurement
    bond: int
    verdict_deadline: int
    #: ``open``, ``upheld``, ``rejected`` or ``expired``.
    status: str
    #: The entry's fate after this challenge: ``posted``, ``neutral``, ``corrected`` or ``void``.
    fate: str
    #: The accuracy or prior an accuracy or prior challenge proposed (fixed point); 0 for the other kinds.
    value: int = 0


@dataclass(frozen=True)
class PostedRecord:
    """One posted round as the aggregator posted it (final or still pending)."""

    round: int
    model_hash: bytes
    accuracy: int
    measurements: tuple[Measurement, ...]
    #: Block time of the post (its challenge window runs from here), once known.
    posted_at: int | None
    final: bool
    #: The entries as finalisation takes them, by each entry's fate so far: corrected by the first upheld
    #: correction, None where voided or neutral (not scored), as posted elsewhere.
    effective: tuple[Measurement | None, ...]
    #: The clients still in the task when the round opened: a removal counts from the finalisation of the round
    #: that removes the client, so a client whose removal was pending then was rightly trained and scored.
    in_task_at_start: tuple[int, ...] = ()


@dataclass(frozen=True)
class RoundRecord:
    """One final round and what it did to every client (index = client index)."""

    round: int
    model_hash: bytes
    accuracy: int
    measurements: tuple[Measurement, ...]
    #: Wei credited to clients for the round (after pro-rata scaling).
    paid: int
    #: Whether each client was scored this round (active with a commit).
    scored: tuple[bool, ...]
    #: r_a and r_t of every client after the round (unchanged for clients not scored).
    loss_reputation: tuple[int, ...]
    time_reputation: tuple[int, ...]
    #: Each client's payment for the round, wei.
    payments: tuple[int, ...]
    removed: tuple[int, ...]
    #: What the challenges made of each entry (``posted`` where none): ``neutral``, ``corrected`` or ``void``.
    fates: tuple[str, ...] = ()
    #: Wei of removed clients' deposits sent to the sink when the round became final.
    forfeited: int = 0
    #: Wei that eq. 15 asked for in the round before pro-rata scaling to the budget left.
    demanded: int = 0

    @property
    def scaled_down(self) -> bool:
        """Whether the budget left could not pay the round in full (each payment was scaled down pro rata)."""
        return self.paid < self.demanded


@dataclass(frozen=True)
class CreditRecord:
    """Wei moved from a task's pool to an account (``Credited``)."""

    account: str
    amount: int
    reason: str


@dataclass(frozen=True)
class TaskHistory:
    """Everything the auditor rebuilt about one task."""

    task: TaskRecord
    clients: tuple[ClientRecord, ...]
    auctions: tuple[AuctionRecord, ...]
    commits: tuple[CommitRecord, ...]
    slashes: tuple[SlashRecord, ...]
    rounds: tuple[RoundRecord, ...]
    credits: tuple[CreditRecord, ...]
    #: Wei each account of the task withdrew from the Treasury (over all tasks: withdrawals are per account).
    withdrawn: tuple[tuple[str, int], ...]
    challenges: tuple[ChallengeRecord, ...] = ()
    #: Every posted round in order, final or pending (``rounds`` holds the final ones and what they did).
    posted: tuple[PostedRecord, ...] = ()
    #: The cross-task priors as finalisation applied them (the posted ones, corrected by their challenges' fates once
    #: round 1 is final); None when none were posted.
    priors: tuple[int, ...] | None = None

    def scored_commits(self, round_number: int) -> dict[int, CommitRecord]:
        """The commit each job's entry of ``round_number`` was scored from, by client index: the job's commit of the
        round, unless a fraud verdict withdrew it before the round was posted (then none). No commit replaces
        another (contracts/README.md, "One commit per job and round")."""
        return {c.client_index: c for c in self.commits if c.round == round_number and not c.withdrawn}

    def credited_to(self, account: str) -> dict[str, int]:
        """Wei credited to ``account`` by this task, by reason."""
        totals: dict[str, int] = {}
        for credit in self.credits:
            if credit.account == account:
                totals[credit.reason] = totals.get(credit.reason, 0) + credit.amount
        return totals

    @property
    def to_sink(self) -> dict[str, int]:
        """Wei this task sent to the sink, by reason."""
        return self.credited_to(self.task.sink) if self.task.sink is not None else {}

    @property
    def fog_nodes(self) -> tuple[str, ...]:
        """Every fog node that bid for one of the task's jobs, in first-bid order."""
        seen: dict[str, None] = {}
        for auction in self.auctions:
            for bid in auction.bids:
                seen.setdefault(bid.bidder, None)
        return tuple(seen)
