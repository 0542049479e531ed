"""FedFAIM (seed ``fedfaim.zh.txt``): quality detection, fair aggregation, customised rewards.

Round t, over the finite updates (N of them):

1. Quality detection (eqs. 4.1-4.3): ``l`` is the validation loss of
   ``global + (1/N) sum_j u_j`` and ``l_{-i}`` that of ``global + (1/N) sum_{j != i} u_j``:
   the same model without client i's term; ``delta_i = l_{-i} - l``; client i
   passes when ``delta_i >= delta``. The seed renormalises the leave-one-out
   model to ``1/(N-1)`` (``renormalise_leave_one_out``): that scales every other
   update up by N/(N-1), so when updates differ in size, leaving out a small
   one moves the model further along the large ones and lowers the loss.
   Every client whose update is smaller than average then fails, good or
   not: in round 1 of ``reproduce fairness`` (POW, seed 2), 8 of 10 clients
   failed, all of them the smaller ones, and most never recovered.
   Near convergence the differences are small against their sampling noise;
   ``significance`` (2 by default; 0 is the seed's plain check) fails a client only when
   ``delta_i`` is that many standard errors of the paired per-sample loss differences below ``delta``,
   and ``outlier_spread`` (3 by default) passes it too when it is above the round's median ``delta_i``
   minus that many robust standard deviations of the ``delta_j``: a round whose mean step overshoots
   fails no client for it, and only a client far below the round's typical one fails. The two
   tolerances are alternatives, not a sum (``tolerances_add``: the rule before 2026-11-28).
2. Aggregation (eqs. 4.4-4.6): ``alpha_i = softmax(gamma * delta)`` over the
   passing clients; ``u_G = sum_i alpha_i u_i``; the new global model is ``global + u_G``.
3. Contribution (eq. 4.10): ``phi_i = ||u_i|| cos(u_i, u_G)`` for passing clients, 0 otherwise.
4. Reputation (eqs. 4.11-4.15): ``c_i = max(0, sum_t phi_i)``, ``z_i = c_i / max_j c_j``,
   ``x_i = (n_pass - n_fail) / (n_pass + n_fail)``, Gompertz ``q_i = exp(-exp(-5.5 x_i))``
   (a = 1, b = -1, c = -5.5; our reading, the seed's formula is an image), ``r_i = q_i z_i``,
   at least ``reputation_floor``: the seed states ``r_i in (0, 1]``. Without a floor a
   client that fails its first checks gets ``r_i = 0``, no reward, so it keeps its
   starting model and its later updates fail too; it never recovers. 1e-3 is the
   floor of the CGSV and FedAVE authors' code (0.1% of the entries, 61 of LeNet-5's).
5. Reward (eqs. 4.16-4.19): ``num_i = floor(r_i / max_j r_j * d)`` entries of ``u_G``
   with the highest ``s_ij * s_Gj``, ``s_ij = |u_ij| / sum_j |u_ij|``,
   ``s_Gj = |u_Gj| / sum_j |u_Gj|``.

Updates are the raw ``Delta_i`` (FedFAIM does not normalise them). A
non-finite update fails the quality check.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch

from fedchain.errors import ConfigError
from fedchain.fl.aggregate import cosine_to, row_norms
from fedchain.fl.rewards import select_by_agreement
from fedchain.fl.strategy import (
    Evaluation,
    RoundInputs,
    RoundResult,
    Strategy,
    StrategyState,
    check_state_size,
)

#: Growth rate c of FedFAIM's Gompertz function q = a exp(b exp(c x)), a = 1, b = -1.
GOMPERTZ_RATE = 5.5
#: The median absolute deviation of a normal sample times this estimates its standard deviation.
MAD_TO_SIGMA = 1.4826
#: The options of the seed's own quality check: a plain comparison with the fixed threshold ``delta``,
#: and a client that fails it rejected.
SEED_QUALITY_CHECK: dict[str, float | bool | None] = {
    "significance": 0.0,
    "outlier_spread": None,
    "reject_failed": True,
}


@dataclass(frozen=True)
class FedFAIMState(StrategyState):
    """Cumulative contributions and quality-check counts, ``[n]`` each (None before round 1)."""

    cumulative_contribution: torch.Tensor | None = None
    passed: torch.Tensor | None = None
    failed: torch.Tensor | None = None


def gompertz_quality(passed: torch.Tensor, failed: torch.Tensor) -> torch.Tensor:
    """``q = exp(-exp(-5.5 x))`` with ``x = (n_pass - n_fail) / (n_pass + n_fail)`` (x = 0 before any check)."""
    checks = (passed + failed).to(torch.float64)
    x = torch.where(checks > 0, (passed - failed).to(torch.float64) / checks.clamp_min(1), torch.zeros_like(checks))
    return torch.exp(-torch.exp(-GOMPERTZ_RATE * x))


def fedfaim_reputation(cumulative: torch.Tensor, passed: torch.Tensor, failed: torch.Tensor) -> torch.Tensor:
    """``r_i = q_i z_i`` with ``z_i = max(0, c_i) / max_j max(0, c_j)`` (z = 0 when no one is positive)."""
    clipped = cumulative.clamp_min(0.0)
    top = clipped.max()
    relative = clipped / top if top > 0 else torch.zeros_like(clipped)
    return gompertz_quality(passed, failed) * relative


def reward_counts(reputation: torch.Tensor, size: int) -> list[int]:
    """``num_i = floor(r_i / max_j r_j * size)``: the best reputation gets the whole update."""
    top = reputation.max()
    if top <= 0:
        return [0] * reputation.numel()
    return [min(size, math.floor(ratio * size)) for ratio in (reputation / top).tolist()]


def _paired_standard_errors(evaluations: list[Evaluation]) -> torch.Tensor:
    """Standard error of the mean of ``losses_k(x) - losses_0(x)`` for every model k > 0, float64 ``[m - 1]``."""
    if any(e.sample_losses is None for e in evaluations):
        raise ConfigError(
            "fedfaim with significance > 0 needs per-sample validation losses",
            hint="return Evaluation(..., sample_losses=...) from the evaluator, or set significance: 0",
        )
    losses = torch.stack([torch.as_tensor(e.sample_losses, dtype=torch.float64).cpu() for e in evaluations])
    samples = losses.shape[1]
    if samples < 2:
        return torch.zeros(losses.shape[0] - 1, dtype=torch.float64)
    differences = losses[1:] - losses[0]
    return differences.std(dim=1) / math.sqrt(samples)


@dataclass(frozen=True, kw_only=True)
class FedFAIM(Strategy[FedFAIMState]):
    """FedFAIM. Needs ``Validation.evaluate`` or ``evaluate_many`` (N + 1 models a round).

    Contribution: ``phi_i`` of this round. Rewards: ``u*_i`` added to the model client i trained from.
    """

    name = "fedfaim"
    state_type = FedFAIMState

    #: Quality threshold delta: accept when the marginal loss l_{-i} - l is at least this.
    delta: float = 0.0
    #: Softmax temperature gamma of the aggregation weights (loss differences are small: large gamma).
    gamma: float = 10.0
    #: Smallest reputation r_i (the seed's r_i in (0, 1]); 0 gives the unclamped q_i z_i.
    reputation_floor: float = 1e-3
    #: Leave-one-out model of the quality check: True, the seed's ``mean_{j != i} u_j``
    #: (weights 1/(N-1)); False, ``(1/N) sum_{j != i} u_j`` (client i's term removed).
    renormalise_leave_one_out: bool = False
    #: Tolerance of the quality check in standard errors: client i fails only when
    #: ``delta_i < delta - significance * se_i``, with ``se_i`` the standard error of the mean of
    #: the paired per-sample loss differences ``l_{-i}(x) - l(x)`` over the validation set.
    #: 0 is the seed's plain comparison, under which about a third of honest client-rounds fail on IID
    #: data (leaving one client out barely moves the loss) and each failure is a quality-0 round on chain.
    #: Needs per-sample validation losses when positive.
    significance: float = 2.0
    #: Compare ``delta_i`` with ``min(delta, median - outlier_spread * sigma)`` over the round's finite
    #: ``delta_j`` (sigma: 1.4826 times their median absolute deviation) rather than with ``delta`` alone.
    #: When the round's mean step overshoots, leaving any one update out shortens the step and lowers the
    #: loss, so every ``delta_i`` falls below 0 together: 4 of 10 honest clients failed at once in round 7
    #: of an IID run, each a quality-0 round on chain; and honest clients differ from each other by more than
    #: the validation set's sampling error. A client far below the round's typical one still fails (median
    #: and MAD are robust to a minority of attackers). None is the seed's fixed threshold.
    outlier_spread: float | None = 3.0
    #: What the quality check does to a client that fails it: True (the seed) rejects its update, a
    #: quality-0 round that removes the client on chain; False leaves it out of the aggregate (weight 0) and
    #: gives it contribution 0, but counts its update as accepted, so that the chain scores it the task's
    #: quality floor. A failure is a judgement of one round's marginal loss, which honest clients fail now
    #: and then (1-3% of IID client-rounds, 8-11% on Dirichlet data): it should cost that round's pay, not the
    #: deposit. A client that fails round after round still falls below r_a_min.
    reject_failed: bool = False
    #: Whether the standard-error tolerance is also taken below the robust bound of ``outlier_spread``
    #: (``delta_i >= min(delta, bound) - significance * se_i``: the rule of specs before 2026-11-28) rather
    #: than being an alternative to it (``delta_i >= min(delta - significance * se_i, bound)``). The robust
    #: bound already spans the spread of the round's honest ``delta_j``, sampling noise included; counting
    #: the standard errors again below it let clients with 50% noisy labels, whose updates raised the
    #: validation loss 3.4-4 robust deviations below the round's median, pass in round 4 of an IID MNIST run
    #: (docs/robustness.md, "fedfaim's two tolerances").
    tolerances_add: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.0 <= self.reputation_floor <= 1.0:
            raise ConfigError(
                f"fedfaim reputation_floor={self.reputation_floor} must be in [0, 1]",
                hint="e.g. reputation_floor: 0.001",
            )
        if self.outlier_spread is not None and not (math.isfinite(self.outlier_spread) and self.outlier_spread >= 0):
            raise ConfigError(
                f"fedfaim outlier_spread={self.outlier_spread} must be a finite number >= 0 or None",
                hint="e.g. outlier_spread: 3 (robust standard deviations below the round's median), or null for the seed's check",
            )
        if not (math.isfinite(self.significance) and self.significance >= 0):
            raise ConfigError(
                f"fedfaim significance={self.significance} must be a finite number >= 0",
                hint="e.g. significance: 2 (standard errors), or 0 for the seed's plain check",
            )
        if not math.isfinite(self.delta) or not math.isfinite(self.gamma) or self.gamma < 0:
            raise ConfigError(
                f"fedfaim needs a finite delta and a finite gamma >= 0, got delta={self.delta}, gamma={self.gamma}",
                hint="e.g. delta: 0.0, gamma: 10.0",
            )

    def init_state(self, data_sizes: torch.Tensor) -> FedFAIMState:
        n = data_sizes.numel()
        zeros = torch.zeros(n, dtype=torch.int64)
        return FedFAIMState(cumulative_contribution=torch.zeros(n, dtype=torch.float64), passed=zeros, failed=zeros)

    def marginal_loss_test(self, inputs: RoundInputs) -> tuple[torch.Tensor, torch.Tensor]:
        """(``delta_i = l_{-i} - l``, its standard error ``se_i``), float64 ``[n]`` each, NaN for non-finite clients.

        With ``renormalise_leave_one_out`` the model without i is ``global + mean_{j != i} u_j``
        (``global`` when N = 1); otherwise ``global + (1/N) sum_{j != i} u_j``.
        ``se_i = std_x(l_{-i}(x) - l(x)) / sqrt(m)`` over the m validation samples; zeros
        when ``significance`` is 0 (the plain check needs no per-sample losses).
        """
        deltas = torch.full((inputs.n_clients,), math.nan, dtype=torch.float64)
        errors = deltas.clone()
        rows = torch.nonzero(inputs.finite).flatten()
        count = rows.numel()
        if count == 0:
            return deltas, errors
        finite_updates = inputs.updates[rows.to(inputs.updates.device)]
        total = finite_updates.sum(dim=0)
        if not self.renormalise_leave_one_out:
            without = (total[None, :] - finite_updates) / count
        elif count > 1:
            without = (total[None, :] - finite_updates) / (count - 1)
        else:
            without = torch.zeros_like(finite_updates)
        models = inputs.global_params + torch.cat([(total / count)[None, :], without])
        evaluations = inputs.evaluate_models(self.name, models)
        losses = torch.tensor([float(e.loss) for e in evaluations], dtype=torch.float64)
        deltas[rows] = losses[1:] - losses[0]
        errors[rows] = _paired_standard_errors(evaluations) if self.significance > 0 else 0.0
        return deltas, errors

    def threshold(self, deltas: torch.Tensor) -> float:
        """What ``delta_i`` is compared with before any standard error: ``delta``, or the round's robust lower
        bound when lower (``outlier_spread``)."""
        finite = deltas[torch.isfinite(deltas)]
        if self.outlier_spread is None or finite.numel() == 0:
            return self.delta
        median = float(finite.median())
        sigma = MAD_TO_SIGMA * float((finite - median).abs().median())
        return min(self.delta, median - self.outlier_spread * sigma)

    def passes(self, deltas: torch.Tensor, errors: torch.Tensor) -> torch.Tensor:
        """Which finite ``deltas`` (standard errors ``errors``) pass the quality check, ``[n]`` bool: at least
        ``delta - significance * se_i`` or the robust bound (:meth:`threshold`); with ``tolerances_add``, at
        least the threshold minus ``significance * se_i``."""
        threshold = self.threshold(deltas)
        if self.tolerances_add:
            least = threshold - self.significance * errors
        else:
            least = torch.clamp(self.delta - self.significance * errors, max=threshold)
        return torch.isfinite(deltas) & (deltas >= least)

    def aggregate(self, inputs: RoundInputs, state: FedFAIMState) -> RoundResult[FedFAIMState]:
        if state.cumulative_contribution is None:
            state = dataclasses.replace(self.init_state(inputs.data_sizes), round=state.round)
        assert state.cumulative_contribution is not None and state.passed is not None and state.failed is not None
        for vector in (state.cumulative_contribution, state.passed, state.failed):
            check_state_size(self.name, vector, inputs.n_clients)
        deltas, errors = self.marginal_loss_test(inputs)
        passed = inputs.finite & self.passes(deltas, errors)
        logits = torch.where(passed, self.gamma * deltas, torch.full_like(deltas, -math.inf))
        weights = torch.softmax(logits, dim=0) if passed.any() else torch.zeros_like(deltas)
        global_update = self.aggregation.combine(inputs.updates, weights)
        contribution = torch.where(
            passed, row_norms(inputs.updates) * cosine_to(inputs.updates, global_update), torch.zeros_like(deltas)
        )
        cumulative = state.cumulative_contribution + contribution
        n_passed = state.passed + passed.to(torch.int64)
        n_failed = state.failed + (~passed).to(torch.int64)
        reputation = fedfaim_reputation(cumulative, n_passed, n_failed).clamp_min(self.reputation_floor)
        counts = reward_counts(reputation, global_update.numel())
        reward_updates = select_by_agreement(global_update, inputs.updates, counts)
        return RoundResult(
            global_params=inputs.global_params + global_update,
            contribution=contribution,
            rewards=None,
            accepted=passed if self.reject_failed else inputs.finite.clone(),
            state=dataclasses.replace(state, cumulative_contribution=cumulative, passed=n_passed, failed=n_failed),
            weights=weights,
            reward_updates=reward_updates,
        )
