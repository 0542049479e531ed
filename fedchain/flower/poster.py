"""Posting a Flower federation's rounds on chain without holding up its loop.

The strategy hands each scored round to a :class:`RoundPoster`, which posts it from a thread of its own, in
round order, and finalises the posted rounds as their challenge windows pass (so a removal takes effect while
the federation runs) (the contract takes round n only once n - 1 is posted). A post is idempotent by (task, round): a
round that the chain already has (a retry, a restarted ServerApp, a post that landed although its receipt was
lost) is not posted again. A post that fails for a passing reason (RPC down, fees) is retried; :meth:`close`
waits for the queue and raises the first failure that did not pass, so a run never ends with a round silently
unposted.

Whether and when each client delivered is the chain's: each client commits its update on chain as it replies
(``commitOwnUpdate``), and the post waits until every active client committed or the round's deadline passed,
as the contract requires, then posts the commits as the chain has them.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass

from fedchain.agent.chainloop import chain_now, transact_when_due
from fedchain.agent.finality import finalize_due
from fedchain.agent.session import ChainSession
from fedchain.aggregator.service import POST_ROUND_GAS_BASE, POST_ROUND_GAS_PER_CLIENT
from fedchain.chain.bindings import LedgerCommitMismatch, LedgerRoundNotReady, Measurement, TaskStatus
from fedchain.chain.merkle import ZERO_ROOT
from fedchain.errors import AgentError, ChainError, ContractRevert, FedchainError
from fedchain.fl.quality import to_wad

log = logging.getLogger(__name__)

POST_SIGNATURE = "postRound(uint256,uint16,bytes32,uint64,bytes32,bytes32,(uint64,uint32,bool,bool)[])"


@dataclass(frozen=True)
class PendingRound:
    round: int
    model_hash: bytes
    accuracy: float
    measurements: tuple[Measurement, ...]


class RoundPoster:
    """Posts rounds from a background thread, in order, once each (module docstring)."""

    def __init__(
        self,
        session: ChainSession,
        task_id: int,
        *,
        retries: int = 5,
        backoff_s: float = 2.0,
        finalize_every_s: float = 2.0,
    ) -> None:
        self.session, self.task_id = session, task_id
        self.retries, self.backoff_s, self.finalize_every_s = retries, backoff_s, finalize_every_s
        self._queue: queue.Queue[PendingRound | None] = queue.Queue()
        self._error: BaseException | None = None
        #: Rounds this poster saw on chain (posted by it or found there), with the post's transaction when it sent one.
        self.posted: dict[int, str | None] = {}
        #: Gas used by each post this poster sent.
        self.gas: dict[int, int] = {}
        #: The measurements of each round this poster posted (finalisation sends them again).
        self._measurements: dict[int, tuple[Measurement, ...]] = {}
        #: Set once the task no longer takes posts (it finished early, or ended): later rounds are dropped.
        self.task_over = False
        self._thread = threading.Thread(target=self._run, name=f"fedchain-poster-{task_id}", daemon=True)
        self._thread.start()

    def submit(
        self, round_number: int, model_hash: bytes, accuracy: float, measurements: tuple[Measurement, ...]
    ) -> None:
        """Queue a scored round; returns at once."""
        if self._error is not None:
            raise AgentError(f"an earlier round of task {self.task_id} could not be posted: {self._error}")
        self._queue.put(PendingRound(round_number, model_hash, accuracy, tuple(measurements)))

    def close(self, timeout_s: float | None = None) -> None:
        """Wait until every queued round is posted; raise the failure that stopped a post, if any.

        By default it waits 10 minutes plus a round's duration per queued round: a round whose client did not commit
        is posted only after its deadline."""
        if timeout_s is None:
            duration = self.session.contracts.task_registry.params(self.task_id).round_duration
            timeout_s = 600.0 + (self._queue.qsize() + 1) * duration
        self._queue.put(None)
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            raise AgentError(
                f"the posts of task {self.task_id} did not finish within {timeout_s:.0f} s",
                hint="check that the chain mines and that the aggregator's account has gas money",
            )
        if self._error is not None:
            raise AgentError(f"a round of task {self.task_id} was not posted: {self._error}") from self._error

    # ------------------------------------------------------------------ the thread

    def _run(self) -> None:
        while True:
            try:
                pending = self._queue.get(timeout=self.finalize_every_s)
            except queue.Empty:
                self._finalize()  # between posts: a removal becomes final, and the node gets no more work
                continue
            if pending is None:
                return
            if self._error is not None or self.task_over:
                continue  # a round after one that failed cannot be posted: the contract takes rounds in order
            try:
                self._post(pending)
            except Exception as err:  # noqa: BLE001 (recorded, raised by close(): the thread must not die silently)
                log.error("round %d of task %d not posted: %s", pending.round, self.task_id, err)
                self._error = err
            self._finalize()

    def _as_committed(self, pending: PendingRound, round_started_at: int) -> tuple[Measurement, ...] | None:
        """``pending``'s measurements with whether and when each client committed as the chain has it (the
        contract checks both), or None while an active client may still commit before the round's deadline.

        The strategy scored the commits it saw; one mined after it looked is posted committed and unaccepted
        (quality 0: its update came too late to be used), one gone from the chain (a reorganisation) uncommitted.
        A round time is the one the client's commit recorded: from when the round's work could start
        (contracts/README.md, "Tasks trained by their own clients")."""
        contracts = self.session.contracts
        ledger = contracts.round_ledger
        deadline = round_started_at + contracts.task_registry.params(self.task_id).round_duration
        # The deadline against the next block's time (a chain that mines on demand has no later block yet), then
        # every read at one block: the commits and the clients' standing as one picture.
        before_deadline = chain_now(self.session) <= deadline
        block = self.session.w3.eth.block_number
        measurements = []
        for index, m in enumerate(pending.measurements):
            _, committed_at, round_time = ledger.own_commit(self.task_id, pending.round, index, block=block)
            if committed_at:
                late = Measurement(quality=0, round_time=round_time, accepted=False, committed=True)
                measurements.append(m._replace(round_time=round_time) if m.committed else late)
            elif before_deadline and ledger.is_active(self.task_id, index, block=block):
                return None  # the client has until the deadline to commit: the contract refuses the post till then
            else:
                measurements.append(Measurement(quality=0, round_time=0, accepted=False, committed=False))
        return tuple(measurements)

    def _committed(self, pending: PendingRound) -> tuple[Measurement, ...] | None:
        """:meth:`_as_committed` once every active client committed or the round's deadline passed; None when the
        task stopped running meanwhile."""
        told = False
        while True:
            state = self.session.contracts.task_registry.state(self.task_id)
            if state.status != TaskStatus.RUNNING:
                return None
            measurements = self._as_committed(pending, state.round_started_at)
            if measurements is not None:
                return measurements
            if not told:
                log.info("round %d of task %d: waiting for every commit or the deadline", pending.round, self.task_id)
                told = True
            time.sleep(self.finalize_every_s)
            self._finalize()

    def _finalize(self) -> None:
        """Finalise the posted rounds whose challenge window has passed, as the aggregator of any task does."""
        try:
            finalize_due(self.session, self.task_id, self._measurements or None)
        except FedchainError as err:  # anyone may finalise later (settlement does): not this poster's failure
            log.warning("could not finalise the rounds of task %d that are due: %s", self.task_id, err)

    def _already_posted(self, round_number: int) -> bool:
        posted, _ = self.session.contracts.round_ledger.rounds(self.task_id)
        return bool(posted >= round_number)

    def _post(self, pending: PendingRound) -> None:
        ledger = self.session.contracts.round_ledger
        for attempt in range(1, self.retries + 1):
            try:
                if self._already_posted(pending.round):
                    self.posted.setdefault(pending.round, None)
                    log.info("round %d of task %d is on chain", pending.round, self.task_id)
                    return
                measurements = self._committed(pending)
                if measurements is None:
                    self.task_over = True
                    log.info("task %d no longer runs: round %d is not posted", self.task_id, pending.round)
                    return
                receipt = transact_when_due(
                    ledger,
                    POST_SIGNATURE,
                    self.task_id,
                    pending.round,
                    pending.model_hash,
                    to_wad([pending.accuracy])[0],
                    ZERO_ROOT,
                    ZERO_ROOT,
                    list(measurements),
                    gas=POST_ROUND_GAS_BASE + POST_ROUND_GAS_PER_CLIENT * len(pending.measurements),
                    too_early=(LedgerRoundNotReady,),
                )
            except ContractRevert as err:
                if self._already_posted(pending.round):
                    continue  # lost a race with an earlier attempt that landed: done
                if isinstance(err, LedgerCommitMismatch) and attempt < self.retries:
                    continue  # a commit mined as the round was read (at its deadline): read it again
                raise
            except ChainError as err:
                if attempt == self.retries:
                    raise
                log.warning("post of round %d failed (%s); retrying", pending.round, err)
                time.sleep(self.backoff_s * attempt)
                continue
            self.posted[pending.round] = receipt.transaction_hash
            self.gas[pending.round] = int(receipt.gas_used)
            self._measurements[pending.round] = measurements
            if self.session.contracts.task_registry.state(self.task_id).status != TaskStatus.RUNNING:
                self.task_over = True  # the last round, or the target accuracy reached
            accepted = sum(m.accepted for m in measurements)
            log.info(
                "round %d of task %d posted: %d of %d accepted, gas %d, tx %s",
                pending.round,
                self.task_id,
                accepted,
                len(pending.measurements),
                receipt.gas_used,
                receipt.transaction_hash,
            )
            return
