"""The fair reward protocol (DESIGN.md, "Rewards in kind"): FedAvg's global model,
rewards decoupled from training, quotas calibrated to the accuracy they buy.

Round t, with ``theta_0`` the global model of round 1 and ``theta_t`` this round's:

1. Aggregation: FedAvg, ``u_G = sum_i |D_i|/sum|D| Delta_i`` over the finite updates;
   ``theta_{t+1} = theta_t + u_G``. The global model is FedAvg's, whatever the rewards
   (or the task's robust rule in place of the mean, :attr:`Strategy.aggregation`).
2. Ranking: this round's signal of every eligible client (finite, non-zero update),
   rescaled to [0, 1] over them (0 for the others): ``neg_log_kl``, ``-log KL_i`` of
   FedAVE's loss histograms (client i's updated model on its own data vs on the
   validation set); ``cosine``, ``cos(Delta_i, u_G)`` (CGSV's signal); ``combined``,
   the mean of the two. The score ``s_i`` is the sum over the rounds so far, rescaled
   to [0, 1]: 1 for the best ranked client, 0 for the worst.
3. Calibration: the candidate models ``theta_0 + sparsify(theta_{t+1} - theta_0, q)`` for
   every quota q of ``quota_grid`` are evaluated on the validation set; client i's
   target is ``A_top - spread * (1 - s_i)``, ``A_top`` the best accuracy on the curve,
   and its quota the one the curve says buys it (:func:`~fedchain.fl.fairness.calibrated_quotas`).
4. Reward: ``theta_0 + sparsify(theta_{t+1} - theta_0, q_i)``, per layer with ``layer_sizes``:
   a model of its own, not the one the client trains from. Clients train from the
   global model (the runner's default for this strategy), so withholding reward
   slows no one: the reason for the decoupling (docs/fairness.md).

Why a strategy of its own rather than an option of fedave or fedfaim: both change the
global model (fedave normalises every update to length tau, fedfaim drops clients by a
check that turns chaotic near convergence), and the protocol's targets need FedAvg's
global model; what it keeps from them is a signal (fedave's KL) and a kernel (the
layer-wise top-magnitude sparsify), shared, not copied.

Contribution (what a task turns into the chain's quality): by default this round's
divergence-discounted accuracy, fedave's (:func:`~fedchain.fl.strategies.fedave.discounted_accuracy`),
not the ranking signal: the signal is rescaled to [0, 1] over the round, so its worst
client scores 0 in every round whoever it is, and an honest client on skewed data that
stays last was removed by the chain (docs/robustness.md, "Contribution strategies on
skewed data"). ``contribution_measure: signal`` reports this round's rescaled signal
(what the score sums), as before. No client labels are used: the KL needs only each
client's per-sample losses, which the trainer computes.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass
from typing import Literal

import torch

from fedchain.errors import ConfigError
from fedchain.fl.aggregate import ZERO_NORM, cosine_to, data_shares, row_norms
from fedchain.fl.divergence import DEFAULT_BINS, HISTOGRAM_EPSILON
from fedchain.fl.fairness import accuracy_targets, calibrated_quotas, rescale_unit
from fedchain.fl.rewards import sparsify_fractions
from fedchain.fl.strategies.fedave import (
    DEFAULT_DIVERGENCE_EXPONENT,
    DISCOUNTED_ACCURACY,
    check_exponent,
    client_divergences,
    discounted_accuracy,
    kl_and_layer_problems,
)
from fedchain.fl.strategy import Evaluation, RoundInputs, RoundResult, Strategy, StrategyState, check_state_size

#: Server-side ranking signals of the fair protocol.
RankingSignal = Literal["neg_log_kl", "cosine", "combined"]

#: Quotas whose accuracy is measured every round: log-spaced where accuracy still
#: changes (about 1-15% of every layer's update on MNIST, docs/fairness.md).
DEFAULT_QUOTA_GRID = (0.003, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1.0)


@dataclass(frozen=True)
class FairState(StrategyState):
    """The round-1 global model ``theta_0`` ``[d]`` and every client's summed signal ``[n]`` (None before round 1)."""

    initial: torch.Tensor | None = None
    signal_sum: torch.Tensor | None = None


@dataclass(frozen=True, kw_only=True)
class Fair(Strategy[FairState]):
    """The fair reward protocol. Needs ``Validation.evaluate`` or ``evaluate_many`` (the quota grid's
    models every round) and, for ``neg_log_kl`` and ``combined``, what fedave needs for its KL:
    ``Validation.local_sample_losses`` and per-sample validation losses of every client's model.
    """

    name = "fair"
    state_type = FairState
    needs_local_losses = True

    #: Server-side ranking signal (see the module docstring).
    signal: RankingSignal = "combined"
    #: Accuracy (a fraction: 0.1 is 10 points) between the best and the worst ranked client's target.
    spread: float = 0.1
    #: Increasing quotas in (0, 1] whose accuracy is measured every round; the last is the most
    #: any client receives.
    quota_grid: tuple[float, ...] = DEFAULT_QUOTA_GRID
    #: Smallest KL divergence used (as fedave's kl_floor).
    kl_floor: float = 1e-3
    #: Bins of the loss histograms.
    bins: int = DEFAULT_BINS
    #: Probability added to every histogram bin.
    histogram_epsilon: float = HISTOGRAM_EPSILON
    #: Sizes of the model's parameter tensors in flat order (the runner fills them in): quotas
    #: apply per layer. Empty: to the whole vector.
    layer_sizes: tuple[int, ...] = ()
    #: The round's contribution (the chain's quality, rescaled to mean 1): ``discounted_accuracy`` (module
    #: docstring) or ``signal``, this round's ranking signal rescaled to [0, 1].
    contribution_measure: Literal["discounted_accuracy", "signal"] = DISCOUNTED_ACCURACY
    #: Exponent of the divergence discount of the contribution (fedave's setting of the same name).
    divergence_exponent: float = DEFAULT_DIVERGENCE_EXPONENT

    def __post_init__(self) -> None:
        super().__post_init__()
        problems = []
        if self.contribution_measure not in (DISCOUNTED_ACCURACY, "signal"):
            problems.append(f"contribution_measure={self.contribution_measure!r} must be discounted_accuracy or signal")
        problems += check_exponent(self.divergence_exponent)
        if self.signal not in ("neg_log_kl", "cosine", "combined"):
            problems.append(f"signal={self.signal!r} must be neg_log_kl, cosine or combined")
        if not (math.isfinite(self.spread) and 0.0 <= self.spread <= 1.0):
            problems.append(f"spread={self.spread} must lie in [0, 1] (a fraction of accuracy)")
        grid = self.quota_grid
        if not grid or any(not 0 < q <= 1 for q in grid) or any(b <= a for a, b in itertools.pairwise(grid)):
            problems.append(f"quota_grid={list(grid)} must be non-empty, increasing and within (0, 1]")
        problems += kl_and_layer_problems(self.kl_floor, self.bins, self.histogram_epsilon, self.layer_sizes)
        if problems:
            raise ConfigError(
                f"invalid fair settings: {'; '.join(problems)}",
                hint="e.g. signal: combined, spread: 0.1, quota_grid: [0.005, 0.01, 0.05, 0.1, 1.0]",
            )

    def needs_divergence(self) -> bool:
        """Whether a round measures every client's KL (for the signal or for the contribution)."""
        return self.signal != "cosine" or self.contribution_measure == DISCOUNTED_ACCURACY

    def divergences(self, inputs: RoundInputs, evaluations: list[Evaluation | None]) -> torch.Tensor:
        """``KL_i`` floored at ``kl_floor`` for every evaluated client (NaN for rejected ones)."""
        return client_divergences(self.name, inputs, evaluations, self.bins, self.histogram_epsilon, self.kl_floor)

    def round_signal(
        self, inputs: RoundInputs, global_update: torch.Tensor, eligible: torch.Tensor, divergence: torch.Tensor | None
    ) -> torch.Tensor:
        """This round's ranking signal, rescaled to [0, 1] over the eligible clients (0 for the others).

        ``divergence``: the clients' KL, measured once per round (None only where :meth:`needs_divergence` is false).
        """
        parts = []
        if self.signal in ("cosine", "combined"):
            parts.append(rescale_unit(cosine_to(inputs.updates, global_update), eligible))
        if self.signal in ("neg_log_kl", "combined"):
            assert divergence is not None  # needs_divergence: measured for every signal but the cosine
            parts.append(rescale_unit(-torch.log(divergence), eligible))
        return torch.stack(parts).mean(dim=0)

    def round_contribution(
        self,
        signal: torch.Tensor,
        evaluations: list[Evaluation | None] | None,
        divergence: torch.Tensor | None,
        eligible: torch.Tensor,
    ) -> torch.Tensor:
        """The round's contribution: the rescaled ``signal``, or the discounted accuracy (module docstring)."""
        if self.contribution_measure == "signal":
            return signal
        assert evaluations is not None and divergence is not None  # measured when the measure needs them
        accuracy = torch.tensor([0.0 if e is None else float(e.accuracy) for e in evaluations], dtype=torch.float64)
        return discounted_accuracy(accuracy, divergence, eligible, self.divergence_exponent)

    def check_layers(self, size: int) -> None:
        """A :class:`ConfigError` unless ``layer_sizes`` is empty or splits a model of ``size`` entries."""
        if self.layer_sizes and sum(self.layer_sizes) != size:
            raise ConfigError(
                f"fair layer_sizes add up to {sum(self.layer_sizes)} entries, the model has {size}",
                hint="give the sizes of the model's parameter tensors in order, or leave layer_sizes empty",
            )

    def aggregate(self, inputs: RoundInputs, state: FairState) -> RoundResult[FairState]:
        self.check_layers(inputs.global_params.numel())
        check_state_size(self.name, state.signal_sum, inputs.n_clients)
        initial = inputs.global_params.clone() if state.initial is None else state.initial.to(inputs.global_params)
        weights = data_shares(inputs.data_sizes, inputs.finite)
        global_update = self.aggregation.combine(inputs.updates, weights)
        new_global = inputs.global_params + global_update
        eligible = inputs.finite & (row_norms(inputs.updates) > ZERO_NORM)
        evaluations = divergence = None
        if self.needs_divergence():
            evaluations = inputs.client_evaluations(self.name)
            divergence = self.divergences(inputs, evaluations)
        signal = self.round_signal(inputs, global_update, eligible, divergence)
        signal_sum = signal if state.signal_sum is None else state.signal_sum + signal
        scores = rescale_unit(signal_sum, torch.ones_like(eligible))
        total = new_global - initial
        candidates = initial + sparsify_fractions(total, self.quota_grid, self.layer_sizes)
        curve = [float(e.accuracy) for e in inputs.evaluate_models(self.name, candidates)]
        targets = accuracy_targets(scores, max(curve), self.spread)
        quotas = calibrated_quotas(self.quota_grid, curve, targets)
        rewards = initial + sparsify_fractions(total, quotas.tolist(), self.layer_sizes)
        start = inputs.global_params if inputs.client_params is None else inputs.client_params
        return RoundResult(
            global_params=new_global,
            contribution=self.round_contribution(signal, evaluations, divergence, eligible),
            rewards=None,
            accepted=inputs.finite.clone(),
            state=dataclasses.replace(state, initial=initial, signal_sum=signal_sum),
            weights=weights,
            reward_updates=rewards - start,
        )
