"""The aggregator of one task: the round loop over the chain and the blob store.

Every round ``n``:

1. wait until every active client's fog node has committed its update
   (``UpdateCommitted``), or until the round's deadline has passed;
2. after the deadline, report every awarded job without a commit
   (``FogAuction.reportMissedRound``): the contract slashes the fog node and
   hands the job to the best standby bid; the round still completes;
3. fetch each committed update from the store, verify it against its on-chain
   hash and decode it (:func:`fedchain.taskspec.load_update`, with the local
   losses fedave needs); a malformed update is a failed quality check
   (``accepted = false``);
4. evaluate, aggregate and score (:func:`fedchain.aggregator.scoring.score_round`),
   with round time = block time of the commit - the round's start;
5. write the new global model to the store, save the strategy's state, and
   post the round in ONE transaction (``RoundLedger.postRound``). The post
   is pending: once its challenge window has passed and no challenge of it is
   open, the aggregator finalises it (:mod:`fedchain.agent.finality`), and
   only then do reputations change and money move. For a
   strategy that rewards in kind, every active client's rewarded model and the
   round's reward list go to the store first, and the post carries their Merkle
   root and the list's hash (:mod:`fedchain.rewards`); when the task's clients
   train from their rewards (``TaskSpec.train_from``), each client's update is
   scored against its reward of the round before, proven against that round's root.

While the task is open it posts its bond (``Disputes.postBond``) unless the
publisher did; a task does not start without it. Before round 1 it posts the
task's cross-task priors once (eq. 6, :mod:`fedchain.aggregator.priors`), all
zeros when no earlier task is similar. It logs every challenge of its posts
and every verdict; an upheld one takes its bond.

After the last round (or the target accuracy) and once every round is final
it settles the task (``RoundLedger.settle`` and every job's ``settleJob``) and
stops; so it does when the task was cancelled, or abandoned (``fedchain task
abandon``: nobody posted the round within a day of its deadline).

Restart safety: the chain is the source of truth. The current round, whether
it was posted, and who committed are read from the contracts at every step, so
a restarted aggregator continues where the chain is and can never post a round
twice (the contract also refuses a second post). The agent state keeps the
last handled block and the model hash of every posted round; the strategy's
state is checkpointed per round (:mod:`fedchain.aggregator.checkpoint`); on a
machine without the checkpoint it is rebuilt by scoring the posted rounds
again, as the auditor does.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from fedchain.agent import AgentLogger, AgentState, BlockRange
from fedchain.agent.chainloop import chain_now, session_agent, transact_when_due
from fedchain.agent.finality import finalize_due
from fedchain.agent.session import ChainSession
from fedchain.aggregator.checkpoint import load_strategy_state, save_strategy_state
from fedchain.aggregator.priors import chain_priors, start_block
from fedchain.aggregator.scoring import (
    ClientInput,
    Evaluator,
    QualityChoice,
    RoundOutcome,
    quality_source,
    score_round,
    task_floor,
    task_grace,
    task_strategy,
)
from fedchain.audit.replay import replay_task
from fedchain.audit.rewards import reward_events
from fedchain.audit.scores import ScoreReproduction
from fedchain.chain.bindings import (
    AuctionNoMissedRound,
    ChallengeOpened,
    ChallengeResolved,
    FogFraudSlashed,
    FogSlashed,
    Job,
    JobReassigned,
    JobStatus,
    LedgerBondShort,
    LedgerRoundNotReady,
    Measurement,
    RewardsCommitted,
    RoundFinalized,
    RoundPosted,
    TaskParams,
    TaskState,
    TaskStatus,
    UpdateCommitted,
)
from fedchain.chain.events import LogQuery, fetch_events, iter_events
from fedchain.chain.merkle import ZERO_ROOT
from fedchain.disputes.service import top_up_bond
from fedchain.errors import AgentError, ConfigError, ContractRevert, UpdateRejected
from fedchain.fl.params import ParamSpec, flatten, unflatten
from fedchain.fl.quality import QualitySource
from fedchain.fl.registry import get_strategy
from fedchain.fl.strategy import Strategy
from fedchain.publisher.service import post_bond, settle_task
from fedchain.rewards import CommitmentBook, put_rewards, reward_commitments, stacked_rewards, verified_reward
from fedchain.store.digest import to_hex
from fedchain.taskspec import TaskSpec, load_model, load_spec, load_update, load_validation, put_model
from fedchain.trainer.device import resolve_device

_log = logging.getLogger(__name__)

#: Gas limits of a missed-round report and of a post sent without an estimate: after a deadline on an
#: automining dev chain, the estimate runs on a block from before it and is refused (fedchain.agent.chainloop).
REPORT_MISSED_GAS = 500_000
POST_ROUND_GAS_BASE, POST_ROUND_GAS_PER_CLIENT = 200_000, 60_000


@dataclass(frozen=True)
class AggregatorSettings:
    """How the aggregator of one task runs.

    Attributes:
        task_id: the task it aggregates (the signing account must be its aggregator).
        state_path: the agent's state file; strategy checkpoints go in a folder beside it.
        strategy: the aggregation strategy; None: the task spec's.
        strategy_options: the strategy's options; None: the task spec's.
        quality: the chain's q_i: ``loss`` (Tian's loss ratio), ``contribution`` (the strategy's, rescaled),
            or ``auto`` (contribution for cgsv, fedfaim and fedave, loss otherwise).
        data_root: where the validation dataset is (None: ``$FEDCHAIN_DATA_ROOT``).
        device: torch device for evaluation (``auto``: CUDA when present).
        poll_interval_s: seconds between polls of the chain when nothing happens.
        confirmations: blocks on top of a block before its events are handled.
        bond: post the aggregator's bond from this account while the task is open, unless it is posted already.
        zero_client: (client address, round): post quality 0 for that client in that round, whatever its update.
            A dishonest aggregator, for the demo and the tests of accountability; never a default.
        crash_after_round: post rounds up to this one, then die by SIGKILL at once, its state unsaved (a fault: the
            aggregator goes silent mid-task, at a point tests can count on); never a default.
    """

    task_id: int
    state_path: Path
    strategy: str | None = None
    strategy_options: Mapping[str, Any] | None = None
    quality: QualityChoice = "auto"
    data_root: str | None = None
    device: str = "auto"
    poll_interval_s: float = 1.0
    confirmations: int = 0
    bond: bool = True
    zero_client: tuple[str, int] | None = None
    crash_after_round: int | None = None

    def __post_init__(self) -> None:
        if self.crash_after_round is not None and self.crash_after_round < 1:
            raise ConfigError(f"crash_after_round must be >= 1, got {self.crash_after_round}")
        # Refused before the chain is touched: a device this machine lacks, a strategy or option that does not exist.
        resolve_device(self.device)
        if self.strategy is not None:
            get_strategy(self.strategy, **(self.strategy_options or {}))

    @property
    def checkpoint_dir(self) -> Path:
        """Where the per-round strategy states are kept."""
        return self.state_path.with_name(self.state_path.stem + "-strategy")


@dataclass
class _TaskContext:
    """What the aggregator loads once: the task's parameters, spec, strategy and validation evaluator."""

    params: TaskParams
    spec: TaskSpec
    strategy: Strategy
    evaluator: Evaluator
    quality: QualitySource
    param_spec: ParamSpec
    clients: list[str] = field(default_factory=list)


class Aggregator:
    """The round loop of one task (see the module docstring); :meth:`run` until the task is settled."""

    def __init__(self, session: ChainSession, settings: AggregatorSettings) -> None:
        self.session = session
        self.settings = settings
        self.device = resolve_device(settings.device)
        self.task_id = settings.task_id
        self.agent = session_agent(
            session,
            name=f"aggregator-task-{settings.task_id}",
            state_path=settings.state_path,
            confirmations=settings.confirmations,
            poll_interval_s=settings.poll_interval_s,
            handle=self.handle,
            idle=self.tick,
            on_reorg=self._on_reorg,
        )
        self.log = AgentLogger(_log, agent=self.agent.settings.name, task=settings.task_id)
        self._context: _TaskContext | None = None
        self._waiting_logged: int | None = None
        self._active: tuple[int, list[bool]] | None = None
        #: The last round scored: ((round, commit times), outcome, model hash, (reward root, reward list)), so a
        #: refused post is retried cheaply.
        self._scored: tuple[tuple[int, tuple[int, ...]], RoundOutcome, bytes, tuple[bytes, bytes]] | None = None
        #: Round -> the measurements this process posted (to finalise them without reading the logs again).
        self._posted: dict[int, tuple[Measurement, ...]] = {}

    # ------------------------------------------------------------------ the loop

    def run(self) -> AgentState:
        """Run rounds until the task is settled or a stop is requested (SIGTERM/SIGINT); returns the agent state."""
        if self.session.contracts.task_registry.params(self.task_id).self_trained:
            # No fog commits to wait for: this loop would post every round at once with nobody committed.
            raise ConfigError(
                f"task {self.task_id} is self-trained: its clients train their own jobs and reply to a Flower server",
                hint="aggregate it with fedchain.flower.IncentiveStrategy in the federation's ServerApp",
            )
        return self.agent.run()

    def step(self) -> None:
        """One step of the loop: handle new blocks, or do the round's work when caught up."""
        self.agent.step()

    @property
    def state(self) -> AgentState:
        return self.agent.state

    def handle(self, blocks: BlockRange, state: AgentState) -> None:
        """Log and record the task's events in ``blocks`` (commits, slashes, posted rounds), then :meth:`tick`."""
        contracts = self.session.contracts
        query = LogQuery(
            addresses=(contracts.fog_auction.address, contracts.round_ledger.address, contracts.disputes.address),
            from_block=blocks.first,
            to_block=blocks.last,
        )
        finalized = False
        for event in iter_events(self.session.w3, self.session.transactor.registry, query):
            if getattr(event, "task_id", None) != self.task_id:
                continue
            if isinstance(event, UpdateCommitted):
                self.log.info(
                    "update committed",
                    round=event.round,
                    job=event.client_index,
                    fog=event.fog,
                    update=event.update_hash,
                    tx=event.transaction_hash,
                )
            elif isinstance(event, FogSlashed):
                self.log.info(
                    "fog slashed", round=event.round, job=event.client_index, fog=event.fog, tx=event.transaction_hash
                )
            elif isinstance(event, JobReassigned):
                self.log.info(
                    "job reassigned",
                    job=event.client_index,
                    winner=event.winner,
                    from_round=event.from_round,
                    tx=event.transaction_hash,
                )
            elif isinstance(event, RoundPosted):
                state.data.setdefault("models", {})[str(event.round)] = to_hex(event.model_hash)
            elif isinstance(event, RewardsCommitted):
                self._commitments(state).record(event)
            elif isinstance(event, RoundFinalized):
                self._active = None  # the round may have removed clients: read who is active again
                self.log.info(
                    "round final",
                    round=event.round,
                    paid=event.paid,
                    forfeited=event.forfeited,
                    tx=event.transaction_hash,
                )
                finalized = True
            elif isinstance(event, ChallengeOpened):
                self.log.warning(
                    "challenge opened",
                    challenge=event.challenge_id,
                    round=event.round,
                    job=event.client_index,
                    kind=event.kind.name.lower(),
                    challenger=event.challenger,
                    tx=event.transaction_hash,
                )
            elif isinstance(event, ChallengeResolved):
                self.log.warning(
                    "challenge resolved",
                    challenge=event.challenge_id,
                    round=event.round,
                    job=event.client_index,
                    outcome=event.status.name.lower(),
                    fate=event.fate.name.lower(),
                    tx=event.transaction_hash,
                )
            elif isinstance(event, FogFraudSlashed):
                self.log.warning(
                    "fog slashed for fraud",
                    round=event.round,
                    job=event.client_index,
                    fog=event.fog,
                    tx=event.transaction_hash,
                )
        if finalized:
            self._warn_scaled_rounds(state)
        # On a chain that makes blocks on a timer there may never be an idle poll: do the round's work here too.
        self.tick(state)

    def _on_reorg(self, state: AgentState, ancestor: int) -> None:
        """Forget what came from reorganised blocks: the posted models (read again from the chain's events
        when needed) and the cached round inputs; the chain, read at every step, is the source of truth."""
        state.data.pop("models", None)
        self._commitments(state).forget_after(ancestor)
        self._active = None
        self._scored = None
        self._posted.clear()
        self.log.warning("rewound past a reorganisation; reading the task from the chain again", block=ancestor)

    # ------------------------------------------------------------------ one round

    def _warn_scaled_rounds(self, state: AgentState) -> None:
        """Log a warning, once per round, for every final round the budget could not pay in full (its pay was scaled
        down pro rata), and for the final bonuses.

        A round scaled down leaves less wei in the budget than the task has clients (the rounding of the scaling),
        so only then are the task's events replayed to learn what eq. 15 asked for."""
        contracts = self.session.contracts
        if contracts.task_registry.state(self.task_id).budget_left >= contracts.round_ledger.client_count(self.task_id):
            return
        events = fetch_events(self.session.w3, self.session.transactor.registry, LogQuery.of(self.session.deployment))
        history = replay_task(self.task_id, events).history
        warned = state.data.setdefault("scaled_warned", [])
        for record in history.rounds:
            if record.scaled_down and record.round not in warned:
                warned.append(record.round)
                self.log.warning(
                    "budget short: round paid less than the terms ask, every payment scaled down pro rata",
                    round=record.round,
                    paid=record.paid,
                    asked=record.demanded,
                )
        task = history.task
        if task.bonuses_scaled_down and "bonuses" not in warned:
            warned.append("bonuses")
            self.log.warning(
                "budget short: final bonuses scaled down pro rata", paid=task.bonuses, asked=task.bonuses_demanded
            )

    def tick(self, state: AgentState) -> None:
        """The clock-driven work: post the current round when it is ready; settle and finish at the end."""
        registry = self.session.contracts.task_registry
        task = registry.state(self.task_id)
        status = task.status
        if status == TaskStatus.NONE:
            raise AgentError(f"task {self.task_id} does not exist on this chain", hint="check --task and --deployment")
        if task.aggregator != self.session.address:
            raise AgentError(
                f"task {self.task_id}'s aggregator is {task.aggregator}, not this account ({self.session.address})",
                hint="sign with the aggregator's key (FEDCHAIN_PRIVATE_KEY or --keystore)",
            )
        if status == TaskStatus.OPEN:
            if self.settings.bond and post_bond(self.session, self.task_id) is not None:
                self.log.info("bond posted", amount=self._load_context().params.aggregator_bond)
            return
        if status == TaskStatus.ABANDONED and not state.data.get("abandoned_logged"):
            state.data["abandoned_logged"] = True
            self.log.warning(
                "task abandoned: its round was not posted within the grace after its deadline; "
                "settling what the clients earned before",
                round=task.current_round,
            )
        if status in (TaskStatus.FINISHED, TaskStatus.SETTLED, TaskStatus.CANCELLED, TaskStatus.ABANDONED):
            result = settle_task(self.session, self.task_id)
            if result.pending:
                if state.data.get("waiting_final") != list(result.pending):
                    state.data["waiting_final"] = list(result.pending)
                    self.log.info("waiting for rounds to become final before settling", rounds=list(result.pending))
                return
            if result.ledger is not None:
                self.log.info("task settled", tx=result.ledger.transaction_hash)
            self._warn_scaled_rounds(state)  # rounds finalised on the way to settlement were not handled as events
            state.finished = True
            return
        finalize_due(self.session, self.task_id, self._posted)
        if task.current_round == 1 and not self.session.contracts.round_ledger.priors_posted(self.task_id):
            self._post_priors(task)
        context = self._load_context()
        round_number = task.current_round
        deadline = task.round_started_at + context.params.round_duration
        active = self._active_clients(round_number)
        count = len(active)
        auction = self.session.contracts.fog_auction
        # Before the deadline a commit counts once it is `confirmations` blocks deep (a newer one may still be
        # reorganised away); the post itself reads the commits as the contract will, at the latest block.
        now = chain_now(self.session)
        if now <= deadline:
            confirmed = max(0, int(self.session.w3.eth.block_number) - self.settings.confirmations)
            awaited = self._awaited(
                round_number,
                auction.commit_times(self.task_id, round_number, count, block=confirmed),
                active,
                block=confirmed,
            )
            if awaited:
                if self._waiting_logged != round_number:
                    self.log.info("waiting for commits", round=round_number, jobs=awaited, deadline=deadline)
                    self._waiting_logged = round_number
                return
        commits = auction.commit_times(self.task_id, round_number, count)
        awaited = self._awaited(round_number, commits, active)
        if awaited and now <= deadline:
            return  # a commit seen deep enough is gone from the latest block (a reorganisation): look again
        if awaited:
            self._report_missed(round_number, awaited)
        self._post_round(state, context, task, round_number, active, commits)

    def _awaited(
        self, round_number: int, commits: tuple[int, ...], active: list[bool], block: int | str = "latest"
    ) -> list[int]:
        """The jobs whose commit of ``round_number`` is missing from ``commits`` (read at ``block``) and whose fog
        node owed it at ``block``: not a vacant job, nor one handed to a standby from a later round (after a slash);
        the contract lets the round go without those."""
        auction = self.session.contracts.fog_auction
        return [
            i
            for i, committed in enumerate(commits)
            if active[i] and committed == 0 and self._owes(auction.job(self.task_id, i, block=block), round_number)
        ]

    @staticmethod
    def _owes(job: Job, round_number: int) -> bool:
        """Whether the fog node holding ``job`` owes a commit of ``round_number``."""
        return job.status == JobStatus.AWARDED and job.paid_up_to < round_number

    def _post_priors(self, task: TaskState) -> None:
        """Post the task's cross-task priors (eq. 6) once, before round 1; all zeros when no earlier task is similar."""
        contracts = self.session.contracts
        block = start_block(
            self.session.w3, contracts.task_registry, self.task_id, from_block=self.session.deployment.block_number
        )
        result = chain_priors(contracts.task_registry, contracts.round_ledger, self.task_id, task, block=block)
        try:
            receipt = contracts.round_ledger.post_priors(self.task_id, list(result.priors))
        except ContractRevert:
            if (
                contracts.round_ledger.priors_posted(self.task_id)
                or contracts.task_registry.state(self.task_id).current_round != 1
            ):
                return  # posted meanwhile (a restart), or round 1 went first: the chain keeps what it has
            raise
        self.log.info(
            "priors posted",
            priors=list(result.priors),
            similar=[task_id for task_id, _ in result.similar],
            tx=receipt.transaction_hash,
        )

    def _active_clients(self, round_number: int) -> list[bool]:
        """Which clients are active in ``round_number`` (read once per round, and again after each finalised round:
        only a final round removes clients)."""
        if self._active is None or self._active[0] != round_number:
            ledger = self.session.contracts.round_ledger
            count = ledger.client_count(self.task_id)
            self._active = (round_number, [ledger.is_active(self.task_id, i) for i in range(count)])
        return self._active[1]

    def _report_missed(self, round_number: int, awaited: list[int]) -> None:
        """Report every awarded job of ``awaited`` whose fog node missed the deadline (the contract slashes it)."""
        auction = self.session.contracts.fog_auction
        for index in awaited:
            job = auction.job(self.task_id, index)
            if job.status != JobStatus.AWARDED:
                continue
            try:
                receipt = transact_when_due(
                    auction,
                    "reportMissedRound(uint256,uint256)",
                    self.task_id,
                    index,
                    gas=REPORT_MISSED_GAS,
                    too_early=(AuctionNoMissedRound,),
                )
            except ContractRevert:
                after = auction.job(self.task_id, index)
                if after.status == JobStatus.AWARDED and after.winner == job.winner:
                    raise
                continue  # someone else reported it first (the job moved on): done
            self.log.warning("missed deadline reported", round=round_number, job=index, tx=receipt.transaction_hash)

    def _post_round(
        self,
        state: AgentState,
        context: _TaskContext,
        task: TaskState,
        round_number: int,
        active: list[bool],
        commits: tuple[int, ...],
    ) -> None:
        log = self.log.bind(round=round_number)
        key = (round_number, tuple(commits))
        if self._scored is not None and self._scored[0] == key:  # a retried post: the inputs are the same
            outcome, model_hash, rewards = self._scored[1], self._scored[2], self._scored[3]
        else:
            global_params = self._global_model(state, context, round_number)
            clients = [
                self._client_input(context, round_number, i, active[i], commits[i], task.round_started_at)
                for i in range(len(active))
            ]
            previous = self._strategy_state(context, round_number - 1)
            outcome = score_round(
                context.strategy,
                global_params,
                clients,
                context.evaluator,
                previous,
                quality=context.quality,
                screening=context.spec.screening,
                client_params=self._client_params(state, context, round_number, global_params, active),
                last_step=self._last_step(state, context, round_number, global_params),
                quality_floor=task_floor(context.spec, context.params, round_number),
                data_credit=context.spec.data_credit,
                grace=task_grace(context.spec, context.params),
            )
            model_hash = self._publish(context, round_number, outcome)
            rewards = self._publish_rewards(context, round_number, outcome, active)
            outcome = self._dishonest(outcome, round_number, log)
            self._scored = (key, outcome, model_hash, rewards)
        try:
            receipt = transact_when_due(
                self.session.contracts.round_ledger,
                "postRound(uint256,uint16,bytes32,uint64,bytes32,bytes32,(uint64,uint32,bool,bool)[])",
                self.task_id,
                round_number,
                model_hash,
                outcome.accuracy_wad,
                *rewards,
                list(outcome.measurements),
                gas=POST_ROUND_GAS_BASE + POST_ROUND_GAS_PER_CLIENT * len(outcome.measurements),
                too_early=(LedgerRoundNotReady,),
            )
        except LedgerBondShort as err:
            self._make_bond_whole(err.shortfall, log)
            return
        except ContractRevert as err:
            # Not ready after all (a commit raced the deadline), or posted meanwhile: the next step re-reads the chain.
            log.warning("round not posted; retrying", error=type(err).__name__)
            return
        state.data.setdefault("models", {})[str(round_number)] = to_hex(model_hash)
        self._posted[round_number] = tuple(outcome.measurements)
        log.info(
            "round posted",
            accuracy=round(outcome.accuracy, 4),
            accepted=sum(m.accepted for m in outcome.measurements),
            clients=len(outcome.measurements),
            model=model_hash,
            rewards=rewards[0] if rewards[0] != ZERO_ROOT else None,
            tx=receipt.transaction_hash,
        )
        crash = self.settings.crash_after_round
        if crash is not None and round_number >= crash:
            log.warning("fault: dying by SIGKILL, state unsaved", crash_after_round=crash)
            os.kill(os.getpid(), signal.SIGKILL)

    def _make_bond_whole(self, shortfall: int, log: AgentLogger) -> None:
        """Upheld challenges took ``shortfall`` of the bond: no round is posted until it is whole. The aggregator
        tops it up when it posted the bond; otherwise its bonder must (the next step posts once it has)."""
        _, bonder = self.session.contracts.disputes.bond(self.task_id)
        if int(bonder, 16) != int(self.session.address, 16):
            log.error(
                "round not posted: upheld challenges took from the bond; its bonder must top it up",
                shortfall=shortfall,
                bonder=bonder,
                hint=f"the bonder runs `fedchain task top-up-bond --task {self.task_id}`",
            )
            return
        receipt = top_up_bond(self.session, self.task_id)
        if receipt is not None:
            log.warning("bond topped up after upheld challenges", amount=shortfall, tx=receipt.transaction_hash)

    def _dishonest(self, outcome: RoundOutcome, round_number: int, log: AgentLogger) -> RoundOutcome:
        """The outcome as posted: honest, unless ``zero_client`` names a client of this round (quality 0)."""
        plan = self.settings.zero_client
        if plan is None or plan[1] != round_number:
            return outcome
        index = self.session.contracts.round_ledger.client_index(self.task_id, plan[0])
        measurements = list(outcome.measurements)
        if not measurements[index].committed:
            return outcome
        log.warning(
            "DISHONEST: posting quality 0 for an update scored honestly",
            job=index,
            honest_quality=measurements[index].quality,
        )
        measurements[index] = measurements[index]._replace(quality=0)
        return dataclasses.replace(outcome, measurements=tuple(measurements))

    def _publish(self, context: _TaskContext, round_number: int, outcome: RoundOutcome) -> bytes:
        """Write the new global model to the store and checkpoint the strategy state; returns the model's hash."""
        params = unflatten(outcome.global_params, context.param_spec)
        model_hash = put_model(self.session.store, context.spec, self.task_id, round_number, params)
        if outcome.state is not None:
            save_strategy_state(self.settings.checkpoint_dir, round_number, outcome.state)
        return model_hash

    def _publish_rewards(
        self, context: _TaskContext, round_number: int, outcome: RoundOutcome, active: list[bool]
    ) -> tuple[bytes, bytes]:
        """Write every active client's reward and the round's list to the store; (Merkle root, list hash) to post.

        Zeros for a strategy without rewards in kind."""
        rewards = stacked_rewards(outcome.rewards, active)
        if not rewards:
            return ZERO_ROOT, ZERO_ROOT
        accounts = self._accounts(context, len(active))
        listed, list_hash = put_rewards(
            self.session.store,
            context.spec,
            self.task_id,
            round_number,
            {i: (accounts[i], unflatten(reward, context.param_spec)) for i, reward in rewards.items()},
        )
        return listed.tree.root, list_hash

    # ------------------------------------------------------------------ inputs

    def _accounts(self, context: _TaskContext, count: int) -> list[str]:
        """The addresses of the task's first ``count`` clients (read from the chain once)."""
        if count > len(context.clients):
            ledger = self.session.contracts.round_ledger
            context.clients.extend(ledger.client(self.task_id, i).account for i in range(len(context.clients), count))
        return context.clients

    def _commitments(self, state: AgentState) -> CommitmentBook:
        """The task's reward commitments seen in the blocks handled so far."""
        return CommitmentBook(self.task_id, state.data.setdefault("commitments", {}))

    def _client_params(
        self,
        state: AgentState,
        context: _TaskContext,
        round_number: int,
        global_params: torch.Tensor,
        active: list[bool],
    ) -> torch.Tensor | None:
        """The model each client trained ``round_number`` from when the task trains from rewards, stacked ``[n, d]``.

        None when clients train from the global model (and in round 1, where every client starts from the
        initial model). A client's start is its reward of the round before, proven against that round's root;
        a client without one (removed) starts from the global model, which nobody scores.
        """
        if context.spec.train_from != "reward" or round_number == 1:
            return None
        commitment = self._commitments(state).get(round_number - 1)
        if commitment is None:  # posted in a block not handled yet (confirmations): read the logs once
            commitment = reward_commitments(self.session, self.task_id).get(round_number - 1)
        if commitment is None:
            raise AgentError(
                f"round {round_number - 1} of task {self.task_id} committed no rewards, but its clients train from them",
                hint="the task's rounds were posted by another aggregator or strategy; run the task spec's strategy",
            )
        accounts = self._accounts(context, len(active))
        starts = global_params.expand(len(active), -1).clone()
        for index, keep in enumerate(active):
            if keep:
                reward = verified_reward(self.session, context.spec, commitment, index, accounts[index])
                starts[index] = flatten(reward.params, context.param_spec)[0].to(starts.dtype)
        return starts

    def _load_context(self) -> _TaskContext:
        if self._context is None:
            params = self.session.contracts.task_registry.params(self.task_id)
            spec = load_spec(self.session.store, params.dataset_id)
            name = self.settings.strategy or spec.strategy
            if name != spec.strategy:
                self.log.warning("strategy differs from the task spec's", strategy=name, spec_strategy=spec.strategy)
            strategy = task_strategy(name, self.settings.strategy_options, spec)
            evaluator = Evaluator(spec.model_spec(), load_validation(spec, self.settings.data_root), self.device)
            self._context = _TaskContext(
                params=params,
                spec=spec,
                strategy=strategy,
                evaluator=evaluator,
                quality=quality_source(name, self.settings.quality),
                param_spec=spec.param_spec(),
            )
            self.log.info(
                "task loaded",
                dataset=spec.dataset,
                model=spec.model,
                strategy=name,
                quality=self._context.quality,
                validation=len(evaluator.dataset),
            )
        return self._context

    def _global_model(self, state: AgentState, context: _TaskContext, round_number: int) -> torch.Tensor:
        """The global model clients trained from in ``round_number``: the initial model, or round n-1's posted model."""
        previous = round_number - 1
        if previous == 0:
            model_hash: bytes | str = context.params.model_id
        else:
            models = state.data.get("models", {})
            if str(previous) not in models:
                models.update(self._posted_models())
                state.data["models"] = models
            model_hash = models[str(previous)]
        params = load_model(self.session.store, context.spec, model_hash, task_id=self.task_id, round_number=previous)
        return flatten(params, context.param_spec)[0]

    def _last_step(
        self, state: AgentState, context: _TaskContext, round_number: int, global_params: torch.Tensor
    ) -> torch.Tensor | None:
        """Round ``round_number``'s start model minus the one before it (None in round 1, or when the task's
        screening does not look at it): what a disguised free rider resends (screening's rule 5)."""
        if round_number < 2 or context.spec.screening.min_novelty is None:
            return None
        return global_params - self._global_model(state, context, round_number - 1).to(global_params.dtype)

    def _posted_models(self) -> dict[str, str]:
        """Round -> model hash of every posted round of the task, from the chain's RoundPosted events."""
        query = LogQuery(
            addresses=(self.session.contracts.round_ledger.address,), from_block=self.session.deployment.block_number
        )
        return {
            str(event.round): to_hex(event.model_hash)
            for event in iter_events(self.session.w3, self.session.transactor.registry, query)
            if isinstance(event, RoundPosted) and event.task_id == self.task_id
        }

    def _client_input(
        self, context: _TaskContext, round_number: int, index: int, active: bool, committed_at: int, round_start: int
    ) -> ClientInput:
        """Client ``index``'s update (verified and decoded, or None) and round time."""
        auction = self.session.contracts.fog_auction
        job = auction.job(self.task_id, index)
        if not active or committed_at == 0:
            return ClientInput(update=None, data_size=job.data_size, round_time=None, active=active)
        self._accounts(context, index + 1)
        try:
            decoded = load_update(
                self.session.store,
                context.spec,
                job.update_hash,
                task_id=self.task_id,
                round_number=round_number,
                client_index=index,
                client=context.clients[index],
                data_size=job.data_size,
            )
        except UpdateRejected as err:
            self.log.warning(
                "update rejected",
                round=round_number,
                job=index,
                reason=err.reason.value,
                update=job.update_hash,
                error=str(err.args[0]),
            )
            return ClientInput(update=None, data_size=job.data_size, round_time=committed_at - round_start)
        return ClientInput(
            update=flatten(decoded.params, context.param_spec)[0],
            data_size=job.data_size,
            round_time=committed_at - round_start,
            local_losses=decoded.local_losses,
        )

    def _strategy_state(self, context: _TaskContext, round_number: int) -> Any:
        """The strategy's state after ``round_number`` (None before round 1): its checkpoint, or rebuilt.

        The state carries what later rounds are scored by (the grace's memory, a strategy's reputations), so a
        round scored from a fresh state would be scored as the task's first, and the auditor, who carries the
        state from round 1, would disagree with the post. Without a checkpoint (a new machine, a lost disk) the
        state is rebuilt as the auditor rebuilds it: every posted round scored again, in order, from the chain
        and the store (:class:`fedchain.audit.scores.ScoreReproduction`), and checkpointed.
        """
        if round_number == 0:
            return None
        state = load_strategy_state(self.settings.checkpoint_dir, round_number, context.strategy.state_type)
        if state is not None:
            return state
        self.log.warning("no strategy checkpoint; scoring the posted rounds again to rebuild it", round=round_number)
        events = fetch_events(self.session.w3, self.session.transactor.registry, LogQuery.of(self.session.deployment))
        history = replay_task(self.task_id, events).history
        reproduction = ScoreReproduction(
            context.spec,
            context.params.model_id,
            self.task_id,
            self.session.store,
            data_root=self.settings.data_root,
            device=str(self.device),
            strategy=self.settings.strategy,
            quality=self.settings.quality,
            strategy_options=self.settings.strategy_options,
        )
        reproduction.reproduce(history, reward_events(self.task_id, events), round_number)
        state = reproduction.state
        if state is not None:  # None: no round so far had an update to score, as _publish saves nothing then
            save_strategy_state(self.settings.checkpoint_dir, round_number, state)
        self.log.info("strategy state rebuilt", round=round_number)
        return state
