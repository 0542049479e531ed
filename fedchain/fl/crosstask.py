"""The cross-task term of the loss reputation (Tian et al. 2023, eqs. 6-8), off chain.

Eq. 8 makes a client's loss reputation in the current task the sum of two parts::

    r_a_i^n = H_i + sum_j w^j q_i^j                   when q_i^n >= q_min
    r_a_i^n =       sum_j w^j q_i^j  *  q_i^n         when q_i^n <  q_min

(capped). The second part is the contract's running weighted mean
(:mod:`fedchain.fl.reputation`). The first is left out of a round below q_min
(DESIGN.md): a good history must not carry a client through a round in which it
sent garbage (:func:`fedchain.fl.reputation.loss_reputation_with_prior`).
The first, the *history term* of eq. 6, is what the client earned in similar
earlier tasks::

    H_i = sum_{x in U} (1 / T_x) sim(cur, x) r_a_i(x)  /  sum_{x in U} (1 / T_x) sim(cur, x)

with the task similarity of eq. 7, the adjusted cosine over the clients common
to both tasks::

    sim(h, i) = sum_{j in H ∩ I} (r_hj - mean_h)(r_ij - mean_i)
                / ( sqrt(sum_{j in H} (r_hj - mean_h)^2) * sqrt(sum_{j in I} (r_ij - mean_i)^2) )

where each mean and each sum under a square root runs over that task's own
clients. Because the eq. 6 term does not depend on the round, it is computed
once per task, off chain (it reads whole histories, which no bounded amount of
gas can), posted as the task's *priors*, and re-checked by the auditor.

The rules this module fixes where the paper leaves a choice:

* **U**: the earlier tasks, i.e. those finished (settled) at or before the
  current task started, other than the current task itself, that share at
  least :data:`MIN_COMMON_CLIENTS` clients with it and whose similarity is
  strictly positive. Clients are matched by account address, case-insensitively.
* **T_x** = max(1, start of the current task - finish of task x), in seconds.
* **The current task's reputations** before its first round: every client of
  the current task stands at its latest known loss reputation, i.e. its final
  loss reputation in the most recently finished earlier task it took part in,
  or the task's initial reputation min(1, cap) when it has none
  (:func:`current_reputations`). The similarity compares that vector with each
  earlier task's final loss reputations.
* **Client-wise U**: a client's sums run only over the tasks of U it took part
  in; a client absent from every task of U gets H_i = 0.
* **Degenerate similarity**: a task whose reputations are all equal has no
  deviation from its mean; its similarity to anything is 0 (so it is not in U).
* **Cap**: H_i is capped at the task's reputation cap, like every reputation.

Two renderings, as in :mod:`fedchain.fl.reputation`: exact integers in 1e18
fixed point (the default names; every division rounds down, the similarity
toward zero) for the aggregator that posts the priors and the auditor that
re-checks them, and ``*_float`` for experiments and as an independent check.

Everything here is pure: no I/O, no chain, no logging.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from types import MappingProxyType
from typing import Any, TypeVar

from fedchain.fl.reputation import WAD

#: A task enters U only if it shares at least this many clients with the current task
#: (with one common client the adjusted cosine says nothing about the tasks' relation).
MIN_COMMON_CLIENTS = 2

#: The shortest time gap T_x, in seconds (a task finishing in the very block the next starts).
MIN_TIME_GAP = 1

#: A reputation: an integer in 1e18 fixed point (the exact functions) or a float (the ``*_float`` ones).
N = TypeVar("N", bound=float)
#: A task similarity: the exact functions' integer, or a float.
S = TypeVar("S", int, float)


def _normalised(reputations: Mapping[str, N]) -> Mapping[str, N]:
    """``reputations`` keyed by lower-case address; a negative value or a duplicate address is refused."""
    normalised: dict[str, N] = {}
    for address, value in reputations.items():
        key = address.lower()
        if key in normalised:
            raise ValueError(f"client {address} appears twice (addresses are compared case-insensitively)")
        if value < 0:
            raise ValueError(f"reputation of client {address} must be non-negative, got {value}")
        normalised[key] = value
    return MappingProxyType(normalised)


@dataclass(frozen=True)
class FinishedTask:
    """An earlier task as the cross-task term sees it: when it finished and its clients' final loss reputations.

    ``reputations`` maps client address to the final loss reputation r_a (1e18
    fixed point for the exact functions, a float for the ``*_float`` ones).
    """

    task_id: int
    #: Block time of the task's settlement, seconds.
    finished_at: int
    reputations: Mapping[str, int | float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "reputations", _normalised(self.reputations))


@dataclass(frozen=True)
class CrossTaskPriors:
    """The result of :func:`history_priors`: each current client's H_i and the tasks that made it."""

    #: H_i per current client, in the order of the ``clients`` argument.
    priors: tuple[int, ...]
    #: The task ids of U with their similarity to the current task (1e18 fixed point), by finish time.
    similar: tuple[tuple[int, int], ...]


def current_reputations(
    clients: Sequence[str], earlier: Sequence[FinishedTask], initial: float
) -> dict[str, int | float]:
    """Each current client's latest known loss reputation (lower-case address -> r_a).

    That is its final r_a in the most recently finished task of ``earlier`` it
    took part in (ties broken by the higher task id), or ``initial`` (the
    current task's min(1, cap)) when it took part in none.
    """
    latest: dict[str, int | float] = {}
    for task in sorted(earlier, key=lambda t: (t.finished_at, t.task_id)):
        latest.update(task.reputations)
    return {client.lower(): latest.get(client.lower(), initial) for client in clients}


def _deviations(reputations: Mapping[str, int]) -> tuple[dict[str, int], int]:
    """n * r_j - sum_k r_k per client (the deviation from the mean, scaled by n) and the sum of their squares."""
    n, total = len(reputations), sum(reputations.values())
    scaled = {client: n * value - total for client, value in reputations.items()}
    return scaled, sum(d * d for d in scaled.values())


def task_similarity(current: Mapping[str, int], other: Mapping[str, int]) -> int:
    """Eq. 7, the adjusted cosine of two tasks' reputations, in 1e18 fixed point, rounded toward zero.

    Exact: with n_h clients and sum S_h, each deviation r_hj - mean_h is
    (n_h r_hj - S_h) / n_h, and the factors 1/n_h, 1/n_i cancel between the
    numerator and the denominator, so everything stays an integer until the
    final square root. The result lies in [-1e18, 1e18] (Cauchy-Schwarz).
    0 when either task's reputations are all equal or the tasks share no client.
    """
    current, other = _normalised(current), _normalised(other)
    dev_cur, square_cur = _deviations(current)
    dev_other, square_other = _deviations(other)
    if square_cur == 0 or square_other == 0:
        return 0
    numerator = sum(dev_cur[j] * dev_other[j] for j in dev_cur.keys() & dev_other.keys())
    # floor(WAD |num| / sqrt(P)) == isqrt(floor((WAD num)^2 / P)), exactly.
    magnitude = math.isqrt((WAD * numerator) ** 2 // (square_cur * square_other))
    return magnitude if numerator >= 0 else -magnitude


def task_similarity_float(current: Mapping[str, float], other: Mapping[str, float]) -> float:
    """Eq. 7 in floating point (same conventions as :func:`task_similarity`)."""
    current, other = _normalised(current), _normalised(other)
    mean_cur = sum(current.values()) / len(current) if current else 0.0
    mean_other = sum(other.values()) / len(other) if other else 0.0
    square_cur = sum((r - mean_cur) ** 2 for r in current.values())
    square_other = sum((r - mean_other) ** 2 for r in other.values())
    if square_cur == 0 or square_other == 0:
        return 0.0
    numerator = sum((current[j] - mean_cur) * (other[j] - mean_other) for j in current.keys() & other.keys())
    return numerator / (math.sqrt(square_cur) * math.sqrt(square_other))


def time_gap(started_at: int, finished_at: int) -> int:
    """T_x = max(1, start of the current task - finish of task x), seconds."""
    return max(MIN_TIME_GAP, started_at - finished_at)


def _check_inputs(clients: Sequence[str], started_at: int, cap: float) -> None:
    if len({c.lower() for c in clients}) != len(clients):
        raise ValueError("clients must be distinct addresses (compared case-insensitively)")
    if started_at < 0:
        raise ValueError(f"started_at must be a block time in seconds, got {started_at}")
    if cap <= 0:
        raise ValueError(f"reputation_cap must be positive, got {cap}")


def _similar_tasks(
    clients: Sequence[str],
    current_task_id: int,
    started_at: int,
    earlier: Sequence[FinishedTask],
    initial: float,
    similarity: Callable[[Mapping[str, Any], Mapping[str, Any]], S],
) -> list[tuple[FinishedTask, S]]:
    """U with each task's similarity, ordered by (finish time, task id)."""
    candidates = [t for t in earlier if t.task_id != current_task_id and t.finished_at <= started_at]
    current = current_reputations(clients, candidates, initial)
    similar = []
    for task in sorted(candidates, key=lambda t: (t.finished_at, t.task_id)):
        if len(current.keys() & task.reputations.keys()) < MIN_COMMON_CLIENTS:
            continue
        sim = similarity(current, task.reputations)
        if sim > 0:
            similar.append((task, sim))
    return similar


def history_priors(
    clients: Sequence[str],
    *,
    current_task_id: int,
    started_at: int,
    earlier: Sequence[FinishedTask],
    reputation_cap: int,
) -> CrossTaskPriors:
    """Eq. 6's history term H_i for each of the current task's ``clients``, exact, in 1e18 fixed point.

    ``started_at`` is the current task's creation (start) block time in
    seconds; ``earlier`` may hold any tasks: those not finished by then and the
    current task itself are ignored (module docstring for every rule).
    H_i = floor of the exact rational weighted mean of the client's final r_a
    over the tasks of U it took part in, with weights sim_x / T_x, then capped
    at ``reputation_cap``.
    """
    _check_inputs(clients, started_at, reputation_cap)
    similar = _similar_tasks(clients, current_task_id, started_at, earlier, min(WAD, reputation_cap), task_similarity)
    priors = []
    for client in clients:
        weighted, weights = Fraction(0), Fraction(0)
        for task, sim in similar:
            reputation = task.reputations.get(client.lower())
            if reputation is None:
                continue
            weight = Fraction(sim, time_gap(started_at, task.finished_at))
            weighted += weight * Fraction(reputation)
            weights += weight
        prior = math.floor(weighted / weights) if weights else 0
        priors.append(min(reputation_cap, prior))
    return CrossTaskPriors(
        priors=tuple(priors),
        similar=tuple((task.task_id, sim) for task, sim in similar),
    )


def history_priors_float(
    clients: Sequence[str],
    *,
    current_task_id: int,
    started_at: int,
    earlier: Sequence[FinishedTask],
    reputation_cap: float,
) -> tuple[float, ...]:
    """Eq. 6's history term in floating point (same rules as :func:`history_priors`), reputations as floats."""
    _check_inputs(clients, started_at, reputation_cap)
    initial = min(1.0, reputation_cap)
    similar = _similar_tasks(clients, current_task_id, started_at, earlier, initial, task_similarity_float)
    priors = []
    for client in clients:
        weighted = weights = 0.0
        for task, sim in similar:
            reputation = task.reputations.get(client.lower())
            if reputation is None:
                continue
            weight = sim / time_gap(started_at, task.finished_at)
            weighted += weight * reputation
            weights += weight
        priors.append(min(reputation_cap, weighted / weights) if weights else 0.0)
    return tuple(priors)
