"""A committed transcript against its job, and the verdict on one of its segments.

What binds a transcript to the job it claims (contracts/README.md, "Training transcripts"): its manifest builds
the committed root, it has the job's number of checkpoints, checkpoint 0 is the round's start model and the last
checkpoint minus the start is the committed update. A missing or malformed checkpoint is the fog node's fault:
it alone held them. :func:`judge_segment` is the committee's work on one challenge (the named segment, and the
binding); :func:`search_segments` is the client's before it challenges (every segment, in order, until the
first that does not re-execute).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from fedchain.errors import BlobNotFound, StoreError, TranscriptError, UpdateRejected
from fedchain.fl.params import flatten
from fedchain.transcripts.record import Transcript, checkpoint_meta, load_transcript
from fedchain.transcripts.segments import SEGMENT_TOLERANCE, JobShape, State, reexecute_segment, segment_distance
from fedchain.updates import checkpoint_bytes, decode_checkpoint

if TYPE_CHECKING:
    from fedchain.client.handoff import JobData
    from fedchain.store.blobs import BlobStore
    from fedchain.taskspec import TaskSpec


class TranscriptFault(TranscriptError):
    """What about a transcript is its fog node's fault: it convicts whatever segment a challenge names."""


@dataclass(frozen=True)
class TranscriptJob:
    """One job's round as the chain and the store have it: what its transcript must bind."""

    spec: TaskSpec
    task_id: int
    round_number: int
    client_index: int
    client: str
    data: JobData
    #: The round's start model and the committed update, flat float32.
    start: torch.Tensor
    update: torch.Tensor
    #: The transcript root the commit carries.
    root: bytes

    @property
    def shape(self) -> JobShape:
        return JobShape.of(self.spec, len(self.data), self.round_number)


@dataclass(frozen=True)
class SegmentJudgement:
    """One segment of a transcript, judged."""

    segment: int
    #: ``segment_distance`` of the re-executed segment (inf after a fault; 0 for a segment the job has not).
    distance: float
    #: What about the transcript is the fog node's fault (then the challenge is upheld whatever the segment).
    fault: str | None = None
    #: The segment's steps (empty for a segment past the job's last).
    steps: range = field(default_factory=lambda: range(0))

    @property
    def upheld(self) -> bool:
        """The fog node did not train this segment as its job says (or its transcript does not bind the job)."""
        return self.fault is not None or not (math.isfinite(self.distance) and self.distance <= SEGMENT_TOLERANCE)


class _Checkpoints:
    """The checkpoints of one transcript, fetched and checked on first use."""

    def __init__(self, store: BlobStore, job: TranscriptJob, transcript: Transcript) -> None:
        self.store, self.job, self.transcript = store, job, transcript
        self.param_spec = job.spec.param_spec()
        self.momentum = bool(job.spec.momentum)
        self.meta = checkpoint_meta(job.spec, job.task_id, job.round_number, job.client_index, job.client)
        self._states: dict[int, State] = {}

    def state(self, index: int) -> State:
        if index not in self._states:
            digest = self.transcript.hashes[index]
            limit = checkpoint_bytes(self.param_spec, self.momentum)
            try:
                data = self.store.get(digest, max_bytes=limit)
                decoded = decode_checkpoint(
                    data, digest, self.param_spec, limit, expected_meta=self.meta, momentum=self.momentum
                )
            except BlobNotFound as err:
                raise TranscriptFault(f"checkpoint {index} is not in the store: {err.args[0]}") from err
            except (StoreError, UpdateRejected) as err:
                raise TranscriptFault(f"checkpoint {index} is not a checkpoint of this job: {err.args[0]}") from err
            self._states[index] = State(flatten(decoded.params, self.param_spec)[0], decoded.velocity)
        return self._states[index]


def _open(store: BlobStore, job: TranscriptJob) -> _Checkpoints:
    """The committed transcript, checked to bind the job; a :class:`TranscriptFault` when it does not."""
    try:
        transcript = load_transcript(store, job.root)
    except BlobNotFound as err:
        raise TranscriptFault(f"the transcript committed as its root is not in the store: {err.args[0]}") from err
    except (StoreError, TranscriptError) as err:
        raise TranscriptFault(str(err.args[0])) from err
    shape = job.shape
    if len(transcript.hashes) != shape.checkpoints:
        raise TranscriptFault(
            f"the transcript has {len(transcript.hashes)} checkpoints; a job of {shape.steps} steps, one every "
            f"{shape.every}, has {shape.checkpoints}"
        )
    checkpoints = _Checkpoints(store, job, transcript)
    first, last = checkpoints.state(0), checkpoints.state(shape.checkpoints - 1)
    if not torch.equal(first.params, job.start.to(torch.float32)):
        raise TranscriptFault("checkpoint 0 is not the round's start model")
    if first.velocity is not None and bool(first.velocity.any()):
        raise TranscriptFault("checkpoint 0 carries a velocity: training starts without one")
    if not bound_update(job.start, last.params, job.update):
        raise TranscriptFault("the last checkpoint minus the start model is not the committed update")
    return checkpoints


def bound_update(start: torch.Tensor, trained: torch.Tensor, update: torch.Tensor) -> bool:
    """Whether ``update`` is ``trained - start`` as float32 arithmetic gives it on any device: each element within
    one rounding of the larger operand (a bit-for-bit check that one ulp of rounding cannot fail)."""
    start, trained, update = (t.to(torch.float32) for t in (start, trained, update))
    if update.shape != start.shape or trained.shape != start.shape:
        return False
    slack = torch.finfo(torch.float32).eps * torch.maximum(trained.abs(), start.abs()) + torch.finfo(torch.float32).tiny
    return bool(((trained - start) - update).abs().le(slack).all())


def _judge(checkpoints: _Checkpoints, segment: int, *, device: str) -> SegmentJudgement:
    job = checkpoints.job
    steps = job.shape.steps_of(segment)
    try:
        start, claimed = checkpoints.state(segment), checkpoints.state(segment + 1)
    except TranscriptFault as err:
        return SegmentJudgement(segment, math.inf, str(err.args[0]), steps)
    honest = reexecute_segment(job.spec, start, job.data, job.round_number, job.client_index, steps, device=device)
    return SegmentJudgement(segment, segment_distance(start, claimed, honest), None, steps)


def judge_segment(store: BlobStore, job: TranscriptJob, segment: int, *, device: str = "cpu") -> SegmentJudgement:
    """The committee's verdict on a fog challenge naming ``segment``: upheld when the transcript does not bind the
    job, or the segment re-executed from its start checkpoint ends beyond the tolerance from the next one."""
    try:
        checkpoints = _open(store, job)
    except TranscriptFault as err:
        return SegmentJudgement(segment, math.inf, str(err.args[0]))
    if not 0 <= segment < job.shape.segments:
        return SegmentJudgement(segment, 0.0)  # the job has no such segment: nothing wrong was named
    return _judge(checkpoints, segment, device=device)


def search_segments(
    store: BlobStore,
    job: TranscriptJob,
    *,
    device: str = "cpu",
    on_segment: Callable[[SegmentJudgement], None] | None = None,
    every_segment: bool = False,
) -> tuple[SegmentJudgement, ...]:
    """The client's check of its job before it challenges: the binding, then every segment in order, each from
    the node's own checkpoint; stops after the first that is upheld unless ``every_segment``. A fault of the
    binding is returned as segment 0's judgement (any segment named then convicts)."""
    try:
        checkpoints = _open(store, job)
    except TranscriptFault as err:
        return (SegmentJudgement(0, math.inf, str(err.args[0])),)
    judged = []
    for segment in range(job.shape.segments):
        judgement = _judge(checkpoints, segment, device=device)
        judged.append(judgement)
        if on_segment is not None:
            on_segment(judgement)
        if judgement.upheld and not every_segment:
            break
    return tuple(judged)


def first_upheld(judged: tuple[SegmentJudgement, ...]) -> SegmentJudgement | None:
    """The first segment of a search that convicts, or None when every segment re-executed within tolerance."""
    return next((j for j in judged if j.upheld), None)
