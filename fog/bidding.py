"""What a fog node bids: its cost model (eqs. 11-12 of the Tian seed) and the rational bid.

Pure functions, no chain access. A fog node with frequency ``f`` (cycles per
second), energy coefficient ``alpha`` and ``c`` cycles per training sample
needs ``T_x = c * D / f`` seconds for one round of a job of ``D`` samples
(eq. 11) and spends ``E = alpha / 2 * c * D * f^2`` (eq. 12) on it. It bids
the price ``ceil(E * (1 + margin))`` wei per round: never below its cost
(individual rationality, definition 1), so ``margin >= 0``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fedchain.errors import ConfigError
from fedchain.fl.reputation import fog_cost
from fedchain.units import WEI_PER_ETHER

#: The largest price a bid can carry (``uint96``).
MAX_PRICE = 2**96 - 1
#: The largest frequency a bid can carry (``uint64``).
MAX_FREQUENCY = 2**64 - 1


@dataclass(frozen=True)
class CostModel:
    """A fog node's hardware and pricing.

    Attributes:
        frequency: f, the compute frequency it bids, cycles per second.
        alpha: energy coefficient of eq. 12, wei per cycle per (cycle/s)^2.
        cycles_per_sample: c, cycles its hardware spends per sample; None: the task's ``cyclesPerSample``.
        margin: profit over cost, a fraction (0.1: price = 1.1 * cost); never negative.
    """

    frequency: int = 2_000_000_000
    alpha: float = 1e-11
    cycles_per_sample: int | None = None
    margin: float = 0.1

    def __post_init__(self) -> None:
        if not 0 < self.frequency <= MAX_FREQUENCY:
            raise ConfigError(f"frequency must be in 1..2^64-1 cycles per second, got {self.frequency}")
        if not (self.alpha >= 0 and math.isfinite(self.alpha)):
            raise ConfigError(f"alpha must be a finite number >= 0, got {self.alpha}")
        if self.cycles_per_sample is not None and self.cycles_per_sample <= 0:
            raise ConfigError(f"cycles_per_sample must be positive, got {self.cycles_per_sample}")
        if not (self.margin >= 0 and math.isfinite(self.margin)):
            raise ConfigError(
                f"margin must be a finite number >= 0, got {self.margin}",
                hint="a negative margin would bid below cost, which a rational fog node never does",
            )

    def cycles(self, task_cycles_per_sample: int) -> int:
        """c: the fog's own cycles per sample, else the task's."""
        return self.cycles_per_sample if self.cycles_per_sample is not None else task_cycles_per_sample

    def training_time(self, data_size: int, task_cycles_per_sample: int) -> float:
        """Eq. 11: T_x = c * D / f, seconds per round."""
        return self.cycles(task_cycles_per_sample) * data_size / self.frequency

    def cost(self, data_size: int, task_cycles_per_sample: int) -> float:
        """Eq. 12: E = alpha / 2 * c * D * f^2, wei per round."""
        return fog_cost(self.alpha, self.cycles(task_cycles_per_sample), data_size, self.frequency)

    def price(self, data_size: int, task_cycles_per_sample: int) -> int:
        """The bid price, wei per round: ceil(E * (1 + margin)), so never below the cost E."""
        return math.ceil(self.cost(data_size, task_cycles_per_sample) * (1.0 + self.margin))


@dataclass(frozen=True)
class BidDecision:
    """Whether to bid for a job, and the bid."""

    bid: bool
    frequency: int
    price: int
    #: E, wei per round.
    cost: float
    #: T_x, seconds per round.
    training_time: float
    #: Why not, when ``bid`` is false (empty otherwise).
    reason: str = ""


def decide_bid(
    model: CostModel,
    *,
    data_size: int,
    task_cycles_per_sample: int,
    round_duration: int,
    fog_deposit: int,
    active_jobs: int,
    max_jobs: int,
    max_deposit: int,
    units_per_ether: int = WEI_PER_ETHER,
) -> BidDecision:
    """Bid for a job of ``data_size`` samples unless it cannot be served profitably and on time.

    The cost model and ``max_deposit`` are in wei; a token task's deposit and prices are in the token's units,
    ``units_per_ether`` of them for one ether (the node's configured rate): the price is rounded up and the
    deposit limit down, so the bid stays above cost and the deposit within the limit. 1e18 for an ether task.

    No bid when the fog node already trains ``max_jobs`` jobs, when one round
    takes longer than the task's round (it would miss every deadline and lose
    its deposit), when the task's fog deposit exceeds ``max_deposit``, or when
    the price does not fit a bid.
    """
    cost = model.cost(data_size, task_cycles_per_sample) * units_per_ether / WEI_PER_ETHER
    time_s = model.training_time(data_size, task_cycles_per_sample)
    price = -(-model.price(data_size, task_cycles_per_sample) * units_per_ether // WEI_PER_ETHER)
    max_deposit = max_deposit * units_per_ether // WEI_PER_ETHER

    def decision(reason: str = "") -> BidDecision:
        return BidDecision(not reason, model.frequency, price, cost, time_s, reason)

    if active_jobs >= max_jobs:
        return decision(f"busy: {active_jobs} of {max_jobs} jobs")
    if time_s > round_duration:
        return decision(f"too slow: {time_s:.1f} s per round, the round lasts {round_duration} s")
    if fog_deposit > max_deposit:
        return decision(f"deposit {fog_deposit} is over the limit of {max_deposit} (the task's units)")
    if price > MAX_PRICE:
        return decision(f"price {price} does not fit a bid (uint96)")
    return decision()
