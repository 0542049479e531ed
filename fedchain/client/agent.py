"""The client agent: join a task, auction its training job, hand its data to the winner, settle, withdraw.

One :class:`ClientAgent` is one OS process with its own key, for one task. It
runs the shared agent loop (:mod:`fedchain.agent`) and on every poll moves its
job one step on, reading the chain first so that every step is idempotent:

1. join with deposit d and the commitment keccak256(abi.encode(D, salt)) to its data size D;
2. open the auction of its job (revealing D and the salt);
3. after the reveal deadline, close it, escrowing price x N: the price is read
   from the chain (the bids, and the contract's own ``utility`` view for each);
4. write its (locally noised) data to the blob store and commit the data's hash (DataHandoff);
5. after every posted round, within the round's challenge window: re-score its own entry with the
   auditor's code and, when its update was screened out, re-execute its job
   (:class:`~fedchain.disputes.watch.EntryWatcher`); challenge the aggregator when its entry is off
   beyond tolerance, or its fog node when the fog node did not train the job as told
   (``ClientConfig.watch``);
6. when the task's strategy rewards in kind: after every posted round, fetch its reward, prove it
   against the round's root on chain (``RoundLedger.verifyReward``) and record it; the last one is
   kept beside the state file (``<state>-reward.safetensors``, :meth:`ClientAgent.reward_path`).
   The rounds' roots come from the ``RewardsCommitted`` events of the blocks it handles, kept in its
   state (:class:`~fedchain.rewards.CommitmentBook`); blocks reorganised away take theirs, and the
   rewards proven against them, back;
7. when the task ended: finalise the rounds that are due, and once every round is final settle the
   task's clients and its own job (a lost race to settle counts as done), then withdraw what it is owed.

The salt is derived from the key (:mod:`fedchain.client.commitments`), so a
client killed between joining and saving its state can still open its auction.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fedchain.agent import AgentLogger, AgentState, BlockRange
from fedchain.agent.chainloop import chain_now, session_agent, transact_when_due
from fedchain.agent.session import ChainSession
from fedchain.chain import bindings as b
from fedchain.chain.bindings import JobStatus, TaskStatus
from fedchain.chain.erc20 import payment_value
from fedchain.chain.events import LogQuery, iter_events
from fedchain.client.config import ClientConfig
from fedchain.client.data import client_dataset
from fedchain.client.handoff import JobDataMeta, encode_job_data
from fedchain.client.joining import join_call, join_salt
from fedchain.data.datasets import ImageDataset
from fedchain.disputes.service import open_entry_challenge, open_fog_challenge
from fedchain.disputes.watch import EntryWatcher
from fedchain.errors import AgentError, ContractRevert, RewardError
from fedchain.files import write_atomic
from fedchain.publisher.service import settle_task, withdraw_task_asset
from fedchain.rewards import CommitmentBook, verified_reward
from fedchain.store.digest import to_hex
from fedchain.taskspec import TaskSpec, gives_rewards, load_spec

_log = logging.getLogger(__name__)

#: Gas limit of closing an auction sent without an estimate (the bids are ranked at their reveals; the close reads
#: the best two and counts the unrevealed: under two hundred thousand used).
CLOSE_AUCTION_GAS = 2_000_000

#: Gas limit of opening the auction sent with the join, before the join is mined (it uses about 120,000).
OPEN_AUCTION_GAS = 250_000

#: Task statuses after which nothing but settlement is left.
ENDED = (TaskStatus.FINISHED, TaskStatus.SETTLED, TaskStatus.CANCELLED, TaskStatus.ABANDONED)


@dataclass(frozen=True)
class Award:
    """What closing an auction costs: the winning bid (None: no bid was revealed) and its price per round."""

    winner: int | None
    price: int


def winning_bid(ranked: Sequence[tuple[int, int, int]], second_price: bool) -> Award:
    """The contract's rule over the job's ranked bids, best first, as ``(bid index, price, utility)``.

    The best ranked bid wins (the contract ranked the revealed bids of utility >= 0 by utility, the earliest on
    ties). First price: the winner is paid its bid. Second price: its bid plus its utility margin over the
    runner-up; alone, its bid.
    """
    if not ranked:
        return Award(None, 0)
    winner, price, best = ranked[0]
    if second_price and len(ranked) > 1:
        price += best - ranked[1][2]
    return Award(winner, price)


class ClientAgent:
    """A client of one task (see the module docstring); :meth:`run` until the task is settled or SIGTERM."""

    def __init__(self, session: ChainSession, config: ClientConfig) -> None:
        self.session = session
        self.config = config
        self.contracts = session.contracts
        self.address = session.address
        self.task_id = config.task_id
        self.log = AgentLogger(_log, agent=config.name, task=config.task_id)
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
        self._spec: TaskSpec | None = None
        self._dataset: ImageDataset | None = None
        self._watcher: EntryWatcher | None = None

    def run(self) -> AgentState:
        """Run until the task is settled and the balance withdrawn (or SIGTERM); returns the saved state."""
        self.log.info("client up", account=self.address)
        return self.agent.run()

    def step(self) -> BlockRange | None:
        """One step of the loop (for tests and embedding)."""
        return self.agent.step()

    @property
    def state(self) -> AgentState:
        """A copy of the last saved state."""
        return self.agent.state

    # ------------------------------------------------------------------ views

    @property
    def spec(self) -> TaskSpec:
        if self._spec is None:
            self._spec = load_spec(self.session.store, self.contracts.task_registry.params(self.task_id).dataset_id)
        return self._spec

    @property
    def dataset(self) -> ImageDataset:
        if self._dataset is None:
            self._dataset = client_dataset(self.spec, self.config)
        return self._dataset

    def now(self) -> int:
        """The chain's time (see :func:`chain_now`)."""
        return chain_now(self.session)

    def _salt(self) -> bytes:
        return join_salt(self.session, self.task_id)

    # ------------------------------------------------------------------ the steps

    def _handle(self, blocks: BlockRange, state: AgentState) -> None:
        if gives_rewards(self.spec.strategy):
            self._record_commitments(blocks, state)
        self._act(state)

    def _commitments(self, state: AgentState) -> CommitmentBook:
        """The task's reward commitments seen in the blocks handled so far."""
        return CommitmentBook(self.task_id, state.data.setdefault("commitments", {}))

    def _record_commitments(self, blocks: BlockRange, state: AgentState) -> None:
        """Keep the task's ``RewardsCommitted`` of ``blocks``: only the new blocks' logs are read."""
        book = self._commitments(state)
        query = LogQuery(
            addresses=(self.contracts.round_ledger.address,), from_block=blocks.first, to_block=blocks.last
        )
        for event in iter_events(self.session.w3, self.session.transactor.registry, query):
            if isinstance(event, b.RewardsCommitted):
                book.record(event)

    def _on_reorg(self, state: AgentState, ancestor: int) -> None:
        """Forget the commitments of blocks reorganised away, and the rewards proven against them:
        the rounds are proven again against what the new branch commits."""
        gone = self._commitments(state).forget_after(ancestor)
        rewards = state.data.get("rewards", {})
        for round_number in gone:
            rewards.pop(str(round_number), None)
        if state.data.get("final_reward") not in rewards.values():
            state.data.pop("final_reward", None)
        if gone:
            self.log.warning("rewards reorganised away; proving them again", rounds=gone, block=ancestor)

    def _act(self, state: AgentState) -> None:
        data = state.data
        task = self.contracts.task_registry.state(self.task_id)
        # Read from the chain at every step, not from the state: a join or a hand-off in blocks that were
        # reorganised away, or in a transaction the chain dropped, is then sent again.
        self._join(state, task)
        index = data["client_index"]
        job = self.contracts.fog_auction.job(self.task_id, index)
        if job.status == JobStatus.NONE and task.status == TaskStatus.OPEN:
            receipt = self.contracts.fog_auction.open_auction(self.task_id, data["data_size"], self._salt())
            self.log.info("auction opened", job=index, data_size=data["data_size"], tx=receipt.transaction_hash)
        elif job.status == JobStatus.BIDDING and self.now() > job.reveal_deadline:
            self._close(state, index, job)
        elif job.status == JobStatus.AWARDED and (
            "data_hash" not in data or bytes(self.contracts.data_handoff.data_hash(self.task_id, index)) == bytes(32)
        ):
            self._hand_off(state, index)
        if job.status == JobStatus.VACANT and not data.get("vacant_logged"):
            data["vacant_logged"] = True
            self.log.warning("no fog node trains this job (no bid revealed, or no standby left)", job=index)
        if task.status != TaskStatus.OPEN and self.config.watch != "off":
            self._review(state, index)
        if gives_rewards(self.spec.strategy) and task.status != TaskStatus.OPEN:
            self._collect_rewards(state, index)
        if task.status in ENDED:
            self._settle(state, index)

    def _review(self, state: AgentState, index: int) -> None:
        """Review its own entry of every round posted since the last step, while the round can still be challenged."""
        reviewed: dict[str, str | None] = state.data.setdefault("reviewed", {})
        ledger = self.contracts.round_ledger
        posted, _ = ledger.rounds(self.task_id)
        window = self.contracts.task_registry.params(self.task_id).challenge_window
        for round_number in range(1, posted + 1):
            if str(round_number) in reviewed:
                continue
            closes = ledger.round_record(self.task_id, round_number).posted_at + window
            if self.now() > closes:
                reviewed[str(round_number)] = None
                self.log.warning("round posted and its window closed before it was reviewed", round=round_number)
                continue
            if self._watcher is None:
                self._watcher = EntryWatcher(
                    self.session,
                    self.task_id,
                    data_root=self.config.data_root,
                    device=self.config.device,
                    reexecute=self.config.watch == "reexecute",
                )
            grievance = self._watcher.review(round_number, index, own_job=True)
            if grievance is None:
                reviewed[str(round_number)] = None
                self.log.info("own entry reviewed: as it should be", round=round_number)
                continue
            self.log.warning(
                "own entry wrong: challenging", round=round_number, against=grievance.kind, reason=grievance.reason
            )
            try:
                if grievance.kind == "entry":
                    assert grievance.proposed is not None
                    opened = open_entry_challenge(self.session, self.task_id, round_number, index, grievance.proposed)
                else:
                    assert grievance.fog is not None
                    opened = open_fog_challenge(
                        self.session, self.task_id, round_number, index, grievance.fog, grievance.segment
                    )
            except ContractRevert as err:  # the window closed while it reviewed: nothing more can be done
                reviewed[str(round_number)] = None
                self.log.error("challenge refused", round=round_number, error=type(err).__name__, hint=err.hint)
                continue
            reviewed[str(round_number)] = str(opened.challenge_id)
            self.log.info(
                "challenge opened",
                round=round_number,
                challenge=opened.challenge_id,
                kind=grievance.kind,
                tx=opened.receipt.transaction_hash,
            )

    @property
    def reward_path(self) -> Path:
        """Where the client keeps its last verified reward (the stored safetensors bytes)."""
        return self.config.state_path.with_name(self.config.state_path.stem + "-reward.safetensors")

    def _collect_rewards(self, state: AgentState, index: int) -> None:
        """Fetch and prove the reward of every round committed since the last step; keep the newest."""
        rewards: dict[str, str | None] = state.data.setdefault("rewards", {})
        for commitment in self._commitments(state).commitments():
            round_number = commitment.round
            if str(round_number) in rewards:
                continue
            try:
                reward = verified_reward(self.session, self.spec, commitment, index, self.address)
            except RewardError as err:
                if not self.contracts.round_ledger.is_active(self.task_id, index):
                    rewards[str(round_number)] = None  # removed from the task: no reward from then on
                    self.log.info("no reward: the client was removed from the task", round=round_number)
                    continue
                # Not in this store yet, or altered: try again at the next step.
                self.log.warning("reward not verified", round=round_number, error=str(err.args[0]))
                return
            rewards[str(round_number)] = to_hex(reward.reward_hash)
            self.log.info("reward verified", round=round_number, reward=reward.reward_hash, proof=len(reward.proof))
        kept = {r: h for r, h in rewards.items() if h is not None}
        if kept:
            last = max(kept, key=int)
            if state.data.get("final_reward") != kept[last] or not self.reward_path.exists():
                write_atomic(self.reward_path, self.session.store.get(kept[last]))
                state.data["final_reward"] = kept[last]

    def _join(self, state: AgentState, task: b.TaskState) -> None:
        """Join the task, or find the join on chain (made before a restart, or earlier in this process)."""
        ledger = self.contracts.round_ledger
        try:
            index = int(ledger.client_index(self.task_id, self.address))
        except b.LedgerNotClient:
            if task.status != TaskStatus.OPEN:
                raise AgentError(
                    f"task {self.task_id} is not open for clients (status {task.status.name})",
                    hint="join a task while it is open: before its publisher starts it",
                ) from None
            size = len(self.dataset)
            params = self.contracts.task_registry.params(self.task_id)
            # Join and open the job's auction in one block: both go out before either is awaited, the opening
            # with a fixed gas limit (its estimate would fail before the join is mined).
            transactor, auction = self.session.transactor, self.contracts.fog_auction
            data, value = join_call(self.session, self.task_id, size, params.client_deposit)
            joining = transactor.submit(ledger.address, data, value=value)
            opening = transactor.submit(
                auction.address,
                auction.encode("openAuction(uint256,uint64,bytes32)", self.task_id, size, self._salt()),
                gas=OPEN_AUCTION_GAS,
            )
            receipt = transactor.wait(joining)
            index = int(receipt.events_of(b.ClientJoined)[0].client_index)
            self.log.info(
                "joined", job=index, data_size=size, deposit=params.client_deposit, tx=receipt.transaction_hash
            )
            try:
                opened = transactor.wait(opening)
                self.log.info("auction opened", job=index, data_size=size, tx=opened.transaction_hash)
            except ContractRevert as err:  # the next step reads the job's status and opens it then
                self.log.warning("auction not opened with the join; opening it again", error=type(err).__name__)
        if state.data.get("client_index") != index:
            state.data.update(client_index=index, data_size=len(self.dataset))

    def _close(self, state: AgentState, index: int, job: b.Job) -> None:
        auction = self.contracts.fog_auction
        params = self.contracts.task_registry.params(self.task_id)
        bids = auction.bids(self.task_id, index)
        ranked = [(i, bids[i].price, bids[i].utility) for i in auction.ranked(self.task_id, index)]
        award = winning_bid(ranked, params.second_price)
        utilities = bids
        escrow = award.price * params.rounds
        try:
            receipt = transact_when_due(
                auction,
                "closeAuction(uint256,uint256)",
                self.task_id,
                index,
                value=payment_value(self.contracts.treasury, self.task_id, escrow),
                gas=CLOSE_AUCTION_GAS,
                too_early=(b.AuctionRevealNotOver,),
            )
        except b.AuctionRevealNotOver:
            return  # the chain's clock is not there yet; next poll
        closed = receipt.events_of(b.AuctionClosed)[0]
        state.data.update(winner=award.winner, price=closed.price, escrow=closed.escrow)
        self.log.info(
            "auction closed",
            job=index,
            bids=len(utilities),
            winner=award.winner,
            price=closed.price,
            escrow=closed.escrow,
            tx=receipt.transaction_hash,
        )

    def _hand_off(self, state: AgentState, index: int) -> None:
        handoff = self.contracts.data_handoff
        epsilon = self.config.epsilon if self.config.epsilon is not None else self.spec.privacy_epsilon
        meta = JobDataMeta(task_id=self.task_id, client_index=index, dataset=self.spec.dataset, epsilon=epsilon)
        digest = self.session.store.put(encode_job_data(self.dataset, meta))
        committed = bytes(handoff.data_hash(self.task_id, index))
        if committed == bytes(32):
            receipt = handoff.commit_data(self.task_id, index, digest)
            self.log.info(
                "data handed off",
                job=index,
                data=to_hex(digest),
                samples=len(self.dataset),
                tx=receipt.transaction_hash,
            )
        elif committed != digest:
            self.log.error(
                "the data committed before differs from the data now", job=index, committed=to_hex(committed)
            )
        state.data["data_hash"] = to_hex(committed if committed != bytes(32) else digest)

    def _settle(self, state: AgentState, index: int) -> None:
        # The clients and its own job: the aggregator settles every job, and the fog nodes theirs.
        settlement = settle_task(self.session, self.task_id, jobs=[index])
        if settlement.pending:  # the last rounds' windows (or verdicts): settle at a later step
            return
        amount = withdraw_task_asset(self.session, self.task_id)
        state.data.update(withdrawn=amount, settled_jobs=list(settlement.jobs))
        self.log.info("settled and withdrew", job=index, wei=amount)
        state.finished = True
