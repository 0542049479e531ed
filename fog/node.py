"""The fog-node agent: watch auctions, bid rationally, reveal, fetch the job's data, train, commit updates, settle.

One :class:`FogNode` is one OS process with its own key. It runs the shared
agent loop (:mod:`fedchain.agent`) over the deployment's events:

=================  =====================================================================
AuctionOpened      decide (:func:`fog.bidding.decide_bid`) and commit a sealed bid with deposit r
(reveal window)    reveal the bid (unless ``never_reveal``)
AuctionClosed      the job is won (or lost, or held on standby)
JobReassigned      a standby bid of this node took over a slashed job
DataCommitted      fetch the client's data from the store; refuse it unless it matches the hash and size
RewardsCommitted   keep the round's reward root and list (a task whose clients train from their rewards)
RoundPosted        (within the round's challenge window) re-score the entries of the updates it committed and
                   challenge the aggregator when one is off beyond tolerance (``FogConfig.watch_entries``)
FogFraudSlashed    the arbiters found one of its updates fraudulent: its deposit for the job is gone
(round running)    train every due job in one pass of the multi-client trainer, from the global model or, when
                   the task's spec says ``train_from: reward``, from the client's last reward proven on chain
                   (a reward the root does not prove is refused: the job is not trained that round); store
                   each update (with the trained model's per-sample losses on the job's data when the task's
                   strategy, fedave, needs them) and commit its hash before the round's deadline
Task ended         once every posted round is final (finalising the due ones), settle its jobs (deposits
                   back), then withdraw what the Treasury credited
=================  =====================================================================

Every step is idempotent against the chain, so a restart (or a crash between
sending a transaction and saving the state) never bids or commits twice: before
a bid it reads the job's bids, before a commit the job's last paid round. Bid
salts are derived from the key (:mod:`fedchain.client.commitments`), so a bid
committed just before a crash can still be revealed.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from fedchain.agent import AgentLogger, AgentState, BlockRange
from fedchain.agent.chainloop import chain_now, session_agent, transact_when_due
from fedchain.agent.finality import finalize_due, pending_rounds
from fedchain.agent.session import ChainSession
from fedchain.chain import bindings as b
from fedchain.chain.bindings import JobStatus, TaskStatus
from fedchain.chain.erc20 import payment_value, task_asset
from fedchain.chain.events import LogQuery, fetch_events
from fedchain.client.commitments import BID_SALT, bid_commitment, derive_salt
from fedchain.client.handoff import ExpectedJobData, JobData, fetch_job_data
from fedchain.disputes.service import open_entry_challenge
from fedchain.disputes.watch import EntryWatcher
from fedchain.errors import (
    BlobNotFound,
    ContractRevert,
    InsufficientFunds,
    JobDataRejected,
    RewardError,
    RewardNotVerified,
    StoreError,
    TaskSpecError,
    TrainingError,
    UpdateRejected,
)
from fedchain.fl.params import flatten, unflatten
from fedchain.fl.reputation import MechanismParams, RevealedBid, auction_utility
from fedchain.models.registry import ModelSpec
from fedchain.publisher.service import settle_jobs, withdraw_task_asset
from fedchain.rewards import CommitmentBook, verified_reward
from fedchain.store.digest import parse_digest, to_hex
from fedchain.taskspec import TaskSpec, load_model, load_spec, update_meta
from fedchain.trainer.config import TrainConfig
from fedchain.trainer.local import Checkpoints
from fedchain.transcripts.record import checkpoint_meta, fabricated, store_transcript, with_end
from fedchain.transcripts.segments import JobShape
from fedchain.units import WEI_PER_ETHER, is_ether
from fedchain.updates import store_update
from fog.bidding import decide_bid
from fog.config import FogConfig
from fog.jobs import ACTIVE_PHASES, FogJob, Phase, job_key, jobs_of

if TYPE_CHECKING:  # loaded on the first job won: the trainer brings the dataset code and torchvision
    from fedchain.trainer.trainer import Trainer

_log = logging.getLogger(__name__)

#: Gas limit of a reveal sent without an estimate (it uses well under 100,000).
REVEAL_GAS = 300_000
#: Task statuses after which only settlement is left.
ENDED_STATUSES = frozenset({TaskStatus.FINISHED, TaskStatus.SETTLED, TaskStatus.CANCELLED, TaskStatus.ABANDONED})


@dataclass(frozen=True)
class Trained:
    """One job's round as the node will commit it: the update, its local losses (fedave) and its transcript."""

    update: dict[str, torch.Tensor]
    local_losses: torch.Tensor | None
    checkpoints: Checkpoints


@dataclass(frozen=True)
class DueJob:
    """A won job whose current round must be trained and committed."""

    key: str
    task_id: int
    client_index: int
    round: int
    spec: TaskSpec
    start: dict[str, torch.Tensor]
    data: JobData
    client: str


class FogNode:
    """A fog node on one deployment (see the module docstring); :meth:`run` until SIGTERM."""

    def __init__(self, session: ChainSession, config: FogConfig) -> None:
        self.session = session
        self.config = config
        self.contracts = session.contracts
        self.address = session.address
        self.log = AgentLogger(_log, agent=config.name)
        self.agent = session_agent(
            session,
            name=config.name,
            state_path=config.state_path,
            confirmations=config.confirmations,
            poll_interval_s=config.poll_interval_s,
            handle=self._handle,
            idle=self._act,
            on_reorg=self._on_reorg,
        )
        self._addresses = tuple(session.deployment.addresses.values())
        self._specs: dict[int, TaskSpec] = {}
        self._params: dict[int, b.TaskParams] = {}
        self._rates: dict[int, int | None] = {}
        self._data: dict[str, JobData] = {}
        self._trainers: dict[ModelSpec, Trainer] = {}
        self._watchers: dict[int, EntryWatcher] = {}
        self._handlers: dict[type, Callable[[Any, AgentState], None]] = {
            b.AuctionOpened: self._on_auction_opened,
            b.BidCommitted: self._on_bid_committed,
            b.BidRevealed: self._on_bid_revealed,
            b.AuctionClosed: self._on_auction_closed,
            b.JobReassigned: self._on_job_reassigned,
            b.FogSlashed: self._on_fog_slashed,
            b.FogFraudSlashed: self._on_fog_fraud_slashed,
            b.DataCommitted: self._on_data_committed,
            b.RoundPosted: self._on_round_posted,
            b.RewardsCommitted: self._on_rewards_committed,
            b.TaskFinished: self._on_task_ended,
            b.TaskSettled: self._on_task_ended,
            b.TaskCancelled: self._on_task_ended,
            b.TaskAbandoned: self._on_task_ended,
        }

    # ------------------------------------------------------------------ running

    def run(self) -> AgentState:
        """Run until SIGTERM/SIGINT (or ``stop_after_round``); returns the saved state."""
        self.log.info("fog node up", account=self.address, frequency=self.config.cost.frequency)
        try:
            return self.agent.run()
        finally:
            self.close()

    def step(self) -> BlockRange | None:
        """One step of the loop (for tests and embedding): handle new blocks, or act on the clock."""
        return self.agent.step()

    def close(self) -> None:
        """Stop the trainers' worker processes."""
        for trainer in self._trainers.values():
            trainer.close()
        self._trainers.clear()

    @property
    def state(self) -> AgentState:
        """A copy of the last saved state."""
        return self.agent.state

    @property
    def jobs(self) -> dict[str, FogJob]:
        """The jobs of the last saved state, keyed by :func:`~fog.jobs.job_key` (copies: changing them changes
        nothing)."""
        return jobs_of(self.state)

    def _handle(self, blocks: BlockRange, state: AgentState) -> None:
        query = LogQuery(addresses=self._addresses, from_block=blocks.first, to_block=blocks.last)
        for event in fetch_events(self.session.w3, b.REGISTRY, query):
            handler = self._handlers.get(type(event))
            if handler is not None and self.config.watches(event.task_id):  # type: ignore[attr-defined]  # every handled event names its task
                handler(event, state)
        self._act(state)

    def _act(self, state: AgentState) -> None:
        self._bid_due(state)
        self._reveal_due(state)
        self._fetch_due_data(state)
        self._train_due(state)
        if self.config.watch_entries:
            self._review_entries(state)
        self._settle_ended(state)

    # ------------------------------------------------------------------ chain views

    def now(self) -> int:
        """The chain's time (see :func:`fedchain.agent.chainloop.chain_now`)."""
        return chain_now(self.session)

    def task_params(self, task_id: int) -> b.TaskParams:
        """A task's on-chain parameters (fixed at creation, so read once)."""
        if task_id not in self._params:
            self._params[task_id] = self.contracts.task_registry.params(task_id)
        return self._params[task_id]

    def task_rate(self, task_id: int) -> int | None:
        """Units of the task's asset one ether of this node's cost is worth: 1e18 for an ether task, the configured
        ``token_rates`` entry for a token task (None when the node has none: it does not bid in that token)."""
        if task_id not in self._rates:
            token = task_asset(self.contracts.treasury, task_id)
            self._rates[task_id] = WEI_PER_ETHER if is_ether(token) else self.config.rate_of(token)
        return self._rates[task_id]

    def task_spec(self, task_id: int) -> TaskSpec:
        """A task's spec, from the store by its on-chain ``datasetId`` (read once)."""
        if task_id not in self._specs:
            self._specs[task_id] = load_spec(self.session.store, self.task_params(task_id).dataset_id)
        return self._specs[task_id]

    def _my_bid(self, task_id: int, client_index: int) -> tuple[int, b.Bid] | None:
        """This node's bid for a job on chain, with its index, if it made one."""
        for index, bid in enumerate(self.contracts.fog_auction.bids(task_id, client_index)):
            if bid.bidder == self.address:
                return index, bid
        return None

    def _task(self, state: AgentState, task_id: int) -> dict[str, Any]:
        return state.data.setdefault("tasks", {}).setdefault(str(task_id), {"models": {}, "ended": False})

    def _commitments(self, state: AgentState, task_id: int) -> CommitmentBook:
        """The reward commitments of a task seen in the blocks handled so far."""
        return CommitmentBook(task_id, self._task(state, task_id).setdefault("rewards", {}))

    # ------------------------------------------------------------------ events

    def _on_auction_opened(self, event: b.AuctionOpened, state: AgentState) -> None:
        key = job_key(event.task_id, event.client_index)
        if key in jobs_of(state):
            return
        jobs_of(state)[key] = FogJob(
            event.task_id, event.client_index, event.data_size, event.bidding_deadline, event.reveal_deadline
        )

    def _on_bid_committed(self, event: b.BidCommitted, state: AgentState) -> None:
        job = jobs_of(state).get(job_key(event.task_id, event.client_index))
        if job is not None and event.bidder == self.address:
            job.bid_index = event.bid_index

    def _on_bid_revealed(self, event: b.BidRevealed, state: AgentState) -> None:
        job = jobs_of(state).get(job_key(event.task_id, event.client_index))
        if job is not None and event.bidder == self.address and job.phase == Phase.BID:
            job.phase = Phase.REVEALED

    def _on_auction_closed(self, event: b.AuctionClosed, state: AgentState) -> None:
        key = job_key(event.task_id, event.client_index)
        job = jobs_of(state).get(key)
        if job is None or job.bid_index is None:
            return
        if event.winner == job.bid_index:
            job.phase, job.price, job.from_round = Phase.WON, event.price, 1
            self.log.info("job won", job=key, price=event.price, escrow=event.escrow, tx=event.transaction_hash)
        else:
            job.phase = Phase.STANDBY if job.phase == Phase.REVEALED else Phase.LOST
            self.log.info("job lost", job=key, phase=job.phase, tx=event.transaction_hash)

    def _on_job_reassigned(self, event: b.JobReassigned, state: AgentState) -> None:
        key = job_key(event.task_id, event.client_index)
        job = jobs_of(state).get(key)
        if job is not None and job.bid_index is not None and event.winner == job.bid_index:
            job.phase, job.price, job.from_round = Phase.WON, event.price, event.from_round
            self.log.info(
                "job taken over", job=key, round=event.from_round, price=event.price, tx=event.transaction_hash
            )

    def _on_fog_slashed(self, event: b.FogSlashed, state: AgentState) -> None:
        key = job_key(event.task_id, event.client_index)
        if event.fog == self.address and key in jobs_of(state):
            jobs_of(state)[key].phase = Phase.SLASHED
            self.log.warning(
                "slashed", job=key, round=event.round, forfeited=event.forfeited, tx=event.transaction_hash
            )

    def _on_fog_fraud_slashed(self, event: b.FogFraudSlashed, state: AgentState) -> None:
        key = job_key(event.task_id, event.client_index)
        if event.fog == self.address and key in jobs_of(state):
            jobs_of(state)[key].phase = Phase.SLASHED
            self.log.warning(
                "slashed for fraud: the arbiters found its update of the round was not the job's",
                job=key,
                round=event.round,
                lost=event.compensation + event.burned,
                tx=event.transaction_hash,
            )

    def _on_data_committed(self, event: b.DataCommitted, state: AgentState) -> None:
        job = jobs_of(state).get(job_key(event.task_id, event.client_index))
        if job is not None:
            job.data_hash = to_hex(event.data_hash)

    def _on_round_posted(self, event: b.RoundPosted, state: AgentState) -> None:
        task = self._task(state, event.task_id)
        task["models"][str(event.round)] = to_hex(event.model_hash)
        task.setdefault("model_blocks", {})[str(event.round)] = event.block_number  # to forget it on a reorganisation

    def _on_rewards_committed(self, event: b.RewardsCommitted, state: AgentState) -> None:
        self._commitments(state, event.task_id).record(event)

    def _on_task_ended(self, event: Any, state: AgentState) -> None:
        self._task(state, event.task_id)["ended"] = True

    def _on_reorg(self, state: AgentState, ancestor: int) -> None:
        """Blocks this node acted on were reorganised away: read every unsettled job's phase from the chain
        again, so that a bid or commit that vanished is sent again and none is sent twice."""
        auction, registry = self.contracts.fog_auction, self.contracts.task_registry
        for key, job in list(jobs_of(state).items()):
            if job.settled:
                continue
            on_chain = auction.job(job.task, job.client)
            if (
                on_chain.status == JobStatus.NONE
            ):  # the auction itself vanished: its AuctionOpened, seen again, starts over
                del jobs_of(state)[key]
                continue
            job.bidding_deadline, job.reveal_deadline = on_chain.bidding_deadline, on_chain.reveal_deadline
            mine = self._my_bid(job.task, job.client)
            if mine is None:
                phase = Phase.OPEN if job.phase in ACTIVE_PHASES else job.phase
                job.phase, job.bid_index = phase, None
                continue
            index, bid = mine
            job.bid_index = index
            if on_chain.status == JobStatus.BIDDING:
                job.phase = Phase.REVEALED if bid.revealed else Phase.BID
            elif on_chain.status == JobStatus.AWARDED and on_chain.winner == index:
                job.phase = Phase.WON
                job.committed = [r for r in job.committed if r <= int(on_chain.paid_up_to)]
            elif job.phase in (Phase.BIDDING, Phase.BID, Phase.REVEALED, Phase.WON):
                job.phase = Phase.STANDBY if bid.revealed and not bid.settled else Phase.LOST
            committed = bytes(self.contracts.data_handoff.data_hash(job.task, job.client))
            job.data_hash = None if committed == bytes(32) else to_hex(committed)
            job.refused_rewards = {}  # the commitments they were refused against may be gone
        for task_key, task in state.data.get("tasks", {}).items():
            task["ended"] = registry.state(int(task_key)).status in ENDED_STATUSES
            self._commitments(state, int(task_key)).forget_after(ancestor)  # seen again if still on the new branch
            blocks = task.setdefault("model_blocks", {})
            for round_key in [r for r, block in blocks.items() if block > ancestor]:  # so is a posted model
                del blocks[round_key], task["models"][round_key]
        self.log.warning("rewound past a reorganisation; jobs read again from the chain", block=ancestor)

    # ------------------------------------------------------------------ bidding

    def _bid_due(self, state: AgentState) -> None:
        """Decide every open auction, and commit this node's sealed bids: one transaction per task for all its jobs."""
        batches: dict[int, list[tuple[str, bytes]]] = {}
        now = None
        for key, job in jobs_of(state).items():
            if job.phase != Phase.OPEN:
                continue
            commitment = self._decide(state, key)
            if commitment is None:
                continue
            now = now if now is not None else self.now()
            if now > job.bidding_deadline:
                job.phase = Phase.MISSED
                self.log.info("auction already past its bidding deadline; no bid", job=key)
                continue
            job.phase = Phase.BIDDING
            batches.setdefault(job.task, []).append((key, commitment))
        for task_id, entries in batches.items():
            self._commit_bids(state, task_id, entries)

    def _decide(self, state: AgentState, key: str) -> bytes | None:
        """Price the job (eq. 12 plus margin) and return the commitment to bid, or None (skipped, or bid before)."""
        job = jobs_of(state)[key]
        task_id, index = job.task, job.client
        params = self.task_params(task_id)
        rate = self.task_rate(task_id)
        if rate is None:
            job.phase = Phase.SKIPPED
            token = task_asset(self.contracts.treasury, task_id)
            self.log.info("no bid", job=key, reason=f"no rate for the task's token {token}: add it to token_rates")
            return None
        decision = decide_bid(
            self.config.cost,
            data_size=job.data_size,
            task_cycles_per_sample=params.cycles_per_sample,
            round_duration=params.round_duration,
            fog_deposit=params.fog_deposit,
            active_jobs=sum(
                1 for other in jobs_of(state).values() if other.phase in ACTIVE_PHASES and not other.settled
            ),
            max_jobs=self.config.max_jobs,
            max_deposit=self.config.max_deposit,
            units_per_ether=rate,
        )
        salt = derive_salt(
            self.session.transactor.account.key, BID_SALT, self.contracts.fog_auction.address, task_id, index
        )
        commitment = bid_commitment(decision.frequency, decision.price, salt, self.address)
        job.frequency, job.price, job.cost, job.salt = decision.frequency, decision.price, decision.cost, to_hex(salt)
        if self._take_up_bid(key, job, commitment):
            return None
        if not decision.bid:
            job.phase = Phase.SKIPPED
            self.log.info("no bid", job=key, reason=decision.reason)
            return None
        # A bid the client could never accept (negative utility, eq. 18) forfeits its deposit at the reveal.
        mechanism = MechanismParams.of(params)
        offer = RevealedBid(decision.frequency, decision.price)
        utility = auction_utility(mechanism, mechanism.initial_reputation, job.data_size, offer)
        if utility < 0:
            job.phase = Phase.SKIPPED
            reason = f"the client's utility of the bid would be {utility} < 0: it could never accept it"
            self.log.info("no bid", job=key, reason=reason)
            return None
        return commitment

    def _take_up_bid(self, key: str, job: FogJob, commitment: bytes | None) -> bool:
        """Whether this node's bid for the job is on chain already (sent before a crash or a reorganisation
        lost the state); if so the job takes it up again."""
        existing = self._my_bid(job.task, job.client)
        if existing is None:
            return False
        job.phase, job.bid_index = Phase.REVEALED if existing[1].revealed else Phase.BID, existing[0]
        if commitment is not None and existing[1].commitment != commitment:
            self.log.warning("the bid on chain was made with another cost model; it cannot be revealed", job=key)
        return True

    def _commit_bids(self, state: AgentState, task_id: int, entries: list[tuple[str, bytes]]) -> None:
        """Commit the sealed bids of ``entries`` (job key, commitment) on one task in one transaction.

        When the batch is refused (an auction closed or passed its deadline meanwhile), each bid is
        tried on its own, so one late auction does not cost the others.
        """
        deposit = self.task_params(task_id).fog_deposit
        indices = [jobs_of(state)[key].client for key, _ in entries]
        try:
            receipt = self.contracts.fog_auction.commit_bids(
                task_id,
                indices,
                [commitment for _, commitment in entries],
                value=payment_value(self.contracts.treasury, task_id, deposit * len(entries)),
            )
        except (ContractRevert, InsufficientFunds) as err:
            if len(entries) == 1:
                key = entries[0][0]
                job = jobs_of(state)[key]
                if not self._take_up_bid(key, job, None):
                    job.phase = Phase.MISSED  # too late, too many bids, closed meanwhile; or no funds
                    self.log.warning("bid refused", job=key, error=type(err).__name__)
                return
            self.log.warning(
                "batch of bids refused; bidding one by one", task=task_id, bids=len(entries), error=type(err).__name__
            )
            for entry in entries:
                self._commit_bids(state, task_id, [entry])
            return
        by_index = {event.client_index: event for event in receipt.events_of(b.BidCommitted)}
        for key, _ in entries:
            job = jobs_of(state)[key]
            job.phase, job.bid_index = Phase.BID, by_index[job.client].bid_index
            self.log.info(
                "bid committed",
                job=key,
                price=job.price,
                cost=round(job.cost or 0),
                frequency=job.frequency,
                deposit=deposit,
                tx=receipt.transaction_hash,
            )

    def _reveal_due(self, state: AgentState) -> None:
        """Reveal every sealed bid whose reveal window is open: one transaction per task."""
        if self.config.never_reveal:
            return
        batches: dict[int, list[str]] = {}
        now = None
        for key, job in jobs_of(state).items():
            if job.phase != Phase.BID:
                continue
            now = now if now is not None else self.now()
            if now <= job.bidding_deadline:
                continue
            if now > job.reveal_deadline:
                job.phase = Phase.LOST
                self.log.warning("reveal window missed; the deposit is forfeited", job=key)
                continue
            batches.setdefault(job.task, []).append(key)
        for task_id, keys in batches.items():
            self._reveal(state, task_id, keys)

    def _reveal(self, state: AgentState, task_id: int, keys: list[str]) -> None:
        """Reveal the bids of ``keys`` on one task in one transaction; a refused batch is tried bid by bid."""
        jobs = [jobs_of(state)[key] for key in keys]
        try:
            receipt = transact_when_due(
                self.contracts.fog_auction,
                "revealBids(uint256,uint256[],uint64[],uint96[],bytes32[])",
                task_id,
                [job.client for job in jobs],
                [job.frequency for job in jobs],
                [job.price for job in jobs],
                [parse_digest(job.sealed_salt()) for job in jobs],
                gas=REVEAL_GAS * len(jobs),
                too_early=(b.AuctionNotRevealPhase,),
            )
        except b.AuctionNotRevealPhase:
            return  # the chain's clock is not there yet; next poll
        except ContractRevert as err:  # one bad reveal fails the batch; alone, the chain decides
            if len(keys) > 1:
                for key in keys:
                    self._reveal(state, task_id, [key])
                return
            job = jobs[0]
            mine = self._my_bid(task_id, job.client)
            if mine is not None and mine[1].revealed:
                job.phase = Phase.REVEALED  # revealed after all (a resent reveal)
            elif isinstance(err, b.AuctionBadReveal):
                job.phase = Phase.LOST
            else:
                self.log.warning("reveal refused; retrying", job=keys[0], error=type(err).__name__)
            return
        for key, job in zip(keys, jobs, strict=True):
            job.phase = Phase.REVEALED
            self.log.info("bid revealed", job=key, price=job.price, tx=receipt.transaction_hash)

    # ------------------------------------------------------------------ data

    def _fetch_due_data(self, state: AgentState) -> None:
        for key, job in jobs_of(state).items():
            if job.phase != Phase.WON or job.data_hash is None or job.data_status == "rejected" or key in self._data:
                continue
            try:
                spec = self.task_spec(job.task)
                expected = ExpectedJobData(job.task, job.client, job.data_size, spec.num_classes, spec.in_channels)
                self._data[key] = fetch_job_data(self.session.store, job.data_hash, expected)
            except BlobNotFound:
                self.log.debug("job data or task spec not in the store yet", job=key, data=job.data_hash)
                continue
            except (StoreError, TaskSpecError) as err:  # the store is unreachable, or the publisher's spec is bad
                self.log.warning("cannot fetch the job data", job=key, error=str(err.args[0]))
                continue
            except JobDataRejected as err:
                job.data_status, job.data_error = "rejected", str(err.args[0])
                self.log.error("job data rejected", job=key, data=job.data_hash, error=str(err.args[0]))
                continue
            if job.data_status is None:
                self.log.info("job data received", job=key, samples=job.data_size, data=job.data_hash)
            job.data_status = "ok"

    # ------------------------------------------------------------------ training

    def _train_due(self, state: AgentState) -> None:
        due = self._due_jobs(state)
        groups: dict[tuple[ModelSpec, TrainConfig, int | None], list[DueJob]] = {}
        for item in due:
            key = (item.spec.model_spec(), item.spec.train_config(item.round), item.spec.transcript_every)
            groups.setdefault(key, []).append(item)
        for (model, train_config, _), jobs in groups.items():
            steps = [self._last_step(state, item) for item in jobs] if self.config.lazy == "disguised" else None
            try:
                trained = self._train(model, train_config, jobs, steps)
            except TrainingError as err:
                # A worker that died or started too slowly on a busy machine: the jobs stay due, and the next
                # step trains them again (with fresh workers) while the round's deadline allows.
                self.log.error(
                    "training failed; trying again at the next step",
                    jobs=len(jobs),
                    round=jobs[0].round,
                    error=str(err.args[0]),
                    hint=err.hint,
                )
                continue
            batches: dict[tuple[int, int], list[tuple[DueJob, bytes, bytes]]] = {}
            for item, job in zip(jobs, trained, strict=True):
                meta = update_meta(item.spec, item.task_id, item.round, item.client_index, item.client)
                digest = store_update(self.session.store, job.update, meta, local_losses=job.local_losses)
                kept = checkpoint_meta(item.spec, item.task_id, item.round, item.client_index, item.client)
                transcript = store_transcript(self.session.store, item.spec, job.checkpoints, kept)
                batches.setdefault((item.task_id, item.round), []).append((item, digest, transcript.root))
            for entries in batches.values():
                self._commit(state, entries)

    def _due_jobs(self, state: AgentState) -> list[DueJob]:
        won = [(key, job) for key, job in jobs_of(state).items() if job.phase == Phase.WON and job.data_status == "ok"]
        if not won:
            return []
        due = []
        task_states: dict[int, b.TaskState] = {}
        for key, job in won:
            task_id = job.task
            if task_id not in task_states:
                task_states[task_id] = self.contracts.task_registry.state(task_id)
            task = task_states[task_id]
            round_ = int(task.current_round)
            if task.status != TaskStatus.RUNNING or round_ < job.from_round:
                continue
            limit = self.config.stop_after_round
            if limit is not None and round_ > limit:
                self.agent.stop(f"stop_after_round={limit}")
                continue
            # The chain, not the state, says whether the round is committed: a commit whose block was
            # reorganised away (or that the chain dropped) is in the state but no longer on chain.
            if int(self.contracts.fog_auction.job(task_id, job.client).paid_up_to) >= round_:
                if round_ not in job.committed:
                    job.committed.append(round_)
                continue
            if round_ in job.committed:
                job.committed.remove(round_)
                self.log.warning("the round's commit is no longer on chain; committing again", job=key, round=round_)
            if self.now() > task.round_started_at + self.task_params(task_id).round_duration:
                continue  # too late for this round; the contract slashes a missed round
            client = job.client_account or self.contracts.round_ledger.client(task_id, job.client).account
            job.client_account = client
            if str(round_) in job.refused_rewards:
                continue
            try:
                start = self._start_model(state, task_id, round_, job.client, client)
            except RewardNotVerified as err:  # the chain's root does not prove it: never train from it
                job.refused_rewards[str(round_)] = str(err.args[0])
                self.log.error(
                    "reward refused: the root committed on chain does not prove it; the round is not trained",
                    job=key,
                    round=round_,
                    error=str(err.args[0]),
                    hint=err.hint,
                )
                continue
            except (UpdateRejected, StoreError, RewardError) as err:  # not (yet) in this store, or damaged: try again
                self.log.warning("start model unavailable", job=key, round=round_, error=str(err.args[0]))
                continue
            if start is None or key not in self._data:
                continue
            due.append(
                DueJob(key, task_id, job.client, round_, self.task_spec(task_id), start, self._data[key], client)
            )
        return due

    def _start_model(
        self, state: AgentState, task_id: int, round_: int, client_index: int, client: str
    ) -> dict[str, torch.Tensor] | None:
        """The model client ``client_index``'s round ``round_`` trains from: the global model of the round before,
        or, when the task's spec trains from rewards, the client's reward of the round before, proven against
        the root committed on chain (None while that round is not posted)."""
        spec = self.task_spec(task_id)
        if spec.train_from != "reward" or round_ == 1:
            return self._global_model(state, task_id, round_)
        commitment = self._commitments(state, task_id).get(round_ - 1)
        if commitment is None:
            return None  # not posted yet (or posted without rewards: the aggregator does not run the task's spec)
        reward = verified_reward(self.session, spec, commitment, client_index, client)
        self.log.info(
            "training from the client's reward",
            job=job_key(task_id, client_index),
            round=round_,
            reward=reward.reward_hash,
        )
        return reward.params

    def _global_model(self, state: AgentState, task_id: int, round_: int) -> dict[str, torch.Tensor] | None:
        """The model round ``round_`` starts from: the initial model, or the one posted with the round before."""
        spec = self.task_spec(task_id)
        if round_ == 1:
            return load_model(
                self.session.store, spec, self.task_params(task_id).model_id, task_id=task_id, round_number=0
            )
        posted = self._task(state, task_id)["models"].get(str(round_ - 1))
        if posted is None:
            return None
        return load_model(self.session.store, spec, posted, task_id=task_id, round_number=round_ - 1)

    def _last_step(self, state: AgentState, item: DueJob) -> torch.Tensor | None:
        """The global model of ``item``'s round minus the one before, flat: what a disguised free rider resends
        (None in round 1, or while a model is not at hand)."""
        if item.round == 1:
            return None
        now = self._global_model(state, item.task_id, item.round)
        before = self._global_model(state, item.task_id, item.round - 1)
        if now is None or before is None:
            return None
        spec = item.spec.param_spec()
        return flatten(now, spec)[0] - flatten(before, spec)[0]

    def _trainer(self, model: ModelSpec) -> Trainer:
        if model not in self._trainers:
            from fedchain.trainer.trainer import Trainer

            c = self.config
            self._trainers[model] = Trainer(model, engine=c.engine, device=c.device, threads=c.threads)
        return self._trainers[model]

    def _train(
        self,
        model: ModelSpec,
        train_config: TrainConfig,
        jobs: list[DueJob],
        last_steps: list[torch.Tensor | None] | None = None,
    ) -> list[Trained]:
        """The updates (trained minus start parameters) of ``jobs``, all trained in one pass, each with the local
        losses of its trained model when the task's strategy needs them (else None) and its training transcript.
        A lazy node trains nothing and fabricates its transcripts (checkpoints on the line from the start to what
        it sends); a disguised one resends each job's ``last_steps`` entry plus noise; an attacker trains, then
        replaces the end of each honest transcript by the update it corrupted."""
        trainer = self._trainer(model)
        starts = torch.stack([flatten(item.start, trainer.spec)[0] for item in jobs])
        shapes = [JobShape.of(item.spec, len(item.data), item.round) for item in jobs]
        every = max(shape.every for shape in shapes)  # one value for the group: the spec's, or a job's whole length
        if self.config.lazy is not None:
            generator = torch.Generator().manual_seed(self.config.seed + train_config.seed)  # new noise each round
            if self.config.lazy == "zero":
                deltas = torch.zeros_like(starts)
            elif self.config.lazy == "disguised":
                from fedchain.data.faults import free_ride

                steps = last_steps or [None] * len(jobs)
                deltas = torch.stack(
                    [
                        free_ride(
                            start,
                            "disguised",
                            generator=generator,
                            last_step=step,
                            disguise_noise=self.config.disguise_noise,
                        )
                        for start, step in zip(starts, steps, strict=True)
                    ]
                )
            else:
                deltas = torch.randn(starts.shape, generator=generator) * self.config.lazy_std
            self.log.info("lazy: committing updates without training", jobs=len(jobs), mode=self.config.lazy)
            momentum = bool(train_config.momentum)
            checkpoints = [
                fabricated(start, start + delta, shape.steps, every, momentum)
                for start, delta, shape in zip(starts, deltas, shapes, strict=True)
            ]
        else:
            result = trainer.train(
                starts,
                [(item.data.images, item.data.labels) for item in jobs],
                client_ids=[item.client_index for item in jobs],
                config=train_config,
                checkpoint_every=every,
            )
            deltas = result.updates(starts).cpu()
            assert result.checkpoints is not None
            checkpoints = list(result.checkpoints)
            self.log.info(
                "trained",
                jobs=len(jobs),
                round=jobs[0].round,
                engine=result.engine,
                seconds=round(result.seconds, 2),
            )
            if self.config.attack is not None:
                from fedchain.data.faults import attack_updates

                generator = torch.Generator().manual_seed(self.config.seed + train_config.seed)
                deltas = attack_updates(deltas, self.config.attack, scale=self.config.attack_scale, generator=generator)
                checkpoints = [
                    with_end(kept, start + row) for kept, start, row in zip(checkpoints, starts, deltas, strict=True)
                ]
                self.log.info("attack: committing corrupted updates", jobs=len(jobs), attack=self.config.attack)
        return [
            Trained(unflatten(row, trainer.spec), self._local_losses(trainer, item, start + row), kept)
            for item, start, row, kept in zip(jobs, starts, deltas, checkpoints, strict=True)
        ]

    def _local_losses(self, trainer: Trainer, item: DueJob, trained: torch.Tensor) -> torch.Tensor | None:
        """What the update of ``item`` carries for fedave: its trained model's losses on the job's data."""
        if item.spec.local_loss_count(len(item.data)) is None:
            return None
        from fedchain.trainer.evaluation import local_losses

        return local_losses(trainer.model, trained, (item.data.images, item.data.labels), device=trainer.device)

    def _commit(self, state: AgentState, entries: list[tuple[DueJob, bytes, bytes]]) -> None:
        """Commit the stored updates of ``entries`` (jobs of one task and round, with their update hashes and
        transcript roots) in one transaction; a refused batch is tried job by job, so one lost job does not cost
        the others."""
        task_id, round_ = entries[0][0].task_id, entries[0][0].round
        try:
            receipt = self.contracts.fog_auction.commit_updates(
                task_id,
                round_,
                [item.client_index for item, _, _ in entries],
                [digest for _, digest, _ in entries],
                [root for _, _, root in entries],
            )
        except ContractRevert as err:
            if len(entries) > 1:
                for entry in entries:
                    self._commit(state, [entry])
                return
            self._commit_refused(state, entries[0][0], err)
            return
        payments = {event.client_index: event.payment for event in receipt.events_of(b.UpdateCommitted)}
        for item, digest, root in entries:
            jobs_of(state)[item.key].committed.append(item.round)
            self.log.info(
                "update committed",
                job=item.key,
                round=item.round,
                update=to_hex(digest),
                transcript=to_hex(root),
                payment=payments.get(item.client_index),
                tx=receipt.transaction_hash,
            )
        limit = self.config.stop_after_round
        if limit is not None and round_ >= limit:
            self.agent.stop(f"stop_after_round={limit}")
        crash = self.config.crash_after_round
        if crash is not None and round_ >= crash:
            self.log.warning("fault: dying by SIGKILL, state unsaved", crash_after_round=crash)
            os.kill(os.getpid(), signal.SIGKILL)

    def _commit_refused(self, state: AgentState, item: DueJob, err: ContractRevert) -> None:
        """What a refused commit of one job means for it, decided by the decoded error and the chain's state."""
        job = jobs_of(state)[item.key]
        log = self.log.bind(job=item.key, round=item.round)
        if int(self.contracts.fog_auction.job(item.task_id, item.client_index).paid_up_to) >= item.round:
            job.committed.append(item.round)  # committed before (a resent commit): done
        elif isinstance(err, (b.AuctionNotWinner, b.AuctionClientInactive, b.AuctionWrongJobStatus)):
            job.phase = Phase.LOST  # slashed and re-awarded, or the client was removed: no more rounds
            log.warning("commit refused; the job is over for this node", error=type(err).__name__)
        else:  # too late (the contract slashes a missed round), or mined after the deadline
            log.warning("commit refused", error=type(err).__name__)

    # ------------------------------------------------------------------ settlement

    def _review_entries(self, state: AgentState) -> None:
        """Re-score the entry of every update it committed in a round posted since, while the round can be challenged."""
        ledger = self.contracts.round_ledger
        for key, job in jobs_of(state).items():
            reviewed = job.reviewed
            due = [r for r in job.committed if str(r) not in reviewed]
            if not due:
                continue
            task_id = job.task
            posted, _ = ledger.rounds(task_id)
            window = self.task_params(task_id).challenge_window
            for round_number in sorted(r for r in due if r <= posted):
                closes = ledger.round_record(task_id, round_number).posted_at + window
                if self.now() > closes:
                    reviewed[str(round_number)] = None
                    continue
                watcher = self._watchers.get(task_id)
                if watcher is None:
                    watcher = EntryWatcher(
                        self.session, task_id, data_root=self.config.data_root, device="cpu", reexecute=False
                    )
                    self._watchers[task_id] = watcher
                grievance = watcher.review(round_number, job.client, own_job=False)
                if grievance is None or grievance.proposed is None:
                    reviewed[str(round_number)] = None
                    continue
                self.log.warning(
                    "the entry of an update it trained is wrong: challenging",
                    job=key,
                    round=round_number,
                    reason=grievance.reason,
                )
                try:
                    opened = open_entry_challenge(self.session, task_id, round_number, job.client, grievance.proposed)
                except ContractRevert as err:
                    reviewed[str(round_number)] = None
                    self.log.error("challenge refused", job=key, round=round_number, error=type(err).__name__)
                    continue
                reviewed[str(round_number)] = str(opened.challenge_id)

    def _settle_ended(self, state: AgentState) -> None:
        tasks = state.data.get("tasks", {})
        for task_key, task in tasks.items():
            if not task["ended"] or task.get("withdrawn") is not None:
                continue
            task_id = int(task_key)
            finalize_due(self.session, task_id)
            if pending_rounds(self.session, task_id):
                continue  # jobs are settled once every posted round is final: a later step

            mine = [
                key
                for key, job in jobs_of(state).items()
                if job.task == task_id and not job.settled and job.bid_index is not None
            ]
            # Everyone may settle a job (its client, the aggregator, each of its bidders): a lost race is done.
            settled = settle_jobs(self.session, task_id, [jobs_of(state)[key].client for key in mine])
            for key in mine:
                jobs_of(state)[key].settled = True
                if jobs_of(state)[key].client in settled:
                    self.log.info("job settled", job=key)
            task["withdrawn"] = withdraw_task_asset(self.session, task_id)
            self.log.info("withdrew", task=task_id, units=task["withdrawn"])
