"""One segment of a job, re-executed the reference way, and how far the checkpoint that claims its end is from it.

Segment ``s`` of a job of ``S`` steps, checkpointed every ``k``, is steps ``[s k, min((s + 1) k, S))``: it starts
from checkpoint ``s`` and must end at checkpoint ``s + 1``. :func:`reexecute_segment` trains it again from the
fog node's own checkpoint ``s``, always the same way (the sequential engine, one torch thread, on the CPU: every
judge gets the same bits), with the job's batches in the order the spec's seed fixes. Because every segment
starts from the node's own state, two honest engines drift apart only within one segment: the drift has no time
to grow, which is why one tolerance fits every job size (docs/accountability.md).

:func:`segment_distance` measures the claimed end against the re-executed one relative to how far the segment
moved: 0 for the same computation, about 1 for a checkpoint that did not move (a node that skipped the steps).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from fedchain.trainer.local import (
    checkpoint_count,
    checkpoint_step,
    client_generator,
    flat_state,
    load_flat,
    prepare_model,
    steps_per_client,
    train_segment,
)

if TYPE_CHECKING:
    from fedchain.client.handoff import JobData
    from fedchain.taskspec import TaskSpec

#: Largest distance (:func:`segment_distance`) at which a re-executed segment is honest work: between the largest
#: honest drift of a segment and the nearest cheat, with a margin to each (`fedchain bench transcripts` measures
#: both; docs/accountability.md, "Segment drift").
SEGMENT_TOLERANCE = 0.2
#: Torch threads of the reference re-execution.
REFERENCE_THREADS = 1
#: Below this norm a segment counts as not moving (the distance is then absolute).
ZERO_NORM = 1e-12


@dataclass(frozen=True)
class JobShape:
    """How a job's transcript is laid out: its steps and a checkpoint every ``every`` of them."""

    steps: int
    every: int

    @classmethod
    def of(cls, spec: TaskSpec, data_size: int, round_number: int) -> JobShape:
        """The shape of a job of ``data_size`` samples under ``spec``."""
        steps = steps_per_client(data_size, spec.train_config(round_number))
        return cls(steps, spec.checkpoint_every(steps))

    @property
    def checkpoints(self) -> int:
        """How many checkpoints the transcript has (the start, every ``every``-th step, the end)."""
        return checkpoint_count(self.steps, self.every)

    @property
    def segments(self) -> int:
        """How many segments (one fewer than the checkpoints)."""
        return self.checkpoints - 1

    def steps_of(self, segment: int) -> range:
        """The 0-based steps of ``segment``."""
        return range(
            checkpoint_step(segment, self.steps, self.every), checkpoint_step(segment + 1, self.steps, self.every)
        )


@dataclass(frozen=True)
class State:
    """A training state: parameters (flat) and, with momentum, SGD's velocity (flat)."""

    params: torch.Tensor
    velocity: torch.Tensor | None = None


def _relative(claimed: torch.Tensor, honest: torch.Tensor, scale: torch.Tensor) -> float:
    gap = float((claimed.to(torch.float64) - honest.to(torch.float64)).norm())
    norm = float(scale.to(torch.float64).norm())
    return gap / norm if norm > ZERO_NORM else gap


def segment_distance(start: State, claimed: State, reexecuted: State) -> float:
    """How far ``claimed`` (the checkpoint at a segment's end) is from the segment ``reexecuted`` from ``start``:
    ``||claimed - reexecuted|| / ||reexecuted - start||`` of the parameters (the segment's own movement), and of
    the velocity relative to its norm when there is one; the larger. Non-finite values give infinity."""
    distances = [_relative(claimed.params, reexecuted.params, reexecuted.params - start.params)]
    if reexecuted.velocity is not None:
        if claimed.velocity is None:
            return math.inf
        distances.append(_relative(claimed.velocity, reexecuted.velocity, reexecuted.velocity))
    worst = max(distances)
    return worst if math.isfinite(worst) else math.inf


def reexecute_segment(
    spec: TaskSpec,
    start: State,
    data: JobData,
    round_number: int,
    client_index: int,
    steps: range,
    *,
    device: str = "cpu",
) -> State:
    """The state honest training reaches over ``steps`` of client ``client_index``'s job from ``start``: the
    reference execution (sequential, :data:`REFERENCE_THREADS` torch threads), whatever the caller's setting."""
    config = spec.train_config(round_number)
    target = torch.device(device)
    model = prepare_model(spec.model_spec().build(), target)
    param_spec = spec.param_spec()
    previous = torch.get_num_threads()
    torch.set_num_threads(REFERENCE_THREADS)
    try:
        load_flat(model, start.params.to(target), param_spec)
        velocity = train_segment(
            model,
            param_spec,
            data.images.to(target),
            data.labels.to(target),
            config,
            client_generator(config.seed, client_index),
            steps,
            start.velocity,
        )
    finally:
        torch.set_num_threads(previous)
    return State(flat_state(model, param_spec).cpu(), velocity)
