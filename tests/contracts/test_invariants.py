"""Property: random sequences of the whole flow create or lose no wei and match the Python model.

A Hypothesis state machine drives one task on the real chain through joins,
auctions (bids, reveals ranked by utility, bids no client could accept,
non-revealers), the aggregator's bond, start, fog commits (one by one or
batched per fog node), missed rounds (slash and re-award), round posts
(pending; a bond that challenges took from is topped up first), challenges of
entries, of fog updates and of priors, verdicts (upheld or rejected, signed
by the committee; an entry's upheld challenges paid once, to the first
opened), expiries, finalisation (the fates applied), cancellation, an
aggregator that vanishes (the task abandoned after the grace period, its bond
to the sink, neutral rounds for the clients), settlement (of jobs one by one
or batched) and withdrawals. The Foundry suite (``foundry/``) fuzzes the same
money flows at tens of thousands of calls a minute; this machine checks them
against the Python model, which the auditor uses.
A model of its own, built on :mod:`fedchain.fl.reputation`, predicts every
account's claimable balance, the budget, each client's reputation and the
treasury's totals; after every step the chain must agree to the wei, and the
treasury must hold exactly what it owes.

Times (deadlines, commit block times) are read from the chain: they are the
environment, not the mechanism. The machine makes the chain's clock
deterministic (each block one second after the last, jumps only by the
``skip_*`` rules) and acts only ``MARGIN`` seconds away from a deadline.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from eth_utils import keccak
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from fedchain.chain import bindings
from fedchain.chain.compile import Artifact
from fedchain.chain.node import AnvilNode
from fedchain.fl.reputation import (
    WAD,
    ClientReputation,
    RevealedBid,
    auction_utility,
    choose_winner,
    entry_slash,
    neutral_finish,
    scale_pro_rata,
    score_round,
    standby_winner,
)
from tests.contracts.conftest import (
    AGGREGATOR,
    CLIENTS,
    FOGS,
    PUBLISHER,
    SINK,
    STRANGER,
    FedChain,
    TaskParams,
)
from tests.support import present

PARAMS = TaskParams(
    rounds=3,
    expected_duration=9000,
    round_duration=2000,
    bidding_duration=1000,
    reveal_duration=1000,
    time_tolerance=5,
    psi=10**15,
    phi=10**11,
    challenge_window=400,
    challenge_bond=TaskParams().client_deposit // 2,
)
MECHANISM = PARAMS.mechanism()
BUDGET = 3 * 10**15  # small: pro-rata scaling happens
MARGIN = 3
TASK_CLIENTS = CLIENTS[:3]
TASK_FOGS = FOGS[:3]
ACCOUNTS = (PUBLISHER, AGGREGATOR, *TASK_CLIENTS, *TASK_FOGS, STRANGER, SINK)
FATES = ("posted", "neutral", "corrected", "void")
#: The task's asset: ether (None), or a test token (its contract, constructor arguments).
ASSETS = (None, ("PermitToken", (18,)), ("BlacklistToken", ()), ("PermitToken", (0,)), ("NoBoolToken", ()))

#: More examples in CI (FEDCHAIN_HYPOTHESIS=ci), few while iterating.
PROFILE = os.environ.get("FEDCHAIN_HYPOTHESIS", "dev")
MAX_EXAMPLES = {"dev": 6, "ci": 25}.get(PROFILE, 6)
STEPS = {"dev": 30, "ci": 40}.get(PROFILE, 30)


@dataclass
class BidModel:
    fog: int
    frequency: int
    price: int
    revealed: bool = False
    settled: bool = False


@dataclass
class JobModel:
    bidding_deadline: int
    reveal_deadline: int
    status: str = "Bidding"
    bids: list[BidModel] = field(default_factory=list)
    winner: int | None = None
    price: int = 0
    winner_price: int = 0
    escrow: int = 0
    released: int = 0
    paid_up_to: int = 0
    committed_at: int = 0


@dataclass
class PostedRound:
    """A posted round, pending until finalised."""

    number: int
    posted_at: int
    measurements: list[tuple[int, int, bool, bool]]
    #: The fog node that committed each committed entry's update.
    fogs: dict[int, int]


@dataclass
class ChallengeModel:
    round: int
    index: int
    fog: bool
    challenger: int
    accused: int
    proposed: tuple[int, int, bool, bool]
    deadline: int
    open: bool = True
    #: The prior a prior challenge (round 0) proposes.
    prior: int = 0


@dataclass
class EntryModel:
    """An entry's challenges as Disputes keeps them: open ones, the earliest-opened upheld one, whether paid."""

    open: int = 0
    first_upheld: int | None = None
    paid: bool = False


class FlowMachine(RuleBasedStateMachine):
    """One task, driven at random; the model predicts every wei."""

    chain_factory: Callable[[], FedChain]  # set by the test: a FedChain on a fresh snapshot

    def __init__(self) -> None:
        super().__init__()
        self.chain = type(self).chain_factory()
        self.snapshot = self.chain.w3.provider.make_request("evm_snapshot", [])["result"]
        self.chain.w3.provider.make_request("anvil_setBlockTimestampInterval", [1])
        self.claimable: Counter[int] = Counter()
        self.deposited = 0
        self.withdrawn = 0
        self.clients: list[int] = []
        self.reputation: list[ClientReputation] = []
        self.active: list[bool] = []
        self.earned: list[int] = []
        #: The posted cross-task priors (None: not posted, every prior 0).
        self.priors: list[int] | None = None
        self.jobs: dict[int, JobModel] = {}
        self.status = "Open"
        self.round = 0
        self.round_started_at = 0
        self.budget_left = BUDGET
        self.settled = False
        self._now: int | None = None
        self.pending: list[PostedRound] = []
        self.challenges: dict[int, ChallengeModel] = {}
        #: (round, client index) -> (fate, the corrected measurement where the fate is ``corrected``).
        self.fates: dict[tuple[int, int], tuple[str, tuple[int, int, bool, bool] | None]] = {}
        self.entries: dict[tuple[int, int], EntryModel] = {}
        self.bond_left = 0
        #: Block time of the priors' post (round 0), 0 before.
        self.priors_posted_at = 0
        #: When an abandoned task finishes for eq. 16: its remaining rounds posted neutral at their deadlines.
        self.duration = 0

    def teardown(self) -> None:
        self.chain.w3.provider.make_request("anvil_removeBlockTimestampInterval", [])
        self.chain.w3.provider.make_request("evm_revert", [self.snapshot])

    # ------------------------------------------------------------------ helpers

    def now(self) -> int:
        """The latest block's time (cached until the next step)."""
        if self._now is None:
            self._now = self.chain.now()
        return self._now

    def jump(self, timestamp: int) -> None:
        """Mine a block at ``timestamp``."""
        self.chain.set_next_timestamp(timestamp)
        self.chain.w3.provider.make_request("evm_mine", [])
        self._now = timestamp

    def committable_jobs(self) -> list[int]:
        if self.status != "Running" or self.now() + MARGIN > self.deadline():
            return []
        return [
            i for i, j in self.jobs.items() if j.status == "Awarded" and self.active[i] and j.paid_up_to < self.round
        ]

    def missed_jobs(self) -> list[int]:
        if self.status not in ("Running", "Finished", "Settled") or (
            self.status == "Running" and self.near(self.deadline())
        ):
            return []
        passed = self.now() > self.deadline()
        return [i for i, j in self.jobs.items() if j.status == "Awarded" and self.active[i] and self._missed(j, passed)]

    def committed(self) -> list[bool]:
        return [
            self.active[i]
            and i in self.jobs
            and self.jobs[i].paid_up_to == self.round
            and self.jobs[i].committed_at > 0
            for i in range(len(self.clients))
        ]

    def postable(self) -> bool:
        if self.status != "Running":
            return False
        waiting = any(a and not c for a, c in zip(self.active, self.committed(), strict=True))
        return not waiting or self.now() > self.deadline() + MARGIN

    def deadline(self) -> int:
        return self.round_started_at + PARAMS.round_duration

    def near(self, moment: int) -> bool:
        return abs(self.now() - moment) <= MARGIN

    def credit(self, account: int, amount: int) -> None:
        self.claimable[account] += amount

    # ------------------------------------------------------------------ set-up

    @initialize(asset=st.sampled_from(ASSETS))
    def create(self, asset: tuple[str, tuple[int, ...]] | None) -> None:
        """The task, in ether or in one of the test tokens (any decimals: the contracts never read them)."""
        if asset is not None:
            self.chain.use_token(asset[0], *asset[1])
        self.task = self.chain.create_task(PARAMS, budget=BUDGET)  # the aggregator posts its bond with it
        self.deposited += BUDGET + PARAMS.aggregator_bond
        self.bond_left = PARAMS.aggregator_bond

    # ------------------------------------------------------------------ open phase

    @precondition(lambda self: self.status == "Open" and len(self.clients) < len(TASK_CLIENTS))
    @rule(data=st.data())
    def join_and_auction(self, data: st.DataObject) -> None:
        """A client joins and auctions its job: sealed bids from some fog nodes, some revealed, then the close."""
        index = len(self.clients)
        client = TASK_CLIENTS[index]
        self.chain.join(self.task, client, params=PARAMS)
        self.clients.append(client)
        self.reputation.append(ClientReputation.joined(MECHANISM))
        self.active.append(True)
        self.earned.append(0)
        self.deposited += PARAMS.client_deposit
        self.chain.open_auction(self.task, client)
        view = self.chain.view("FogAuction", "job", self.task, index)
        job = self.jobs[index] = JobModel(view.bidding_deadline, view.reveal_deadline)
        for fog in data.draw(st.lists(st.sampled_from(TASK_FOGS), unique=True, max_size=3)):
            frequency = data.draw(st.sampled_from([3000, 10**5, 10**6]))
            # 2e17 wei is more than the job can pay a round (psi * cap^2 = 1e17): a bid no client could accept.
            price = data.draw(st.sampled_from([10**12, 10**13, 3 * 10**13, 2 * 10**17]))
            self.chain.commit_bid(self.task, index, fog, frequency, price, PARAMS)
            job.bids.append(BidModel(fog, frequency, price))
            self.deposited += PARAMS.fog_deposit
        self.jump(job.bidding_deadline + 1)
        loss_rep = self.reputation[index].loss_reputation
        for bid in job.bids:
            if data.draw(st.integers(0, 3)) != 0:  # a quarter of the bidders never reveal
                self.chain.reveal_bid(self.task, index, bid.fog, bid.frequency, bid.price)
                bid.revealed = True
                if auction_utility(MECHANISM, loss_rep, 600, RevealedBid(bid.frequency, bid.price)) < 0:
                    bid.settled = True  # its deposit goes to the client at the reveal
                    self.credit(client, PARAMS.fog_deposit)
        self.jump(job.reveal_deadline + 1)
        outcome = choose_winner(MECHANISM, self.reputation[index].loss_reputation, 600, self._revealed(job))
        self.chain.close_auction(self.task, index, client)
        for bid in job.bids:
            if not bid.revealed:
                bid.settled = True
                self.credit(client, PARAMS.fog_deposit)
        job.status = "Vacant" if outcome.winner is None else "Awarded"
        job.winner, job.price, job.winner_price = outcome.winner, outcome.price, outcome.price
        job.escrow = outcome.price * PARAMS.rounds
        self.deposited += job.escrow

    @precondition(lambda self: self.status == "Open" and self.clients)
    @rule(data=st.data(), dice=st.integers(0, 6))
    def start_or_cancel(self, data: st.DataObject, dice: int) -> None:
        """The publisher starts the task, usually with every client (then the aggregator usually posts priors at once,
        else perhaps later), or now and then cancels it. One rule for both: a step that does nothing is a step lost.
        The rare branches take middle values of the dice: Hypothesis draws the bounds more often than the rest."""
        if dice == 3:
            self.chain.send("TaskRegistry", "cancelTask", self.task, by=PUBLISHER)
            self.credit(PUBLISHER, self.budget_left)
            self.budget_left = 0
            self.status = "Cancelled"
            return
        if dice != 2 and len(self.clients) < len(TASK_CLIENTS):
            return
        self.chain.send("TaskRegistry", "startTask", self.task, by=PUBLISHER)
        self.status, self.round = "Running", 1
        self.round_started_at = self.chain.view("TaskRegistry", "state", self.task).round_started_at
        if data.draw(st.integers(0, 3)) != 0:  # so that most flows score rounds below q_min against a prior
            self.post_priors(data)

    # ------------------------------------------------------------------ rounds

    @precondition(lambda self: self.status == "Running" and self.round == 1 and self.priors is None)
    @rule(data=st.data())
    def post_priors(self, data: st.DataObject) -> None:
        """The aggregator posts cross-task priors before round 1 (each at most the cap)."""
        priors = [data.draw(st.sampled_from([WAD, WAD // 4, 0])) for _ in self.clients]
        receipt = self.chain.send("RoundLedger", "postPriors", self.task, priors, by=AGGREGATOR)
        self.priors = priors
        self.priors_posted_at = receipt.events_of(bindings.PriorsPosted)[0].posted_at

    @precondition(lambda self: self.missed_jobs())
    @rule(data=st.data())
    def report_missed(self, data: st.DataObject) -> None:
        self._report(data.draw(st.sampled_from(self.missed_jobs())))

    @precondition(lambda self: self.status == "Running")
    @rule(
        data=st.data(),
        qualities=st.lists(st.sampled_from([0, WAD // 4, WAD // 2, WAD, 3 * WAD // 2]), min_size=3, max_size=3),
    )
    def play_round(self, data: st.DataObject, qualities: list[int]) -> None:
        """Fog nodes commit (fast, slow or not at all), missed jobs may be reported, the aggregator posts; or, now and
        then, the aggregator vanishes instead (one rule for both: a step that does nothing is a step lost)."""
        if data.draw(st.integers(0, 6)) == 3:  # a middle value: Hypothesis draws the bounds more often
            self._aggregator_vanishes(data)
            return
        plan = {i: data.draw(st.sampled_from(["fast", "slow", "miss"])) for i in self.committable_jobs()}
        for speed, delay in (("fast", 0), ("slow", 300)):
            if delay and any(p == speed for p in plan.values()):
                self.jump(self.now() + delay)
            self._commit_all([i for i, p in plan.items() if p == speed], data)
        if not self.postable():
            self.jump(self.deadline() + MARGIN + 1)
            self._now = None
            for i in self.missed_jobs():
                if data.draw(st.booleans()):
                    self._report(i)
        committed = self.committed()
        measurements: list[tuple[int, int, bool, bool]] = []
        fogs: dict[int, int] = {}
        for i, quality in enumerate(qualities[: len(self.clients)]):
            if not committed[i]:
                measurements.append((0, 0, False, False))
                continue
            job = self.jobs[i]
            measurements.append((quality, job.committed_at - self.round_started_at, quality > 0, True))
            fogs[i] = job.bids[present(job.winner)].fog
        if self.bond_left < PARAMS.aggregator_bond:
            # Upheld challenges took from the bond: no round is posted until the bonder makes it whole.
            shortfall = PARAMS.aggregator_bond - self.bond_left
            with self.chain.reverts(bindings.LedgerBondShort, self.task, shortfall):
                self.chain.post_round(self.task, self.round, measurements, final=False)
            self.chain.pay("Disputes", "topUpBond", self.task, by=AGGREGATOR, amount=shortfall)
            self.deposited += shortfall
            self.bond_left = PARAMS.aggregator_bond
        self.chain.post_round(self.task, self.round, measurements, final=False)
        posted_at = self.chain.view("RoundLedger", "roundRecord", self.task, self.round).posted_at
        self.pending.append(PostedRound(self.round, posted_at, measurements, fogs))
        state = self.chain.view("TaskRegistry", "state", self.task)
        if self.round == PARAMS.rounds:
            self.status = "Finished"
            self.duration = state.finished_at - state.started_at
        else:
            self.round += 1
            self.round_started_at = state.round_started_at
        self._now = None

    # ------------------------------------------------------------------ challenges, verdicts, finalisation

    def challengeable(self) -> list[PostedRound]:
        return [p for p in self.pending if self.now() + MARGIN <= p.posted_at + PARAMS.challenge_window]

    @precondition(lambda self: self.challengeable())
    @rule(data=st.data())
    def challenge_entry(self, data: st.DataObject) -> None:
        """Anyone challenges an entry of a pending round, naming another quality (true or not: the committee judges)."""
        posted = data.draw(st.sampled_from(self.challengeable()))
        index = data.draw(st.sampled_from(range(len(self.clients))))
        by = data.draw(st.sampled_from([self.clients[index], STRANGER]))
        quality = data.draw(st.sampled_from([0, WAD // 4, WAD, 2 * WAD]))
        _, seconds, _, committed = posted.measurements[index]
        proposed = (quality, seconds, quality > 0, committed)
        receipt = self.chain.pay(
            "Disputes",
            "openEntryChallenge",
            self.task,
            posted.number,
            index,
            proposed,
            by=by,
            amount=PARAMS.challenge_bond,
        )
        self._opened(receipt, ChallengeModel(posted.number, index, False, by, AGGREGATOR, proposed, 0))

    @precondition(lambda self: any(p.fogs for p in self.challengeable()))
    @rule(data=st.data())
    def challenge_fog(self, data: st.DataObject) -> None:
        """A client challenges the update its fog node committed in a pending round."""
        posted = data.draw(st.sampled_from([p for p in self.challengeable() if p.fogs]))
        index = data.draw(st.sampled_from(sorted(posted.fogs)))
        fog = posted.fogs[index]
        receipt = self.chain.pay(
            "Disputes",
            "openFogChallenge",
            self.task,
            posted.number,
            index,
            self.chain.account(fog),
            0,
            by=self.clients[index],
            amount=PARAMS.challenge_bond,
        )
        self._opened(
            receipt, ChallengeModel(posted.number, index, True, self.clients[index], fog, (0, 0, False, False), 0)
        )

    def prior_challengeable(self) -> bool:
        """The priors were posted and their window (round 0's) is open."""
        return self.priors is not None and self.now() + MARGIN <= self.priors_posted_at + PARAMS.challenge_window

    @precondition(lambda self: self.prior_challengeable())
    @rule(data=st.data())
    def challenge_prior(self, data: st.DataObject) -> None:
        """Anyone challenges one client's posted prior, naming another (true or not: the committee judges)."""
        index = data.draw(st.sampled_from(range(len(self.clients))))
        prior = data.draw(st.sampled_from([0, WAD // 2, WAD]))
        receipt = self.chain.pay(
            "Disputes", "openPriorChallenge", self.task, index, prior, by=STRANGER, amount=PARAMS.challenge_bond
        )
        challenge = ChallengeModel(0, index, False, STRANGER, AGGREGATOR, (0, 0, False, False), 0, prior=prior)
        self._opened(receipt, challenge)

    def _opened(self, receipt: object, challenge: ChallengeModel) -> None:
        opened = receipt.events_of(bindings.ChallengeOpened)[0]  # type: ignore[attr-defined]
        challenge.deadline = opened.verdict_deadline
        self.challenges[opened.challenge_id] = challenge
        self.entries.setdefault((challenge.round, challenge.index), EntryModel()).open += 1
        self.deposited += PARAMS.challenge_bond
        self._now = None

    def judgeable(self) -> list[int]:
        near_deadline = self.status == "Running" and self.near(self.deadline())  # a fraud slash reads the round clock
        if near_deadline:
            return []
        return [i for i, c in self.challenges.items() if c.open and self.now() + MARGIN <= c.deadline]

    @precondition(lambda self: self.judgeable())
    @rule(data=st.data())
    def verdict(self, data: st.DataObject) -> None:
        """The committee upholds or rejects an open challenge; anyone submits the signatures."""
        challenge_id = data.draw(st.sampled_from(self.judgeable()))
        upheld = data.draw(st.booleans())
        self.chain.resolve(challenge_id, upheld)
        c = self.challenges[challenge_id]
        c.open = False
        entry = self.entries[(c.round, c.index)]
        entry.open -= 1
        bond = PARAMS.challenge_bond
        if not upheld:
            self.credit(c.accused, bond // 2)
            self.credit(SINK, bond - bond // 2)
        else:
            self.credit(c.challenger, bond)
            if not c.fog:
                self._fate(c, "corrected", challenge_id)
                if entry.first_upheld is None or challenge_id < entry.first_upheld:
                    entry.first_upheld = challenge_id
            else:
                self._fate(c, "void")
                self._slash_fraud(c.index, c.accused, c.round)
        self._settle_entry(entry)
        self._now = None

    def _settle_entry(self, entry: EntryModel) -> None:
        """Once an entry has no open challenge left, its upheld challenges are paid once: one entry slash of the
        bond (at most what is left), half to the earliest-opened upheld challenger, the rest to the sink."""
        if entry.open or entry.first_upheld is None or entry.paid:
            return
        entry.paid = True
        taken = min(entry_slash(PARAMS.aggregator_bond, PARAMS.max_clients), self.bond_left)
        self.credit(self.challenges[entry.first_upheld].challenger, taken // 2)
        self.credit(SINK, taken - taken // 2)
        self.bond_left -= taken

    @precondition(lambda self: any(c.open for c in self.challenges.values()))
    @rule(dice=st.integers(0, 4))
    def expire(self, dice: int) -> None:
        """Now and then the committee stays silent: the open challenges expire, their entries neutral."""
        if dice != 2:
            return
        latest = max(c.deadline for c in self.challenges.values() if c.open)
        if self.now() <= latest:
            self.jump(latest + 1)
        for challenge_id, c in self.challenges.items():
            if c.open:
                self.chain.send("Disputes", "expire", challenge_id, by=STRANGER)
                c.open = False
                self.credit(c.challenger, PARAMS.challenge_bond)
                self._fate(c, "neutral")
                entry = self.entries[(c.round, c.index)]
                entry.open -= 1
                self._settle_entry(entry)
        self._now = None

    @precondition(lambda self: self.pending)
    @rule()
    def finalize(self) -> None:
        """Anyone finalises the oldest pending round once its window passed; an open challenge holds it."""
        posted = self.pending[0]
        closes = posted.posted_at + PARAMS.challenge_window
        if self.now() <= closes:
            self.jump(closes + 1)
        still_open = sum(1 for c in self.challenges.values() if c.open and c.round == posted.number)
        priors_open = sum(1 for c in self.challenges.values() if c.open and c.round == 0)
        if still_open or (posted.number == 1 and priors_open):
            round_number, count = (posted.number, still_open) if still_open else (0, priors_open)
            with self.chain.reverts(bindings.LedgerChallengesOpen, self.task, round_number, count):
                self.chain.finalize(self.task, posted.number)
            self._now = None
            return
        self.chain.finalize(self.task, posted.number)
        self.pending.pop(0)
        if posted.number == 1 and self.priors is not None:
            # Round 1 applies the priors' fates: an upheld challenge's prior, 0 for a neutral one.
            for i in range(len(self.priors)):
                fate, proposed = self.fates.get((0, i), ("posted", None))
                if fate == "corrected" and proposed is not None:
                    self.priors[i] = proposed[0]
                elif fate == "neutral":
                    self.priors[i] = 0
        scored = []
        for i, entry in enumerate(posted.measurements):
            fate, corrected = self.fates.get((posted.number, i), ("posted", None))
            if not self.active[i] or fate in ("void", "neutral"):
                continue
            quality, seconds, accepted, committed = entry
            if fate == "corrected" and corrected is not None:
                quality, accepted = corrected[0], corrected[2]
            if not committed:
                continue
            prior = self.priors[i] if self.priors is not None else 0
            scored.append((i, score_round(self.reputation[i], MECHANISM, quality, seconds, accepted, prior)))
        payments = scale_pro_rata([s.payment for _, s in scored], self.budget_left)
        for (i, score), payment in zip(scored, payments, strict=True):
            self.reputation[i] = score.reputation
            self.earned[i] += payment
            if score.removed:
                self.active[i] = False
                self.credit(SINK, PARAMS.client_deposit)
        self.budget_left -= sum(payments)
        self._now = None

    def _fate(self, c: ChallengeModel, outcome: str, challenge_id: int | None = None) -> None:
        """The entry's fate after ``c``'s outcome: the strongest wins; a correction is the earliest-opened upheld
        challenge's (a prior challenge's proposal is kept as (prior, 0, False, False))."""
        key = (c.round, c.index)
        fate, corrected = self.fates.get(key, ("posted", None))
        proposed = (c.prior, 0, False, False) if c.round == 0 else c.proposed
        if outcome == "corrected":
            first = self.entries[key].first_upheld
            if first is None or (challenge_id is not None and challenge_id < first):
                corrected = proposed
        if FATES.index(outcome) > FATES.index(fate):
            fate = outcome
        self.fates[key] = (fate, corrected if fate == "corrected" else None)

    def _slash_fraud(self, index: int, fog: int, fraud_round: int) -> None:
        """An upheld fog challenge: the named fog node, if it still holds the job, is slashed and the job moves on."""
        job = self.jobs[index]
        if job.status != "Awarded" or job.bids[present(job.winner)].fog != fog or job.bids[present(job.winner)].settled:
            return
        job.bids[present(job.winner)].settled = True
        open_round = self.status == "Running" and self.now() + 1 <= self.deadline()
        paid_rounds = job.paid_up_to + 1 - fraud_round if job.paid_up_to >= fraud_round else 1
        # A commit is never replaced: a current round the node committed is not redone, the job moves on after it.
        from_round = self.round if open_round and job.paid_up_to < self.round else self.round + 1
        compensation = min(paid_rounds * job.winner_price, PARAMS.fog_deposit)
        self.credit(self.clients[index], compensation)
        self.credit(SINK, PARAMS.fog_deposit - compensation)
        self._reassign(index, from_round)

    def _aggregator_vanishes(self, data: st.DataObject) -> None:
        """Some fog nodes still commit, the aggregator never posts; after the grace period a stranger abandons the task."""
        self._commit_all([i for i in self.committable_jobs() if data.draw(st.booleans())], data)
        grace = self.chain.view("TaskRegistry", "ABANDON_GRACE")
        self.jump(self.deadline() + grace + MARGIN)
        self.chain.send("TaskRegistry", "abandonTask", self.task, by=STRANGER)
        self.status = "Abandoned"  # the budget left goes back at settlement, the bond to the sink
        state = self.chain.view("TaskRegistry", "state", self.task)
        finish = neutral_finish(self.round_started_at, self.round, PARAMS.rounds, PARAMS.round_duration)
        assert state.finished_at == finish
        self.duration = finish - state.started_at

    # ------------------------------------------------------------------ settlement and withdrawals

    @precondition(lambda self: self.status in ("Finished", "Cancelled", "Abandoned") and not self.settled)
    @rule()
    def settle(self) -> None:
        if self.pending:
            posted, final = self.pending[-1].number, self.pending[0].number - 1
            with self.chain.reverts(bindings.LedgerRoundsPending, self.task, posted, final):
                self.chain.send("RoundLedger", "settle", self.task, by=STRANGER)
            return
        self.chain.send("RoundLedger", "settle", self.task, by=STRANGER)
        self.settled = True
        bonuses = [0] * len(self.clients)
        if self.status in ("Finished", "Abandoned"):
            raw = [
                r.bonus(MECHANISM, self.duration) if a else 0 for r, a in zip(self.reputation, self.active, strict=True)
            ]
            bonuses = scale_pro_rata(raw, self.budget_left)
        for i, client in enumerate(self.clients):
            self.credit(client, self.earned[i] + bonuses[i] + (PARAMS.client_deposit if self.active[i] else 0))
            self.earned[i] = 0
        if self.status in ("Finished", "Abandoned"):
            self.credit(PUBLISHER, self.budget_left - sum(bonuses))
            self.budget_left = 0
        # A silent aggregator loses what is left of its bond; otherwise it comes back.
        self.credit(SINK if self.status == "Abandoned" else AGGREGATOR, self.bond_left)
        self.bond_left = 0
        if self.status == "Finished":
            self.status = "Settled"

    @precondition(
        lambda self: (
            self.status in ("Finished", "Settled", "Cancelled", "Abandoned")
            and not self.pending
            and any(j.status != "Settled" for j in self.jobs.values())
        )
    )
    @rule(data=st.data())
    def settle_job(self, data: st.DataObject) -> None:
        index = data.draw(st.sampled_from([i for i, j in self.jobs.items() if j.status != "Settled"]))
        self.chain.send("FogAuction", "settleJob", self.task, index, by=STRANGER)
        self._settle_job(index)

    @precondition(
        lambda self: (
            self.status in ("Finished", "Settled", "Cancelled", "Abandoned")
            and not self.pending
            and any(j.status != "Settled" for j in self.jobs.values())
        )
    )
    @rule(data=st.data())
    def settle_jobs(self, data: st.DataObject) -> None:
        """Anyone settles several jobs in one call; those settled already (or named twice) are skipped."""
        indices = data.draw(st.lists(st.sampled_from(sorted(self.jobs)), min_size=1, max_size=4))
        pending = [i for i in dict.fromkeys(indices) if self.jobs[i].status != "Settled"]
        receipt = self.chain.send("FogAuction", "settleJobs", self.task, indices, by=STRANGER)
        assert [e.client_index for e in receipt.events_of(bindings.JobSettled)] == pending
        for index in pending:
            self._settle_job(index)

    def _settle_job(self, index: int) -> None:
        job = self.jobs[index]
        ended = self.status in ("Cancelled", "Abandoned")  # nobody is slashed at their settlement
        winner_missed = job.status == "Awarded" and not ended and job.paid_up_to < self.round and self.active[index]
        self.credit(self.clients[index], job.escrow - job.released)
        for number, bid in enumerate(job.bids):
            if bid.settled:
                continue
            bid.settled = True
            receiver = self.clients[index] if winner_missed and number == job.winner else bid.fog
            self.credit(receiver, PARAMS.fog_deposit)
        job.status, job.released = "Settled", job.escrow

    @precondition(lambda self: any(self.claimable.values()))
    @rule(data=st.data())
    def withdraw(self, data: st.DataObject) -> None:
        """An account that is owed something takes it out."""
        account = data.draw(st.sampled_from(sorted(a for a, wei in self.claimable.items() if wei)))
        self.chain.withdraw(account)
        self.withdrawn += self.claimable[account]
        self.claimable[account] = 0

    def ended(self) -> bool:
        """Everything is over: settled, every job settled, nothing pending or open, nobody owed a wei."""
        return (
            self.settled
            and not self.pending
            and not any(c.open for c in self.challenges.values())
            and all(j.status == "Settled" for j in self.jobs.values())
            and not any(self.claimable.values())
        )

    @precondition(lambda self: self.ended())
    @rule(account=st.sampled_from(ACCOUNTS))
    def nothing_left(self, account: int) -> None:
        """Once everything is over, nobody can withdraw anything (the only rule left: the flow has ended)."""
        with self.chain.reverts(bindings.TreasuryNothingToWithdraw, self.chain.account(account)):
            self.chain.withdraw(account)

    # ------------------------------------------------------------------ invariants

    @invariant()
    def no_wei_is_created_or_lost(self) -> None:
        self._now = None  # the step may have mined blocks
        totals = self.chain.solvency()
        owed = sum(self.claimable.values())
        assert (totals.deposited, totals.withdrawn, totals.claimable) == (self.deposited, self.withdrawn, owed)
        assert totals.balance == totals.held + totals.claimable
        assert totals.deposited == totals.withdrawn + totals.held + totals.claimable
        # The task's pool is exactly what the four modules say they hold for it.
        if hasattr(self, "task"):
            parts = self.chain.pool_parts(self.task)
            assert self.chain.view("Treasury", "held", self.task) == sum(parts) == totals.held
            assert parts[0] == self.budget_left
            open_bonds = sum(PARAMS.challenge_bond for c in self.challenges.values() if c.open)
            assert parts[4] == self.bond_left + open_bonds

    @invariant()
    def balances_and_reputations_match_the_model(self) -> None:
        for account in ACCOUNTS:
            assert self.chain.claimable(account) == self.claimable[account], account
        for i in range(len(self.clients)):
            info = self.chain.view("RoundLedger", "client", self.task, i)
            r = self.reputation[i]
            assert (info.rounds, info.sum_quality, info.sum_time_ratio) == (r.rounds, r.sum_quality, r.sum_time_ratio)
            assert (info.loss_reputation, info.time_reputation) == (r.loss_reputation, r.time_reputation)
            assert (info.status == 1, info.earned) == (self.active[i], self.earned[i])

    # ------------------------------------------------------------------ model helpers

    def _commit_all(self, indices: list[int], data: st.DataObject) -> None:
        """Each fog node commits its jobs among ``indices``: one by one, or in one ``commitUpdates`` if the draw says so."""
        by_fog: dict[int, list[int]] = {}
        for index in indices:
            job = self.jobs[index]
            by_fog.setdefault(job.bids[present(job.winner)].fog, []).append(index)
        for fog, jobs in by_fog.items():
            if len(jobs) > 1 and data.draw(st.booleans()):
                hashes = [keccak(text=f"update-{i}-{self.round}") for i in jobs]
                roots = [keccak(text=f"transcript-{i}-{self.round}") for i in jobs]
                self.chain.send("FogAuction", "commitUpdates", self.task, self.round, jobs, hashes, roots, by=fog)
                for index in jobs:
                    self._committed(index, fog)
                continue
            for index in jobs:
                self.chain.commit_update(self.task, index, fog, self.round)
                self._committed(index, fog)

    def _committed(self, index: int, fog: int) -> None:
        job = self.jobs[index]
        job.paid_up_to = self.round
        job.committed_at = self.chain.view("FogAuction", "job", self.task, index).committed_at
        job.released += job.winner_price
        self.credit(fog, job.winner_price)
        self._now = None

    def _report(self, index: int) -> None:
        passed = self.now() > self.deadline()
        job = self.jobs[index]
        self.chain.send("FogAuction", "reportMissedRound", self.task, index, by=STRANGER)
        job.bids[present(job.winner)].settled = True
        self.credit(self.clients[index], PARAMS.fog_deposit)
        self._reassign(index, self.round if self.status == "Running" and not passed else self.round + 1)

    def _reassign(self, index: int, from_round: int) -> None:
        """The job's winner was slashed: the best eligible standby bid takes it from ``from_round`` (or it falls vacant)."""
        job = self.jobs[index]
        eligible = [not b.settled for b in job.bids]
        nxt = standby_winner(
            MECHANISM, self.reputation[index].loss_reputation, 600, self._revealed(job), eligible, job.price
        )
        job.paid_up_to, job.committed_at, job.winner = from_round - 1, 0, nxt
        if nxt is None:
            job.status, job.winner_price = "Vacant", 0
        else:
            job.winner_price = job.bids[nxt].price
        self._now = None

    @staticmethod
    def _revealed(job: JobModel) -> list[RevealedBid | None]:
        return [RevealedBid(b.frequency, b.price) if b.revealed else None for b in job.bids]

    def _missed(self, job: JobModel, deadline_passed: bool) -> bool:
        if self.status == "Running":
            return job.paid_up_to + 1 < self.round or (job.paid_up_to < self.round and deadline_passed)
        return job.paid_up_to < self.round


@pytest.mark.slow
def test_random_flows_create_or_lose_no_wei_and_match_the_model(
    contracts_node: AnvilNode, deployment: tuple[dict[str, str], dict[str, Artifact]]
) -> None:
    addresses, artifacts = deployment
    FlowMachine.chain_factory = staticmethod(
        lambda: FedChain(contracts_node, contracts_node.web3(), addresses, artifacts)
    )
    run_state_machine_as_test(
        FlowMachine,
        settings=settings(
            max_examples=MAX_EXAMPLES,
            stateful_step_count=STEPS,
            deadline=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        ),
    )
