"""FedChain's reputation and payment mechanism (DESIGN.md; Tian et al. 2023, eqs. 4-18), without a chain.

Two renderings of the same formulas:

* **Fixed point** (the default names): integers in 1e18 fixed point (``WAD``),
  wei and seconds, rounding down in exactly the order the contracts do
  (``contracts/libraries/ReputationMath.sol``, ``RoundLedger``, ``FogAuction``).
  The auditor and the contract tests use these to recompute the chain's numbers
  to the wei.
* **Float** (``*_float``): the paper's formulas over whole histories, for
  experiments, plots and as an independent check of the fixed-point running sums.

Conventions of the fixed-point model (the contracts' choices, see DESIGN.md):

* Linear weights w^j = 2j / (k(k+1)) over a client's own scored rounds
  j = 1..k, kept as running sums ``sum_j j * x_j``.
* Every quality and every time ratio T / t_j is capped at the task's
  reputation cap before it enters a sum; each reputation is capped after it is
  formed. A round time below one second counts as one second.
* A rejected update scores quality 0; a missing one is skipped (no change).
* The cross-task prior H_i is added to r_a only in a round whose quality
  reaches q_min (:func:`loss_reputation_with_prior`).
* A client joins with r_a = r_t = min(1, cap) (:meth:`ClientReputation.joined`);
  only a client scored in at least one round earns the final bonus.

Everything here is pure: no I/O, no chain, no logging.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from fedchain.units import WAD

#: The largest reputation cap a task may set (ReputationMath.MAX_REPUTATION_CAP).
MAX_REPUTATION_CAP = 10 * WAD
#: The largest number of rounds (ReputationMath.MAX_ROUNDS).
MAX_ROUNDS = 1000
#: Seconds after a round's deadline during which only the aggregator can move a running task on; after
#: them anyone may abandon it (TaskRegistry.ABANDON_GRACE). An abandoned task pays its clients as if every
#: remaining round had been posted neutral at its deadline (:func:`neutral_finish`).
ABANDON_GRACE = 86_400
#: The most revealed bids a job keeps in contention (FogAuction.MAX_RANKED).
MAX_RANKED = 16


@dataclass(frozen=True)
class MechanismParams:
    """The task parameters the mechanism reads (a subset of the contract's ``TaskParams``).

    Units: seconds for durations, wei for money, 1e18 fixed point for
    reputations, qualities and accuracy, cycles per sample for ``cycles_per_sample``.
    """

    rounds: int
    expected_duration: int
    psi: int
    phi: int
    min_loss_reputation: int
    min_time_reputation: int
    min_quality: int
    max_round_time: int
    reputation_cap: int
    cycles_per_sample: int = 1
    second_price: bool = False

    def __post_init__(self) -> None:
        if not 1 <= self.rounds <= MAX_ROUNDS:
            raise ValueError(f"rounds must be in 1..{MAX_ROUNDS}, got {self.rounds}")
        if not 0 < self.reputation_cap <= MAX_REPUTATION_CAP:
            raise ValueError(f"reputation_cap must be in (0, {MAX_REPUTATION_CAP}], got {self.reputation_cap}")
        for name in ("expected_duration", "max_round_time", "cycles_per_sample"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")

    @classmethod
    def of(cls, task_params: Any) -> MechanismParams:
        """The mechanism's parameters from anything with the contract's ``TaskParams`` field names
        (the bindings' ``TaskParams``, a decoded event, a test's dataclass)."""
        return cls(**{name: getattr(task_params, name) for name in _FIELDS})

    @property
    def initial_reputation(self) -> int:
        """r_a = r_t of a client before its first scored round: min(1, cap)."""
        return min(WAD, self.reputation_cap)


_FIELDS = tuple(f.name for f in fields(MechanismParams))


@dataclass(frozen=True)
class ClientReputation:
    """One client's O(1) reputation state, as the RoundLedger stores it."""

    #: k, the number of rounds in which the client was scored.
    rounds: int = 0
    #: sum_j j * q_j over the scored rounds (capped qualities), fixed point.
    sum_quality: int = 0
    #: sum_j j * min(cap, T / t_j), fixed point.
    sum_time_ratio: int = 0
    #: r_a after the last scored round, fixed point.
    loss_reputation: int = 0
    #: r_t after the last scored round, fixed point.
    time_reputation: int = 0

    def total_reputation(self, cap: int) -> int:
        """r_at = min(cap, r_a * r_t) (eq. 10), fixed point."""
        return total_reputation(self.loss_reputation, self.time_reputation, cap)

    @classmethod
    def joined(cls, params: MechanismParams) -> ClientReputation:
        """The state of a client that just joined: no rounds, r_a = r_t = min(1, cap)."""
        return cls(loss_reputation=params.initial_reputation, time_reputation=params.initial_reputation)

    def bonus(self, params: MechanismParams, actual_duration: int) -> int:
        """Eq. 16 for this client before pro-rata scaling: 0 unless it was scored in some round."""
        if self.rounds == 0:
            return 0
        return final_bonus(
            params.phi, params.expected_duration, actual_duration, self.total_reputation(params.reputation_cap)
        )


@dataclass(frozen=True)
class RoundScore:
    """What one round does to one client."""

    reputation: ClientReputation
    #: The eq. 15 payment before pro-rata scaling, wei (0 when removed).
    payment: int
    #: True when the client fell below r_a_min or r_t_min and is removed.
    removed: bool


# --------------------------------------------------------------------------- fixed point kernels


def linear_mean(weighted_sum: int, k: int) -> int:
    """sum_j w^j x_j with w^j = 2j / (k(k+1)), given ``weighted_sum`` = sum_j j * x_j."""
    if k <= 0:
        raise ValueError(f"k must be positive, got {k}")
    return (2 * weighted_sum) // (k * (k + 1))


def time_ratio(expected_duration: int, rounds: int, time_fp: int, cap: int) -> int:
    """min(cap, T / t) with T = T_ex / N; ``time_fp`` is t in fixed-point seconds (> 0)."""
    return min(cap, (expected_duration * WAD * WAD) // (rounds * time_fp))


def time_penalty(reputation: int, max_round_time: int, time_fp: int) -> int:
    """Eq. 9's penalty: r * t_max / t when t > t_max."""
    max_fp = max_round_time * WAD
    return (reputation * max_fp) // time_fp if time_fp > max_fp else reputation


def loss_reputation(weighted_sum: int, k: int, quality: int, min_quality: int, cap: int) -> int:
    """Eqs. 5 and 8: the linear mean of the qualities, times q_n when q_n < q_min, capped."""
    reputation = linear_mean(weighted_sum, k)
    if quality < min_quality:
        reputation = (reputation * quality) // WAD
    return min(reputation, cap)


def loss_reputation_with_prior(prior: int, mean_term: int, quality: int, min_quality: int, reputation_cap: int) -> int:
    """Eq. 8: the loss reputation min(cap, H_i + mean term) in a round whose quality q_n reaches q_min,
    and the mean term alone below q_min.

    The mean term (:func:`loss_reputation`) already carries the q_min decay and H_i is the
    cross-task prior (:mod:`fedchain.fl.crosstask`). The prior stays out of a round below q_min
    so that a good history cannot carry a client through a round in which it sent garbage: such a
    round can still take r_a below r_a_min and cost the client its deposit.
    """
    if prior < 0 or mean_term < 0:
        raise ValueError(f"prior and mean term must be non-negative, got {prior} and {mean_term}")
    if quality < min_quality:
        return mean_term
    return min(reputation_cap, prior + mean_term)


def time_reputation(weighted_sum: int, k: int, max_round_time: int, last_time_fp: int, cap: int) -> int:
    """Eq. 9: the linear mean of T / t_j, times t_max / t_n when t_n > t_max, capped."""
    return min(time_penalty(linear_mean(weighted_sum, k), max_round_time, last_time_fp), cap)


def total_reputation(loss_rep: int, time_rep: int, cap: int) -> int:
    """Eq. 10: r_at = min(cap, r_a * r_t), fixed point: capped like every reputation, so that the final bonus
    of eq. 16 stays bounded as designed (uncapped, r_at reaches cap squared)."""
    return min(cap, (loss_rep * time_rep) // WAD)


def round_payment(psi: int, loss_rep: int, time_rep: int, min_loss_rep: int, min_time_rep: int) -> int:
    """Eq. 15: psi * r_t^2 * r_a (wei) when both reputations reach their minimum, else 0."""
    if loss_rep < min_loss_rep or time_rep < min_time_rep:
        return 0
    return ((psi * time_rep * time_rep) // (WAD * WAD) * loss_rep) // WAD


def max_round_payment(psi: int, cap: int) -> int:
    """The most one client can be paid in one round: eq. 15 at r_a = r_t = cap, wei."""
    return round_payment(psi, cap, cap, 0, 0)


def minimum_aggregator_bond(max_clients: int, client_deposit: int, psi: int, cap: int, budget: int) -> int:
    """The least aggregator bond a task may ask for (TaskRegistry.minimumBond), wei: what one round's post can
    move, every deposit it could forfeit plus the most one round can pay (never more than the budget)."""
    return max_clients * client_deposit + min(budget, max_clients * max_round_payment(psi, cap))


def minimum_challenge_bond(client_deposit: int) -> int:
    """The least challenge bond a task may ask for: half the client deposit, rounded up, at least 1 (wei)."""
    return max(1, (client_deposit + 1) // 2)


def entry_slash(aggregator_bond: int, max_clients: int) -> int:
    """What one upheld challenge takes from the aggregator's bond: what one client's entry can move."""
    return aggregator_bond // max_clients


def neutral_finish(round_started_at: int, current_round: int, rounds: int, round_duration: int) -> int:
    """When a task would finish had round ``current_round`` (started at ``round_started_at``) and every round
    after it been posted neutral at its deadline: the finish eq. 16 counts for an abandoned task."""
    return round_started_at + (rounds - current_round + 1) * round_duration


def final_bonus(phi: int, expected_duration: int, actual_duration: int, total_rep: int) -> int:
    """Eq. 16: phi * max(0, T_ex - T_r) * r_at, wei."""
    if actual_duration >= expected_duration:
        return 0
    return (phi * (expected_duration - actual_duration) * total_rep) // WAD


def scale_pro_rata(amounts: Sequence[int], available: int) -> list[int]:
    """Each amount times available / total (rounded down) when the total exceeds ``available``."""
    total = sum(amounts)
    if total <= available:
        return list(amounts)
    return [(amount * available) // total for amount in amounts]


def job_time(cycles_per_sample: int, data_size: int, frequency: int) -> int:
    """Eq. 11: T_x = c * D / f in fixed-point seconds."""
    if frequency <= 0:
        raise ValueError(f"frequency must be positive, got {frequency}")
    return (cycles_per_sample * data_size * WAD) // frequency


def score_round(
    state: ClientReputation, params: MechanismParams, quality: int, round_time: int, accepted: bool, prior: int = 0
) -> RoundScore:
    """One committed measurement of one round: new reputation, unscaled payment, removal (Algorithm 1).

    ``quality`` is q (fixed point), ``round_time`` t (whole seconds); a rejected
    update (``accepted`` false) scores quality 0. ``prior`` is the client's
    cross-task history term H_i posted for the task (eq. 8, :mod:`fedchain.fl.crosstask`):
    r_a = min(cap, prior + the weighted mean) when q >= q_min, else the decayed weighted mean
    alone (:func:`loss_reputation_with_prior`).
    """
    cap = params.reputation_cap
    q = min(quality, cap) if accepted else 0
    time_fp = max(round_time, 1) * WAD
    k = state.rounds + 1
    sum_quality = state.sum_quality + k * q
    sum_time_ratio = state.sum_time_ratio + k * time_ratio(params.expected_duration, params.rounds, time_fp, cap)
    mean_term = loss_reputation(sum_quality, k, q, params.min_quality, cap)
    loss_rep = loss_reputation_with_prior(prior, mean_term, q, params.min_quality, cap)
    time_rep = time_reputation(sum_time_ratio, k, params.max_round_time, time_fp, cap)
    reputation = ClientReputation(k, sum_quality, sum_time_ratio, loss_rep, time_rep)
    removed = loss_rep < params.min_loss_reputation or time_rep < params.min_time_reputation
    payment = (
        0
        if removed
        else round_payment(params.psi, loss_rep, time_rep, params.min_loss_reputation, params.min_time_reputation)
    )
    return RoundScore(reputation, payment, removed)


# --------------------------------------------------------------------------- the fog auction (eqs. 11, 12, 18)


@dataclass(frozen=True)
class RevealedBid:
    """A revealed fog bid: frequency f_x (cycles per second) and price P_x (wei per round)."""

    frequency: int
    price: int


@dataclass(frozen=True)
class AuctionOutcome:
    """The auction's result: index of the winning bid (None without bids) and the price per round it is paid."""

    winner: int | None
    price: int


def implied_time_reputation(params: MechanismParams, data_size: int, frequency: int) -> int:
    """r_t_x: the time reputation of one round lasting T_x = c * D / f_x (eqs. 9 and 11)."""
    seconds_fp = max(job_time(params.cycles_per_sample, data_size, frequency), 1)
    ratio = time_ratio(params.expected_duration, params.rounds, seconds_fp, params.reputation_cap)
    return time_reputation(ratio, 1, params.max_round_time, seconds_fp, params.reputation_cap)


def auction_utility(params: MechanismParams, loss_rep: int, data_size: int, bid: RevealedBid) -> int:
    """Eq. 18: U = P_i(r_a, r_t_x) - P_x, wei (negative when the bid costs more than it earns)."""
    time_rep = implied_time_reputation(params, data_size, bid.frequency)
    payment = round_payment(params.psi, loss_rep, time_rep, params.min_loss_reputation, params.min_time_reputation)
    return payment - bid.price


def rank_reveal(
    ranked: Sequence[int], utilities: Sequence[int], bid_index: int, max_ranked: int = MAX_RANKED
) -> tuple[tuple[int, ...], int | None]:
    """A job's ranking after bid ``bid_index`` (utility >= 0) is revealed, as FogAuction keeps it: bid indices by
    utility, highest first, the earlier bid first on ties, at most ``max_ranked``. ``utilities`` holds every bid's
    utility by index. Returns the new ranking and the bid that left it (the new one or the last one), or None."""
    order = sorted((*ranked, bid_index), key=lambda i: (-utilities[i], i))
    if len(order) <= max_ranked:
        return tuple(order), None
    return tuple(order[:max_ranked]), order[max_ranked]


def ranked_bids(
    params: MechanismParams,
    loss_rep: int,
    data_size: int,
    bids: Sequence[RevealedBid | None],
    max_ranked: int = MAX_RANKED,
) -> tuple[int, ...]:
    """The bids a job keeps in contention, best first: the ``max_ranked`` revealed bids of highest utility among
    those of utility >= 0 (``None`` entries are unrevealed). The order of the reveals does not change it."""
    scored = [(i, auction_utility(params, loss_rep, data_size, b)) for i, b in enumerate(bids) if b is not None]
    rational = sorted(((i, u) for i, u in scored if u >= 0), key=lambda item: (-item[1], item[0]))
    return tuple(i for i, _ in rational[:max_ranked])


def choose_winner(
    params: MechanismParams, loss_rep: int, data_size: int, bids: Sequence[RevealedBid | None]
) -> AuctionOutcome:
    """The winner among revealed bids (``None`` entries are unrevealed) by eq. 18.

    Only bids of utility >= 0 qualify (the client could accept no other). Highest
    utility wins, the earliest bid on ties. First price: the winner is paid its
    bid. Second price: its bid plus its utility margin over the runner-up; a lone
    bid is paid its own price.
    """
    ranked = ranked_bids(params, loss_rep, data_size, bids)
    if not ranked:
        return AuctionOutcome(None, 0)
    winner = ranked[0]
    bid = bids[winner]
    assert bid is not None
    price = bid.price
    if params.second_price and len(ranked) > 1:
        runner_up = bids[ranked[1]]
        assert runner_up is not None
        margin = auction_utility(params, loss_rep, data_size, bid) - auction_utility(
            params, loss_rep, data_size, runner_up
        )
        price += margin
    return AuctionOutcome(winner, price)


def standby_winner(
    params: MechanismParams,
    loss_rep: int,
    data_size: int,
    bids: Sequence[RevealedBid | None],
    eligible: Sequence[bool],
    max_price: int,
) -> int | None:
    """The bid that takes over a slashed job: the best ranked bid (:func:`ranked_bids`) still ``eligible``
    whose price is at most the escrowed ``max_price``; None if there is none."""
    for i in ranked_bids(params, loss_rep, data_size, bids):
        bid = bids[i]
        if eligible[i] and bid is not None and bid.price <= max_price:
            return i
    return None


def fog_cost(alpha: float, cycles_per_sample: float, data_size: float, frequency: float) -> float:
    """Eq. 12: the energy cost E = alpha / 2 * c * D * f^2 of one round of training (the fog's own cost unit).

    A rational fog node never bids a price below it (individual rationality, definition 1).
    """
    return alpha / 2.0 * cycles_per_sample * data_size * frequency**2


# --------------------------------------------------------------------------- float reference (whole histories)


def linear_weights(n: int) -> tuple[float, ...]:
    """w^j = 2j / (n(n+1)), j = 1..n: strictly increasing, summing to 1."""
    if n <= 0:
        raise ValueError(f"n must be positive, got {n}")
    return tuple(2.0 * j / (n * (n + 1)) for j in range(1, n + 1))


def loss_reputation_float(qualities: Sequence[float], min_quality: float, cap: float = math.inf) -> float:
    """Eqs. 5 and 8 over a history q_1..q_n (each capped): weighted mean, times q_n when q_n < q_min, capped."""
    capped = [min(q, cap) for q in qualities]
    mean = sum(w * q for w, q in zip(linear_weights(len(capped)), capped, strict=True))
    if capped[-1] < min_quality:
        mean *= capped[-1]
    return min(mean, cap)


def time_reputation_float(
    times: Sequence[float], expected_round_time: float, max_round_time: float, cap: float = math.inf
) -> float:
    """Eq. 9 over round times t_1..t_n: weighted mean of min(cap, T / t_j), times t_max / t_n when t_n > t_max, capped."""
    ratios = [min(expected_round_time / t, cap) for t in times]
    mean = sum(w * r for w, r in zip(linear_weights(len(ratios)), ratios, strict=True))
    if times[-1] > max_round_time:
        mean *= max_round_time / times[-1]
    return min(mean, cap)


def round_payment_float(
    psi: float, loss_rep: float, time_rep: float, min_loss_rep: float, min_time_rep: float
) -> float:
    """Eq. 15 in floats."""
    if loss_rep < min_loss_rep or time_rep < min_time_rep:
        return 0.0
    return psi * time_rep**2 * loss_rep


def final_bonus_float(
    phi: float, expected_duration: float, actual_duration: float, loss_rep: float, time_rep: float
) -> float:
    """Eq. 16 in floats: phi * max(0, T_ex - T_r) * r_a * r_t."""
    return phi * max(0.0, expected_duration - actual_duration) * loss_rep * time_rep
