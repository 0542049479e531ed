"""The aggregation rule of a task: how a strategy combines the updates it accepted (DESIGN.md, Robustness).

A strategy decides who is aggregated and with which weight (FedAvg's data
shares, Tian's ``q_i |D_i|``, FedFAIM's softmax); :class:`AggregationConfig`
decides how those updates become the round's global update. ``mean`` is the
weighted sum every strategy always computed (bit for bit); the robust rules
are the kernels of :mod:`fedchain.fl.robust`, with Flower's definitions:

- ``median``: the coordinate-wise median of the accepted updates, unweighted
  (Flower's ``FedMedian``; a weight would let a client that claims a large
  data set move the median on its own);
- ``trimmed_mean``: per coordinate, the mean after cutting ``trim_fraction``
  of the accepted values from each end, unweighted (Flower's ``FedTrimmedAvg``,
  whose ``beta`` is ``trim_fraction``);
- ``multi_krum``: the strategy's weighted mean of the ``krum_keep`` accepted
  updates with the lowest Krum scores, tolerating ``krum_byzantine`` attackers
  (Flower's ``Krum`` with ``num_malicious_clients`` and ``num_clients_to_keep``;
  ``krum_keep`` None keeps ``m - krum_byzantine`` of the ``m`` accepted,
  Blanchard et al.'s Multi-Krum);
- ``clip_norm`` (with any rule): every accepted update is first scaled down to
  norm at most ``clip_norm`` (the fixed clipping of Flower's differential-privacy
  wrappers).

The strategies that normalise every update to a length of their own (cgsv,
fedave) and weigh them by their own scores take ``mean`` only: a median of
unit vectors is no longer what their contribution scores measure.

The config is a field of the task spec (:class:`fedchain.taskspec.TaskSpec`,
``aggregation:``) and of an experiment's config, and reaches the strategy as
its ``aggregation`` option, so the aggregator, ``simulate`` and the auditor
combine updates with the same code. This module imports torch only when it
aggregates: the task commands read the config without it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from fedchain.errors import ConfigError

if TYPE_CHECKING:
    import torch

AggregationRule = Literal["mean", "median", "trimmed_mean", "multi_krum"]

#: The rules, in the order the docs list them.
AGGREGATION_RULES: tuple[AggregationRule, ...] = ("mean", "median", "trimmed_mean", "multi_krum")


@dataclass(frozen=True)
class AggregationConfig:
    """How a strategy's accepted updates become the global update (module docstring).

    Attributes:
        rule: ``mean`` (the strategy's weighted mean), ``median``, ``trimmed_mean`` or ``multi_krum``.
        trim_fraction: ``trimmed_mean``: the fraction of the accepted values cut from each end of every
            coordinate, in [0, 0.5); 0.2 (Flower's default) cuts 2 of 10 from each end.
        krum_byzantine: ``multi_krum``: f, the attackers the scores tolerate; 3 covers the 30% of 10
            clients that ``reproduce robustness`` measures.
        krum_keep: ``multi_krum``: how many of the lowest scores are averaged; None: ``m - f`` of the ``m``
            accepted updates (Multi-Krum); 1: Krum, the single best update.
        clip_norm: scale every accepted update down to at most this Euclidean norm first (any rule);
            None: no clipping. An absolute norm: it depends on the model and the learning rate (screening's
            ``clip_to_median_norm`` is the relative form).
    """

    rule: AggregationRule = "mean"
    trim_fraction: float = 0.2
    krum_byzantine: int = 3
    krum_keep: int | None = None
    clip_norm: float | None = None

    def __post_init__(self) -> None:
        if self.rule not in AGGREGATION_RULES:
            raise ConfigError(
                f"unknown aggregation rule {self.rule!r}", hint=f"use one of {', '.join(AGGREGATION_RULES)}"
            )
        if not 0.0 <= self.trim_fraction < 0.5:
            raise ConfigError(
                f"aggregation.trim_fraction must be in [0, 0.5), got {self.trim_fraction}",
                hint="the fraction cut from EACH end; 0.2 is the default",
            )
        if self.krum_byzantine < 0:
            raise ConfigError(
                f"aggregation.krum_byzantine must be >= 0, got {self.krum_byzantine}", hint="3 is the default"
            )
        if self.krum_keep is not None and self.krum_keep < 1:
            raise ConfigError(
                f"aggregation.krum_keep must be at least 1 or None, got {self.krum_keep}",
                hint="1 is Krum; None keeps all but krum_byzantine of the accepted updates",
            )
        if self.clip_norm is not None and not (self.clip_norm > 0 and math.isfinite(self.clip_norm)):
            raise ConfigError(
                f"aggregation.clip_norm must be a positive finite norm or None, got {self.clip_norm}",
                hint="None does not clip",
            )

    @property
    def is_mean(self) -> bool:
        """Whether this is the plain weighted mean, without clipping (what every strategy accepts)."""
        return self.rule == "mean" and self.clip_norm is None

    def combine(self, updates: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """The global update ``[d]`` from ``updates [n, d]`` and the strategy's ``weights [n]``.

        Rows with weight 0 (rejected, screened out) take no part; the weights are the
        strategy's, normalised to sum 1 (or all 0: the zero update).
        """
        import torch

        from fedchain.fl.aggregate import row_norms, weighted_sum
        from fedchain.fl.robust import clip_scales, coordinate_median, multi_krum, trimmed_mean

        if self.is_mean:
            return weighted_sum(updates, weights)
        mask = (weights > 0).cpu()
        if not bool(mask.any()):
            return updates.new_zeros(updates.shape[1])
        if self.clip_norm is not None:
            scales = torch.where(mask, clip_scales(row_norms(updates), self.clip_norm), torch.ones_like(weights))
            updates = updates * scales.to(device=updates.device, dtype=updates.dtype)[:, None]
        equal = torch.ones_like(weights)
        if self.rule == "median":
            return coordinate_median(updates, equal, mask)
        if self.rule == "trimmed_mean":
            return trimmed_mean(updates, equal, mask, beta=self.trim_fraction)
        if self.rule == "multi_krum":
            present = int(mask.sum())
            keep = self.krum_keep if self.krum_keep is not None else max(1, present - self.krum_byzantine)
            return multi_krum(updates, weights, mask, f=self.krum_byzantine, to_keep=keep)
        return weighted_sum(updates, weights)  # mean with clipping


#: The plain weighted mean: what a task without an ``aggregation`` setting uses.
MEAN = AggregationConfig()


__all__ = ["AGGREGATION_RULES", "MEAN", "AggregationConfig", "AggregationRule"]
