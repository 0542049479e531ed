"""``--verify-scores``: re-run the aggregator's scoring of every round from the stored updates.

For round ``n`` the auditor takes what the aggregator had: the task spec
(``datasetId``), the global model the clients trained from (``modelId`` for
round 1, ``RoundPosted(n-1).modelHash`` after), every committed update of the
round (verified and decoded as the aggregator does, with the local losses fedave
needs, a malformed one counting as rejected), the data sizes from the auctions, the publisher's validation set
from the data root, and the strategy's state carried from the previous rounds
of this reproduction. It then calls the aggregator's own scoring function,
:func:`fedchain.aggregator.scoring.score_round`, and compares the posted
qualities, acceptances and accuracy with the reproduced ones. Evaluation runs
in floating point, so qualities match within a tolerance, not to the wei.

For a strategy that rewards in kind, every stored reward of the round
(``RewardsCommitted``) is compared with the reproduced one: their largest
parameter difference must be within the tolerance too. When the task's clients
train from their rewards, each client's start is its stored reward of the round
before (checked by ``store.rewards``), as the aggregator had it.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fedchain.audit.checks import DEFAULT_SCORE_TOLERANCE, CheckName, Tally
from fedchain.audit.history import PostedRecord, TaskHistory
from fedchain.audit.replay import replay_task
from fedchain.audit.report import RoundScore, ScoreVerification
from fedchain.audit.rewards import reward_events
from fedchain.chain.abi import ChainEvent
from fedchain.chain.bindings import RewardsCommitted
from fedchain.errors import AuditError, FedchainError, RejectReason, UpdateRejected
from fedchain.fl.params import ParamSpec, flatten
from fedchain.fl.quality import to_wad
from fedchain.store import BlobStore
from fedchain.store.digest import to_hex
from fedchain.units import WAD

if TYPE_CHECKING:
    import torch

    from fedchain.aggregator.scoring import ClientInput, QualityChoice, RoundOutcome
    from fedchain.flower.identity import SignedReply
    from fedchain.taskspec import TaskSpec

log = logging.getLogger(__name__)


def verify_scores(
    task_id: int,
    events: Iterable[ChainEvent],
    store: BlobStore,
    *,
    tolerance: float = DEFAULT_SCORE_TOLERANCE,
    data_root: str | Path | None = None,
    device: str = "cpu",
    strategy: str | None = None,
    quality: QualityChoice = "auto",
) -> ScoreVerification:
    """Reproduce every posted round's scores, and re-judge the segment every fog verdict names.

    ``strategy`` and ``quality`` are what the aggregator ran with when it did not
    use the task spec's strategy (its ``--strategy``, ``--quality``; the spec's
    options go with the spec's strategy only, as in the aggregator). An entry a
    verdict corrected is compared as corrected; one a verdict voided (or whose
    challenge expired) is not scored, so it is not compared.
    """
    events = list(events)
    history = replay_task(task_id, events).history
    commitments = reward_events(task_id, events)
    tally = Tally()
    limit = round(tolerance * WAD)
    rounds: list[RoundScore] = []
    try:
        reproduction = ScoreReproduction.of(
            history, store, data_root=data_root, device=device, strategy=strategy, quality=quality
        )
        for posted in history.posted:
            reproduced = reproduction.reproduce(history, commitments, posted.round)
            rounds.append(_compare(history, posted, reproduced, commitments, store, tally, limit))
        recheck_fog_verdicts(history, commitments, store, reproduction.spec, tally, device=device)
    except FedchainError as err:
        tally.fail(CheckName.SCORES, f"cannot reproduce the scores: {str(err).splitlines()[0]}")
    if not history.posted:
        tally.skip(CheckName.SCORES, "no round was posted")
    return ScoreVerification(tally=tally, rounds=tuple(rounds), tolerance=limit)


def recheck_fog_verdicts(
    history: TaskHistory,
    commitments: Mapping[int, RewardsCommitted],
    store: BlobStore,
    spec: TaskSpec,
    tally: Tally,
    *,
    device: str = "cpu",
) -> None:
    """Judge again, the committee's way, the transcript segment each decided fog challenge named, and compare the
    judgement with the verdict the chain has (a finding of :attr:`CheckName.SCORES` where they differ)."""
    from fedchain.disputes.judging import judge_fog

    for challenge in history.challenges:
        if challenge.kind != "fog" or challenge.status not in ("upheld", "rejected"):
            continue
        judgement = judge_fog(
            store, spec, history, commitments, challenge.round, challenge.client_index, challenge.value, device=device
        )
        why = judgement.excuse or (
            f"distance {judgement.distance:.3g}"
            if judgement.convicting is None or judgement.convicting.fault is None
            else judgement.convicting.fault
        )
        log.info(
            "fog challenge %d, round %d, client %d, segment %d: %s (%s)",
            challenge.challenge_id,
            challenge.round,
            challenge.client_index,
            challenge.value,
            challenge.status,
            why,
        )
        tally.expect(
            CheckName.SCORES,
            f"verdict of fog challenge {challenge.challenge_id} (round {challenge.round}, client "
            f"{challenge.client_index}, segment {challenge.value} re-executed: {why})",
            "upheld" if judgement.upheld(challenge.accused) else "rejected",
            challenge.status,
        )


@dataclass(frozen=True)
class ReproducedRound:
    """The aggregator's scoring of one posted round, run again."""

    round: int
    outcome: RoundOutcome
    #: Why each client's update was rejected when decoded (a ``RejectReason`` code), else None.
    rejections: tuple[str | None, ...]
    #: The accuracy to compare with the posted one, 1e18 fixed point: the reproduced model's, or for a
    #: self-trained task (whose model is the Flower strategy's) the posted model's, evaluated again.
    accuracy_wad: int = -1


class ScoreReproduction:
    """Runs the aggregator's scoring of a task's posted rounds again, in order, carrying the strategy's state.

    The auditor's ``--verify-scores``, a client watching its own entry and a verifier judging a challenge all
    score here, with the aggregator's own :func:`~fedchain.aggregator.scoring.score_round`: what the aggregator
    had is read from the chain (the history) and the store. :meth:`reproduce` takes rounds 1, 2, ... in turn
    (asking again for the last round returns it at once). An aggregator that lost its strategy checkpoints
    rebuilds the state here too (:attr:`state`), so that it goes on as the auditor will reproduce it.
    """

    def __init__(
        self,
        spec: TaskSpec,
        model_id: bytes,
        task_id: int,
        store: BlobStore,
        *,
        data_root: str | Path | None,
        device: str,
        strategy: str | None,
        quality: QualityChoice,
        strategy_options: Mapping[str, Any] | None = None,
    ) -> None:
        from fedchain.aggregator.scoring import Evaluator, quality_source, task_strategy
        from fedchain.taskspec import load_validation

        name = strategy or spec.strategy
        self.spec, self.task_id, self.store = spec, task_id, store
        self.strategy = task_strategy(name, strategy_options, spec)
        self.quality = quality_source(name, quality)
        self.evaluator = Evaluator(
            spec.model_spec(), load_validation(spec, None if data_root is None else str(data_root)), device
        )
        self.param_spec = spec.param_spec()
        self._model_hash = model_id
        self._state: Any = None
        self._done: list[ReproducedRound] = []
        # The last reproduced round's start model: the next round's start minus it is screening rule 5's last step.
        self._start: torch.Tensor | None = None
        #: A self-trained task's signed replies, (round, client) -> claim, read once from the store.
        self._replies: dict[tuple[int, int], SignedReply] | None = None
        log.info("reproducing task %d's rounds with %s (%s quality)", task_id, name, self.quality)

    @classmethod
    def of(
        cls,
        history: TaskHistory,
        store: BlobStore,
        *,
        data_root: str | Path | None = None,
        device: str = "cpu",
        strategy: str | None = None,
        quality: QualityChoice = "auto",
    ) -> ScoreReproduction:
        """A reproduction of ``history``'s task, its spec read from the store by the task's ``datasetId``."""
        from fedchain.taskspec import load_spec

        params = history.task.params
        if params is None:
            raise AuditError(f"task {history.task.task_id} has no parameters among the events")
        spec = load_spec(store, params.dataset_id)
        return cls(
            spec,
            params.model_id,
            history.task.task_id,
            store,
            data_root=data_root,
            device=device,
            strategy=strategy,
            quality=quality,
        )

    @property
    def state(self) -> Any:
        """The strategy's state after the last round reproduced (None before any)."""
        return self._state

    def reproduce(
        self, history: TaskHistory, commitments: Mapping[int, RewardsCommitted], round_number: int
    ) -> ReproducedRound:
        """Round ``round_number`` reproduced (every round before it first, if not done yet)."""
        posted = {p.round: p for p in history.posted}
        while len(self._done) < round_number:
            n = len(self._done) + 1
            if n not in posted:
                raise AuditError(f"round {n} of task {self.task_id} is not posted")
            self._done.append(self._round(history, commitments, posted[n]))
        return self._done[round_number - 1]

    def _round(
        self, history: TaskHistory, commitments: Mapping[int, RewardsCommitted], posted: PostedRecord
    ) -> ReproducedRound:
        from fedchain.aggregator.scoring import ClientInput, score_round, task_floor, task_grace
        from fedchain.taskspec import load_model

        n, spec, store = posted.round, self.spec, self.store
        params = history.task.params
        if params is None:
            raise AuditError(f"task {self.task_id} has no parameters among the events")
        global_params = flatten(
            load_model(store, spec, self._model_hash, task_id=self.task_id, round_number=n - 1), self.param_spec
        )[0]
        self_trained = params.self_trained
        hashes = {index: c.update_hash for index, c in history.scored_commits(n).items()}
        if self_trained:  # the sizes the clients signed for the updates they committed (the aggregator has no other)
            trained = self._signed_replies(history, n, self._model_hash)
            sizes = {index: size for index, (digest, size) in trained.items() if hashes.get(index) == digest}
        else:  # every client's size from its auction, as the aggregator weighs them, missed rounds or not
            sizes = {a.client_index: a.data_size for a in history.auctions}
        clients, rejections = [], []
        for client in history.clients:
            # What the aggregator had: a client it scored (active, with a commit) is posted as committed.
            entry_committed = posted.measurements[client.index].committed
            update_hash, size = hashes.get(client.index), sizes.get(client.index, 0)
            round_time = posted.measurements[client.index].round_time if entry_committed else None
            entry = ClientInput(update=None, data_size=size, round_time=round_time, active=entry_committed)
            reason = None
            if entry_committed and self_trained and client.index not in sizes:
                # Committed on chain, but no reply signed by the client for that update: nothing the aggregator
                # could score (the contract's rule for an unusable update: accepted = false, quality 0).
                reason = RejectReason.BAD_SIGNATURE.value
            elif entry_committed and update_hash is not None:
                entry, reason = _decoded_update(
                    store,
                    spec,
                    self.param_spec,
                    self.task_id,
                    n,
                    client.index,
                    client.account,
                    update_hash,
                    entry,
                )
            rejections.append(reason)
            clients.append(entry)
        starts = None
        if spec.train_from == "reward" and n > 1:
            starts = global_params.expand(len(clients), -1).clone()
            for index, reward in stored_rewards(history, commitments, store, spec, n - 1).items():
                starts[index] = reward.to(starts.dtype)
        outcome = score_round(
            self.strategy,
            global_params,
            clients,
            self.evaluator,
            self._state,
            quality=self.quality,
            screening=spec.screening,
            client_params=starts,
            last_step=None if self._start is None else global_params - self._start.to(global_params.dtype),
            quality_floor=task_floor(spec, params, n),
            data_credit=spec.data_credit,
            grace=task_grace(spec, params),
        )
        self._state, self._model_hash, self._start = outcome.state, posted.model_hash, global_params
        accuracy = -1
        if self_trained:  # the model is the Flower strategy's, not the reproduced aggregate: evaluate the posted one
            model = load_model(store, spec, posted.model_hash, task_id=self.task_id, round_number=n)
            accuracy = to_wad([self.evaluator(flatten(model, self.param_spec)[0]).accuracy])[0]
        return ReproducedRound(n, outcome, tuple(rejections), accuracy)

    def _signed_replies(self, history: TaskHistory, round_number: int, start: bytes) -> dict[int, tuple[bytes, int]]:
        """Client index -> (update hash, data size) of the replies of a self-trained round whose claim the joined
        wallet signed, trained from ``start`` (the round before's posted model) (contracts/README.md, "Tasks trained
        by their own clients"); the others are left out."""
        from fedchain.flower.identity import verify_reply
        from fedchain.flower.protocol import stored_replies

        if self._replies is None or any((round_number, c.index) not in self._replies for c in history.clients):
            self._replies = stored_replies(self.store, self.task_id)  # pinned since the last read: a live watcher
        found = {}
        for client in history.clients:
            reply = self._replies.get((round_number, client.index))
            if reply is None:
                continue
            claim = reply.claim
            try:
                if claim.task_id != self.task_id or claim.round != round_number:
                    raise UpdateRejected(f"it names task {claim.task_id} round {claim.round}")
                if claim.start_model != bytes(start):
                    raise UpdateRejected(f"it was trained from model {to_hex(claim.start_model)}, not the posted one")
                verify_reply(reply, account=client.account, commitment=client.commitment)
            except UpdateRejected as err:
                log.warning("round %d client %d: the stored reply is not valid (%s)", round_number, client.index, err)
                continue
            found[client.index] = (claim.update_hash, claim.data_size)
        return found


def _compare(
    history: TaskHistory,
    posted: PostedRecord,
    reproduced: ReproducedRound,
    commitments: Mapping[int, RewardsCommitted],
    store: BlobStore,
    tally: Tally,
    limit: int,
) -> RoundScore:
    """The ``scores.reproduced`` findings of one round, and its row of the report."""
    n, outcome = posted.round, reproduced.outcome
    spec = load_spec_of(history, store)
    if outcome.rewards is not None and n in commitments:
        for index, stored in stored_rewards(history, commitments, store, spec, n).items():
            gap = float((outcome.rewards[index] - stored.to(outcome.rewards.dtype)).abs().max())
            tally.require(
                CheckName.SCORES,
                gap <= limit / WAD,
                f"round {n} client {index}: the stored reward differs from the reproduced one by up to {gap:.3g} "
                f"(tolerance {limit / WAD:g})",
            )
    effective = posted.effective
    reproduced_qualities: list[int | None] = []
    gaps = []
    for client, mine, theirs in zip(history.clients, outcome.measurements, effective, strict=True):
        if theirs is None or not theirs.committed or not mine.committed:
            reproduced_qualities.append(None)
            continue
        reproduced_qualities.append(mine.quality)
        gaps.append(abs(mine.quality - theirs.quality))
        corrected = "" if theirs == posted.measurements[client.index] else " (as a verdict corrected it)"
        tally.require(
            CheckName.SCORES,
            mine.accepted == theirs.accepted,
            f"round {n} client {client.index}: {'accepted' if theirs.accepted else 'rejected'}{corrected}, "
            f"reproduced as {'accepted' if mine.accepted else 'rejected'}",
        )
        tally.require(
            CheckName.SCORES,
            abs(mine.quality - theirs.quality) <= limit,
            f"round {n} client {client.index}: quality {theirs.quality / WAD:.6f}{corrected}, "
            f"reproduced {mine.quality / WAD:.6f} (tolerance {limit / WAD:g})",
        )
    accuracy = outcome.accuracy_wad if reproduced.accuracy_wad < 0 else reproduced.accuracy_wad
    accuracy_gap = abs(accuracy - posted.accuracy)
    tally.require(
        CheckName.SCORES,
        accuracy_gap <= limit,
        f"round {n}: posted accuracy {posted.accuracy / WAD:.6f}, reproduced {accuracy / WAD:.6f}",
    )
    largest = max([*gaps, accuracy_gap])
    return RoundScore(
        n,
        tuple(m.quality for m in posted.measurements),
        tuple(reproduced_qualities),
        largest,
        largest <= limit,
        reproduced.rejections,
    )


def load_spec_of(history: TaskHistory, store: BlobStore) -> TaskSpec:
    """The task spec of ``history``'s task, from the store."""
    from fedchain.taskspec import load_spec

    params = history.task.params
    if params is None:
        raise AuditError(f"task {history.task.task_id} has no parameters among the events")
    return load_spec(store, params.dataset_id)


def stored_rewards(
    history: TaskHistory,
    commitments: Mapping[int, RewardsCommitted],
    store: BlobStore,
    spec: TaskSpec,
    round_number: int,
) -> dict[int, torch.Tensor]:
    """Client index -> its stored reward of ``round_number`` (flat), as listed by the round's committed list."""
    from fedchain.errors import RewardMissing
    from fedchain.rewards import load_reward, load_reward_list

    commitment = commitments.get(round_number)
    if commitment is None:
        raise RewardMissing(f"round {round_number} committed no rewards")
    task_id = history.task.task_id
    listed = load_reward_list(store, commitment.reward_list, task_id=task_id, round_number=round_number)
    accounts = {c.index: c.account for c in history.clients}
    return {
        index: flatten(
            load_reward(
                store,
                spec,
                digest,
                task_id=task_id,
                round_number=round_number,
                client_index=index,
                client=accounts.get(index, ""),
            ),
            spec.param_spec(),
        )[0]
        for index, digest in listed.rewards
    }


def _decoded_update(
    store: BlobStore,
    spec: TaskSpec,
    param_spec: ParamSpec,
    task_id: int,
    round_number: int,
    index: int,
    account: str,
    update_hash: bytes,
    entry: ClientInput,
) -> tuple[ClientInput, str | None]:
    """``entry`` with the update (flat) and local losses as the aggregator decodes them, or unchanged with
    the reason code the update is rejected for."""
    from fedchain.taskspec import load_update

    try:
        decoded = load_update(
            store,
            spec,
            update_hash,
            task_id=task_id,
            round_number=round_number,
            client_index=index,
            client=account,
            data_size=entry.data_size,
        )
    except UpdateRejected as err:
        log.info(
            "update %s of job %d round %d rejected (%s)", to_hex(update_hash), index, round_number, err.reason.value
        )
        return entry, err.reason.value
    update = flatten(decoded.params, param_spec)[0]
    return dataclasses.replace(entry, update=update, local_losses=decoded.local_losses), None
