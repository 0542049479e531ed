"""Re-executing a fog node's training job from its committed inputs, and how far a committed update may be from it.

A fog node trains client ``i``'s job of round ``n`` from inputs everyone can
read: the start model (the global model posted with round ``n - 1``, or the
client's proven reward when the task trains from rewards), the data the client
handed off (its hash is on chain, the bytes in the store), and the task spec's
training settings and seed (:meth:`fedchain.taskspec.TaskSpec.train_config`
for round ``n``; the shuffling generator of client ``i``). Training is
deterministic given those, up to floating-point drift between engines,
thread counts and devices. :func:`reexecute` trains the job again, always the
same way (the reference: the sequential engine, one torch thread, so that every
judge on every machine gets the same bits); :func:`update_distance` says how
far the committed update is from it.

A fog node training on the CPU matches the reference bit for bit: the worker
processes of the ``process`` engine run one thread each, and the fog node's
in-process engines default to one thread. Threads matter more than float
rounding suggests: on a client's skewed data, two honest runs of the CNN at
lr 0.1 on one and on two threads ended 0.22 apart from the initial model and
0.37 apart from a trained one (README rehearsal, Dirichlet 0.5, 1000 samples),
which is why the reference pins them.

The client whose update was screened out runs this to see whether its fog node
trained its job; the arbiters run it to judge a fog challenge
(:mod:`fedchain.verifier`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

import torch

from fedchain.fl.params import ParamSpec, flatten

if TYPE_CHECKING:
    from fedchain.client.handoff import JobData
    from fedchain.taskspec import TaskSpec

#: Relative distance ||committed - honest|| / ||honest|| above which a committed update was not trained as its job
#: says. Measured with `fedchain bench drift` (MNIST, LeNet-5 and the CNN, 5 jobs of 600 samples, CPU;
#: docs/accountability.md): honest engines and thread counts drift at most 2.0e-5, except the vmap engine on
#: the CNN at 4.7e-2 (ReLU zeros tie in max-pooling, and vmap routes their gradient elsewhere); the nearest cheat,
#: a disguised free rider (the others' mean update plus noise), lands 0.55 away, another shuffle seed 0.56, half
#: the samples 0.83, a zero update 1.0. 0.15 sits 3.2 times above the largest honest drift and 3.7 times below the
#: nearest cheat. GPU drift was not measured here (no GPU was available).
UPDATE_TOLERANCE = 0.15
#: Torch threads of the reference execution (see the module docstring): the count the CPU engines train with.
REFERENCE_THREADS = 1
#: Below this norm an honest update counts as zero (the distance is then measured in absolute terms).
ZERO_NORM = 1e-12


def update_distance(committed: torch.Tensor, honest: torch.Tensor) -> float:
    """||committed - honest|| / ||honest|| (absolute when the honest update is zero), in float64."""
    gap = float((committed.to(torch.float64) - honest.to(torch.float64)).norm())
    scale = float(honest.to(torch.float64).norm())
    return gap / scale if scale > ZERO_NORM else gap


def trained_as_committed(distance: float, tolerance: float = UPDATE_TOLERANCE) -> bool:
    """Whether an update at ``distance`` from its re-execution is honest work (drift only)."""
    return math.isfinite(distance) and distance <= tolerance


def reexecute(
    spec: TaskSpec,
    start: Mapping[str, torch.Tensor],
    data: JobData,
    round_number: int,
    client_index: int,
    *,
    device: str = "cpu",
) -> torch.Tensor:
    """The update (trained minus start, flat ``[d]``) that honest training of the job gives: the reference execution
    (sequential engine, :data:`REFERENCE_THREADS` torch threads), whatever the caller's thread count."""
    from fedchain.trainer.trainer import Trainer

    param_spec: ParamSpec = spec.param_spec()
    begin = flatten(start, param_spec)[0]
    with Trainer(spec.model_spec(), engine="sequential", device=device, threads=REFERENCE_THREADS) as trainer:
        result = trainer.train(
            begin,
            [(data.images, data.labels)],
            client_ids=[client_index],
            config=spec.train_config(round_number),
        )
    return result.updates(begin.unsqueeze(0)).cpu()[0]
