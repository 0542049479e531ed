"""FedAVE (seed ``fedave.zh.txt``): adaptive reputation and dynamic gradient rewards.

Round t:

- Aggregation: ``u_i = tau * Delta_i / ||Delta_i||``, ``u_G = sum_i |D_i|/sum|D| u_i``
  over the accepted clients; the new global model is ``global + u_G``.
- Adaptive reputation (ARC): ``KL_i = KL(hist of client i's model's losses on
  its local data || on the validation set)``, floored at ``kl_floor``;
  ``r~_i = Acc_i / KL_i`` with ``Acc_i`` the validation accuracy of
  ``global + Delta_i``; ``r_i = alpha r_i + (1 - alpha) r~_i`` (round 1: ``r = r~``,
  as in the authors' code), then normalised to sum 1.
- Dynamic gradient reward (DGR): ``quota_i = d tanh(beta r_i) / (max_j tanh(beta r_j) KL_i)``,
  clamped to ``[0, d]`` and rounded down; client i receives the ``quota_i``
  largest-magnitude entries of ``u_G``.

Two choices of the authors' published code, both defaults here (set them off
for the seed's literal formulas):

- ``relative_divergence``: the quota divides by ``KL_i / min_j KL_j`` instead of
  ``KL_i``. When every KL is below 1 (similar data), the seed's formula gives
  every client the whole update; the relative one still ranks them.
- ``layer_sizes`` (filled in by the experiment runner from the model): the
  reward keeps ``quota_i / d`` of every layer's largest entries rather than the
  ``quota_i`` largest of the whole vector, so every layer of a rewarded model
  moves. Whole-vector top-k hands even a 5% quota nearly all of the update's
  effect (on 10 MNIST clients, 5% of the entries reached 99% of the full
  update's accuracy), so the rewards hardly differ.

Our rules where the seed is silent: a rejected (non-finite) client and a zero
update (no direction, nothing contributed) get ``r~_i = 0`` and no reward.

The round's contribution, which a task turns into the chain's quality (rescaled
to mean 1, DESIGN.md), is by default not the reputation but this round's
``Acc_i x (min_j KL_j / KL_i) ** divergence_exponent`` (:func:`discounted_accuracy`,
0.25: the fourth root). The reputation divides by the whole KL, whose spread over
honest clients on skewed data is 10-30x, so the most skewed honest client sat at
0.3 of the mean round after round and the chain removed it (21 honest removals in
36 runs of fedave and fair on Dirichlet and POW data, MNIST and Fashion-MNIST);
the square root and the fourth root keep them all, and a label flipper, whose model
is poor on the validation set, still falls by round 4. The fourth root puts fewer
honest client-rounds below q_min (precision of 0.95 or more in 94 of 108 attack rows
against 50 with the square root, docs/robustness.md, "Contribution strategies on
skewed data"). ``contribution_measure: reputation`` is the seed's.
The reward quotas use the reputation either way.

``quota_fractions`` replaces the dynamic quotas with fixed ones, a fraction of
the update per client, while the reputation is computed as always. It is for
studying the reward protocol apart from the reputation: ``fedchain reproduce
fairness --oracle-floor`` sets them from the clients' measured standalone
accuracies, the best ranking there is.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

import torch

from fedchain.errors import ConfigError
from fedchain.fl.aggregate import (
    MEDIAN_LENGTH,
    ZERO_NORM,
    data_shares,
    normalise_weights,
    normalised_rows,
    row_norms,
    weighted_sum,
)
from fedchain.fl.divergence import DEFAULT_BINS, HISTOGRAM_EPSILON, loss_kl
from fedchain.fl.rewards import sparsify_top_magnitude, sparsify_top_magnitude_by_layer
from fedchain.fl.strategy import (
    Evaluation,
    RoundInputs,
    RoundResult,
    Strategy,
    StrategyState,
    check_state_size,
    evaluation_losses,
)


@dataclass(frozen=True)
class FedAVEState(StrategyState):
    """The smoothed, normalised reputation r ``[n]`` (None before round 1)."""

    reputation: torch.Tensor | None = None


def kl_and_layer_problems(kl_floor: float, bins: int, epsilon: float, layer_sizes: Sequence[int]) -> list[str]:
    """What is wrong with the settings of the loss-histogram KL and of per-layer rewards (empty: nothing)."""
    problems = []
    if not kl_floor > 0:
        problems.append(f"kl_floor={kl_floor} must be positive")
    if bins < 1:
        problems.append(f"bins={bins} must be at least 1")
    if not epsilon > 0:
        problems.append(f"histogram_epsilon={epsilon} must be positive")
    if any(size <= 0 for size in layer_sizes):
        problems.append(f"layer_sizes={list(layer_sizes)} must all be positive")
    return problems


def client_divergences(
    strategy: str,
    inputs: RoundInputs,
    evaluations: Sequence[Evaluation | None],
    bins: int,
    epsilon: float,
    floor: float,
) -> torch.Tensor:
    """FedAVE's ``KL_i`` (local vs validation loss histograms of client i's updated model), at least
    ``floor``, float64 ``[n]``; NaN for clients without an evaluation (rejected ones).

    A :class:`ConfigError` naming ``strategy`` when the validation lacks the per-sample losses.
    """
    local = inputs.validation.local_sample_losses
    if local is None or len(local) != inputs.n_clients:
        raise ConfigError(
            f"strategy {strategy!r} needs one vector of local per-sample losses per client",
            hint="pass Validation(local_sample_losses=[losses of client i's model on its own data, ...])",
        )
    divergence = torch.full((inputs.n_clients,), math.nan, dtype=torch.float64)
    for i, evaluation in enumerate(evaluations):
        if evaluation is None:
            continue
        if evaluation.sample_losses is None:
            raise ConfigError(
                f"strategy {strategy!r} needs per-sample validation losses",
                hint="return Evaluation(..., sample_losses=...) from the evaluator",
            )
        losses = local[i]
        if losses is None:
            raise ConfigError(
                f"client {i} has an update but no local per-sample losses, which {strategy!r} needs",
                hint="give every client with an update its losses in Validation.local_sample_losses",
            )
        divergence[i] = max(loss_kl(losses, evaluation.sample_losses, bins, epsilon), floor)
    return divergence


#: What a strategy reports as its round's contribution: this round's divergence-discounted accuracy
#: (:func:`discounted_accuracy`), or the seed's own ranking (fedave's reputation, fair's signal).
DISCOUNTED_ACCURACY: Final = "discounted_accuracy"

#: The default exponent of the divergence discount: the fourth root of min KL / KL_i (0.5, the square root, until
#: 2026-11-27).
DEFAULT_DIVERGENCE_EXPONENT = 0.25


def discounted_accuracy(
    accuracy: torch.Tensor, divergence: torch.Tensor, eligible: torch.Tensor, exponent: float
) -> torch.Tensor:
    """``Acc_i * (min_j KL_j / KL_i) ** exponent`` over the ``eligible`` clients (min over them), 0 for the others.

    ``accuracy``: validation accuracy of each client's updated model; ``divergence``: FedAVE's ``KL_i``
    (:func:`client_divergences`, positive where eligible). Exponent 1 ranks as the seed's ``Acc_i / KL_i``;
    0 is the accuracy alone. Float64 ``[n]``.
    """
    accuracy = accuracy.to(torch.float64)
    zeros = torch.zeros_like(accuracy)
    if not eligible.any():
        return zeros
    divergence = divergence.to(torch.float64)
    closest = divergence[eligible].min()
    ratio = closest / torch.where(eligible, divergence, torch.ones_like(divergence))
    return torch.where(eligible, accuracy * ratio.pow(exponent), zeros)


def check_exponent(exponent: float) -> list[str]:
    """What is wrong with a divergence exponent (empty: nothing)."""
    if not (math.isfinite(exponent) and exponent >= 0):
        return [f"divergence_exponent={exponent} must be a finite number >= 0 (0.25: the fourth root; 1: the seed's)"]
    return []


def reward_quotas(reputation: torch.Tensor, divergence: torch.Tensor, size: int, beta: float) -> list[int]:
    """``floor(clamp(d tanh(beta r_i) / (max_j tanh(beta r_j) KL_i), 0, d))``; 0 where ``r_i = 0``."""
    squashed = torch.tanh(beta * reputation)
    top = squashed.max()
    if top <= 0:
        return [0] * reputation.numel()
    quotas = size * squashed / (top * divergence)
    return [min(size, max(0, math.floor(q))) if math.isfinite(q) else 0 for q in quotas.tolist()]


@dataclass(frozen=True, kw_only=True)
class FedAVE(Strategy[FedAVEState]):
    """FedAVE. Needs ``Validation.local_sample_losses`` and, for every client's model,
    an evaluation with ``sample_losses`` (``Validation.client_evaluations`` or ``Validation.evaluate``).

    Contribution: this round's discounted accuracy (:func:`discounted_accuracy`), or with
    ``contribution_measure: reputation`` the normalised reputation ``r_i`` after this round (the seed's).
    Rewards: ``sparsify(u_G, quota_i)`` added to the model client i trained from.
    """

    name = "fedave"
    normalises_updates = True
    state_type = FedAVEState
    needs_local_losses = True

    #: Length tau of every normalised update: a number (the seed: 0.5) or "median" (the round's median update
    #: norm: it learns as FedAvg does, where 0.5 ended 5 IID rounds at 78%).
    tau: float | Literal["median"] = MEDIAN_LENGTH
    #: Reputation smoothing alpha in [0, 1): the weight of the previous reputation.
    alpha: float = 0.95
    #: Steepness beta of tanh in the reward quota.
    beta: float = 5.0
    #: Smallest KL divergence used (identical histograms would otherwise give an infinite reputation).
    kl_floor: float = 1e-3
    #: Bins of the loss histograms.
    bins: int = DEFAULT_BINS
    #: Probability added to every histogram bin.
    histogram_epsilon: float = HISTOGRAM_EPSILON
    #: Divide the reward quota by KL_i / min_j KL_j (authors' code) rather than by KL_i (the seed's formula).
    relative_divergence: bool = True
    #: Sizes of the model's parameter tensors in flat order: reward quotas apply per layer
    #: (authors' code). Empty: the largest entries of the whole vector (the seed's sparsify).
    layer_sizes: tuple[int, ...] = ()
    #: Fixed reward quotas, one fraction of the update in [0, 1] per client, instead of the
    #: reputation's (an oracle or a reward policy under study). Empty: the dynamic quotas.
    quota_fractions: tuple[float, ...] = ()
    #: The round's contribution (the chain's quality, rescaled to mean 1): ``discounted_accuracy``, this round's
    #: ``Acc_i x (min KL / KL_i) ** divergence_exponent``, or ``reputation``, the seed's normalised reputation.
    contribution_measure: Literal["discounted_accuracy", "reputation"] = DISCOUNTED_ACCURACY
    #: Exponent of the divergence discount of the contribution (module docstring).
    divergence_exponent: float = DEFAULT_DIVERGENCE_EXPONENT

    def __post_init__(self) -> None:
        super().__post_init__()
        problems = []
        if self.contribution_measure not in (DISCOUNTED_ACCURACY, "reputation"):
            problems.append(
                f"contribution_measure={self.contribution_measure!r} must be discounted_accuracy or reputation"
            )
        problems += check_exponent(self.divergence_exponent)
        if isinstance(self.tau, float) and not self.tau > 0:
            problems.append(f"tau={self.tau} must be positive")
        if not 0.0 <= self.alpha < 1.0:
            problems.append(f"alpha={self.alpha} must be in [0, 1)")
        if not self.beta > 0:
            problems.append(f"beta={self.beta} must be positive")
        problems += kl_and_layer_problems(self.kl_floor, self.bins, self.histogram_epsilon, self.layer_sizes)
        if not all(0.0 <= f <= 1.0 for f in self.quota_fractions):
            problems.append(f"quota_fractions={list(self.quota_fractions)} must all lie in [0, 1]")
        if problems:
            raise ConfigError(
                f"invalid fedave settings: {'; '.join(problems)}",
                hint="e.g. tau: median (or 0.5), alpha: 0.95, beta: 5",
            )

    def divergences(self, inputs: RoundInputs, evaluations: Sequence[Evaluation | None]) -> torch.Tensor:
        """``KL_i`` floored at ``kl_floor`` for every evaluated client (NaN for rejected ones)."""
        return client_divergences(self.name, inputs, evaluations, self.bins, self.histogram_epsilon, self.kl_floor)

    def sparsify(self, global_update: torch.Tensor, quotas: Sequence[int]) -> torch.Tensor:
        """Every client's reward ``[n, d]``: whole-vector top-``quota_i``, or per layer with ``layer_sizes``."""
        size = global_update.numel()
        if not self.layer_sizes:
            return sparsify_top_magnitude(global_update, quotas)
        if sum(self.layer_sizes) != size:
            raise ConfigError(
                f"fedave layer_sizes add up to {sum(self.layer_sizes)} entries, the model has {size}",
                hint="give the sizes of the model's parameter tensors in order, or leave layer_sizes empty",
            )
        return sparsify_top_magnitude_by_layer(global_update, [q / size for q in quotas], self.layer_sizes)

    def check_client_count(self, n_clients: int) -> None:
        """Raise :class:`ConfigError` unless ``quota_fractions`` is empty or has one fraction per client."""
        if self.quota_fractions and len(self.quota_fractions) != n_clients:
            raise ConfigError(
                f"fedave has {len(self.quota_fractions)} quota_fractions for {n_clients} clients",
                hint="give one fraction per client, or leave quota_fractions empty for the dynamic quotas",
            )

    def quotas(
        self, reputation: torch.Tensor, divergence: torch.Tensor, eligible: torch.Tensor, size: int
    ) -> list[int]:
        """Every client's reward quota (entries of the update): dynamic, or ``quota_fractions``; 0 if not eligible."""
        if not self.quota_fractions:
            return reward_quotas(
                torch.where(eligible, reputation, torch.zeros_like(reputation)),
                torch.where(eligible, divergence, torch.ones_like(divergence)),
                size,
                self.beta,
            )
        self.check_client_count(eligible.numel())
        return [
            math.floor(f * size) if ok else 0 for f, ok in zip(self.quota_fractions, eligible.tolist(), strict=True)
        ]

    def aggregate(self, inputs: RoundInputs, state: FedAVEState) -> RoundResult[FedAVEState]:
        check_state_size(self.name, state.reputation, inputs.n_clients)
        evaluations = inputs.client_evaluations(self.name)
        divergence = self.divergences(inputs, evaluations)
        nonzero = row_norms(inputs.updates) > ZERO_NORM
        eligible = inputs.finite & nonzero
        accuracy = torch.tensor([0.0 if e is None else float(e.accuracy) for e in evaluations], dtype=torch.float64)
        instant = torch.where(eligible, accuracy / divergence, torch.zeros_like(accuracy))
        instant = torch.nan_to_num(instant, nan=0.0)
        smoothed = instant if state.reputation is None else self.alpha * state.reputation + (1 - self.alpha) * instant
        reputation = normalise_weights(smoothed)
        contribution = (
            reputation
            if self.contribution_measure == "reputation"
            else discounted_accuracy(accuracy, divergence, eligible, self.divergence_exponent)
        )
        weights = data_shares(inputs.data_sizes, inputs.finite)
        global_update = weighted_sum(normalised_rows(inputs.updates, inputs.finite, self.tau), weights)
        if self.relative_divergence and eligible.any():
            divergence = divergence / divergence[eligible].min()
        quotas = self.quotas(reputation, divergence, eligible, global_update.numel())
        reward_updates = self.sparsify(global_update, quotas)
        return RoundResult(
            global_params=inputs.global_params + global_update,
            contribution=contribution,
            rewards=None,
            accepted=inputs.finite.clone(),
            state=dataclasses.replace(state, reputation=reputation),
            weights=weights,
            reward_updates=reward_updates,
            client_losses=evaluation_losses(evaluations),
        )
