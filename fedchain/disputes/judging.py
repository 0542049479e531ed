"""How a challenge is judged: a posted value against its reproduction, within a tolerance drift cannot reach.

An entry challenge names the measurement an entry should be. An arbiter (and
the client watching its own entry before it challenges) reproduces the round
with the auditor's code (:class:`fedchain.audit.scores.ScoreReproduction`) and
judges with :func:`entry_wrong` and :func:`proposal_right`. A challenge is
upheld when the posted entry is wrong and the proposed one right; both
compare within :data:`QUALITY_TOLERANCE`, so another machine's rounding never
slashes an honest aggregator nor upholds a greedy claim. An accuracy challenge
(:func:`judge_accuracy`) is upheld when the posted model, evaluated on the
validation set, falls short of the task's target by more than that tolerance;
a prior challenge (:func:`judge_prior`) when the posted prior is not the one
the auditor recomputes from the earlier tasks' events and the proposed one is.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fedchain.audit.scores import ScoreReproduction, stored_rewards
from fedchain.chain.bindings import Measurement, RewardsCommitted
from fedchain.errors import AuditError, UpdateRejected
from fedchain.transcripts.judge import (
    SegmentJudgement,
    TranscriptJob,
    first_upheld,
    judge_segment,
    search_segments,
)
from fedchain.units import WAD

if TYPE_CHECKING:
    from fedchain.audit.history import CommitRecord, TaskHistory
    from fedchain.chain.abi import ChainEvent
    from fedchain.store.blobs import BlobStore
    from fedchain.taskspec import TaskSpec

#: Largest |quality - reproduced quality| an entry may be off by, as a fraction (quality 1.0 = 1.0): five times the
#: audit's own tolerance (1e-3). Re-scoring a round with 1 or 2 torch threads, and the evaluation in batches of
#: 100, 500 or 1000, gave identical qualities on MNIST with LeNet-5 and the CNN (`fedchain bench drift`,
#: docs/accountability.md); another device's drift was not measured here.
QUALITY_TOLERANCE = 5e-3


def _off(entry: Measurement, reproduced: Measurement, tolerance: float) -> bool:
    return entry.accepted != reproduced.accepted or abs(entry.quality - reproduced.quality) > round(tolerance * WAD)


def entry_wrong(posted: Measurement, reproduced: Measurement, tolerance: float = QUALITY_TOLERANCE) -> bool:
    """Whether a committed entry as posted is off its reproduction: another acceptance, or a quality beyond tolerance."""
    return posted.committed and _off(posted, reproduced, tolerance)


def proposal_right(
    proposed: Measurement, posted: Measurement, reproduced: Measurement, tolerance: float = QUALITY_TOLERANCE
) -> bool:
    """Whether a challenge's measurement is what the entry should be: the reproduced acceptance and quality within
    tolerance, and the chain's own facts (committed, round time) as posted."""
    same_facts = proposed.committed == posted.committed and proposed.round_time == posted.round_time
    return same_facts and not _off(proposed, reproduced, tolerance)


def entry_upheld(
    proposed: Measurement, posted: Measurement, reproduced: Measurement, tolerance: float = QUALITY_TOLERANCE
) -> bool:
    """An entry challenge's verdict: upheld when the posted entry is wrong and the proposed one right."""
    return entry_wrong(posted, reproduced, tolerance) and proposal_right(proposed, posted, reproduced, tolerance)


def proposal(posted: Measurement, reproduced: Measurement) -> Measurement:
    """What a challenger names: the reproduced quality and acceptance, with the chain's facts as posted."""
    return posted._replace(quality=reproduced.quality, accepted=reproduced.accepted)


@dataclass(frozen=True)
class EntryJudgement:
    """A posted entry against the round's reproduction."""

    posted: Measurement
    reproduced: Measurement

    @property
    def wrong(self) -> bool:
        """The posted entry is off its reproduction beyond tolerance."""
        return entry_wrong(self.posted, self.reproduced)

    def upheld(self, proposed: Measurement) -> bool:
        """The verdict on a challenge that proposed ``proposed``."""
        return entry_upheld(proposed, self.posted, self.reproduced)


@dataclass(frozen=True)
class FogJudgement:
    """A committed update's transcript, judged on one segment (the committee) or searched (the client)."""

    #: The fog node that committed the round's update (None: no commit of that round was found).
    committer: str | None
    #: The judged segments: the named one (the committee), or those searched up to the first upheld (the client).
    segments: tuple[SegmentJudgement, ...] = ()
    #: Why nothing could be judged against the fog node (its client's data unavailable, no commit), else None.
    excuse: str | None = None

    @property
    def convicting(self) -> SegmentJudgement | None:
        """The first judged segment that convicts the node, or None."""
        return first_upheld(self.segments)

    @property
    def distance(self) -> float:
        """The distance of the convicting segment, else the largest judged (inf when nothing could be judged)."""
        if self.convicting is not None:
            return self.convicting.distance
        return max((j.distance for j in self.segments), default=math.inf)

    def upheld(self, accused: str) -> bool:
        """The verdict on a fog challenge naming ``accused``: it committed the round and a judged segment convicts."""
        if self.excuse is not None or self.committer is None or self.committer.lower() != accused.lower():
            return False
        return self.convicting is not None


@dataclass(frozen=True)
class AccuracyJudgement:
    """The posted model of the round that ended a task early, evaluated again."""

    #: The posted accuracy and the evaluated one, 1e18 fixed point.
    posted: int
    evaluated: int
    #: The task's target accuracy, 1e18 fixed point.
    target: int

    @property
    def upheld(self) -> bool:
        """The model falls short of the target beyond the tolerance: the early finish should not have happened."""
        return self.evaluated + round(QUALITY_TOLERANCE * WAD) < self.target


@dataclass(frozen=True)
class PriorJudgement:
    """A client's posted prior against the one recomputed from the earlier tasks."""

    posted: int
    recomputed: int

    def upheld(self, proposed: int) -> bool:
        """The posted prior is wrong and ``proposed`` is the recomputed one (priors are exact fixed-point values)."""
        return self.posted != self.recomputed and proposed == self.recomputed


def judge_accuracy(reproduction: ScoreReproduction, history: TaskHistory, round_number: int) -> AccuracyJudgement:
    """The accuracy of posted round ``round_number``'s model on the task's validation set, with the auditor's
    evaluator, against its target."""
    from fedchain.fl.params import flatten
    from fedchain.fl.quality import to_wad
    from fedchain.taskspec import load_model

    posted = {p.round: p for p in history.posted}[round_number]
    spec = reproduction.spec
    model = load_model(
        reproduction.store, spec, posted.model_hash, task_id=history.task.task_id, round_number=round_number
    )
    evaluated = to_wad([reproduction.evaluator(flatten(model, spec.param_spec())[0]).accuracy])[0]
    target = history.task.params.target_accuracy if history.task.params is not None else 0
    return AccuracyJudgement(posted.accuracy, evaluated, target)


def judge_prior(history: TaskHistory, events: Sequence[ChainEvent], client_index: int) -> PriorJudgement:
    """Client ``client_index``'s posted prior against the one the auditor recomputes (:mod:`fedchain.audit.crosstask`)."""
    from fedchain.audit.crosstask import expected_priors
    from fedchain.chain.bindings import PriorsPosted

    posted = next((e.priors for e in events if isinstance(e, PriorsPosted) and e.task_id == history.task.task_id), None)
    expected = expected_priors(history, events)
    if posted is None or expected is None:
        raise AuditError(f"task {history.task.task_id}'s priors cannot be recomputed from the events read")
    return PriorJudgement(posted[client_index], expected.priors[client_index])


def judge_entry(
    reproduction: ScoreReproduction,
    history: TaskHistory,
    commitments: Mapping[int, RewardsCommitted],
    round_number: int,
    client_index: int,
) -> EntryJudgement:
    """Client ``client_index``'s entry of posted round ``round_number`` against the auditor's reproduction."""
    posted = {p.round: p for p in history.posted}[round_number].measurements[client_index]
    reproduced = reproduction.reproduce(history, commitments, round_number).outcome.measurements[client_index]
    return EntryJudgement(posted, reproduced)


def scored_commit(history: TaskHistory, round_number: int, client_index: int) -> CommitRecord | None:
    """The update of job ``client_index`` in ``round_number`` that the round scored (:meth:`TaskHistory.scored_commits`;
    None when the round scored none)."""
    return history.scored_commits(round_number).get(client_index)


def transcript_job(
    store: BlobStore,
    spec: TaskSpec,
    history: TaskHistory,
    commitments: Mapping[int, RewardsCommitted],
    round_number: int,
    client_index: int,
) -> tuple[TranscriptJob | None, FogJudgement | None]:
    """Client ``client_index``'s job of ``round_number`` as committed (the round's start model, the handed-off
    data, the committed update and transcript root), or the judgement that excuses or convicts the node before
    any segment runs (no commit, no usable data, an update nobody can decode)."""
    from fedchain.client.handoff import ExpectedJobData, fetch_job_data
    from fedchain.errors import BlobNotFound, JobDataRejected, StoreError
    from fedchain.fl.params import flatten, unflatten
    from fedchain.taskspec import load_model, load_update

    task_id = history.task.task_id
    commit = scored_commit(history, round_number, client_index)
    if commit is None:
        return None, FogJudgement(None, excuse="no update was committed for the job in that round")
    client = history.clients[client_index]
    size = next((a.data_size for a in history.auctions if a.client_index == client_index), 0)
    if client.data_hash is None:
        return None, FogJudgement(commit.fog, excuse="the client never committed its data")
    try:
        data = fetch_job_data(
            store, client.data_hash, ExpectedJobData(task_id, client_index, size, spec.num_classes, spec.in_channels)
        )
    except (BlobNotFound, JobDataRejected, StoreError) as err:
        # The fog node cannot have trained data nobody can read: the client cannot blame it.
        return None, FogJudgement(commit.fog, excuse=f"the client's data is not usable: {err.args[0]}")
    param_spec = spec.param_spec()
    posted = {p.round: p for p in history.posted}
    model_hash = posted[round_number - 1].model_hash if round_number > 1 else history.task.params.model_id  # type: ignore[union-attr]
    start = load_model(store, spec, model_hash, task_id=task_id, round_number=round_number - 1)
    if spec.train_from == "reward" and round_number > 1:
        reward = stored_rewards(history, commitments, store, spec, round_number - 1).get(client_index)
        if reward is not None:
            start = unflatten(reward, param_spec)
    try:
        decoded = load_update(
            store,
            spec,
            commit.update_hash,
            task_id=task_id,
            round_number=round_number,
            client_index=client_index,
            client=client.account,
            data_size=size,
        )
    except UpdateRejected as err:  # committed bytes nobody can use: not the job's update
        unusable = SegmentJudgement(0, math.inf, f"the committed update is unusable: {err.args[0]}")
        return None, FogJudgement(commit.fog, (unusable,))
    if commit.transcript_root is None:
        return None, FogJudgement(commit.fog, excuse="the commit has no transcript (a client's own update)")
    job = TranscriptJob(
        spec,
        task_id,
        round_number,
        client_index,
        client.account,
        data,
        flatten(start, param_spec)[0],
        flatten(decoded.params, param_spec)[0],
        commit.transcript_root,
    )
    return job, None


def judge_fog(
    store: BlobStore,
    spec: TaskSpec,
    history: TaskHistory,
    commitments: Mapping[int, RewardsCommitted],
    round_number: int,
    client_index: int,
    segment: int,
    *,
    device: str = "cpu",
) -> FogJudgement:
    """The committee's judgement of a fog challenge naming ``segment`` of client ``client_index``'s job in
    ``round_number``: the transcript's binding to the job, and that segment re-executed from its checkpoint."""
    job, early = transcript_job(store, spec, history, commitments, round_number, client_index)
    if job is None:
        assert early is not None
        return early
    commit = scored_commit(history, round_number, client_index)
    assert commit is not None
    return FogJudgement(commit.fog, (judge_segment(store, job, segment, device=device),))


def search_fog(
    store: BlobStore,
    spec: TaskSpec,
    history: TaskHistory,
    commitments: Mapping[int, RewardsCommitted],
    round_number: int,
    client_index: int,
    *,
    device: str = "cpu",
    on_segment: Callable[[SegmentJudgement], None] | None = None,
    on_job: Callable[[TranscriptJob], None] | None = None,
) -> FogJudgement:
    """The client's check of its own job before it challenges: every segment of the transcript in order, up to
    the first that convicts (:func:`~fedchain.transcripts.judge.search_segments`); its judgement names it.
    ``on_job`` is told the job once it is read, before any segment runs."""
    job, early = transcript_job(store, spec, history, commitments, round_number, client_index)
    if job is None:
        assert early is not None
        return early
    if on_job is not None:
        on_job(job)
    commit = scored_commit(history, round_number, client_index)
    assert commit is not None
    return FogJudgement(commit.fog, search_segments(store, job, device=device, on_segment=on_segment))
