"""Pure numeric kernels: aggregation, contribution, reputation, rewards, pruning.

The public strategy API::

    from fedchain.fl import Validation, get_strategy, round_quality
    strategy = get_strategy("cgsv", gamma0=0.5)
    result = strategy.round(global_params, updates, data_sizes, state=None, validation=Validation(evaluate=...))
    quality = round_quality(result, source="contribution")   # q_i for the chain

See :mod:`fedchain.fl.strategy` for the conventions (shapes, devices, NaN rules).
Names are imported on first use, so that the task spec can read its
:class:`ScreeningConfig` and :class:`AggregationConfig` without loading torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fedchain._lazy import lazy_exports

#: public name -> defining module.
_EXPORTS: dict[str, str] = {
    "CrossTaskPriors": "crosstask",
    "FinishedTask": "crosstask",
    "history_priors": "crosstask",
    "task_similarity": "crosstask",
    "loss_histogram": "divergence",
    "loss_kl": "divergence",
    "accuracy_targets": "fairness",
    "calibrated_quotas": "fairness",
    "rescale_unit": "fairness",
    "jain_index": "metrics",
    "pearson": "metrics",
    "Pruning": "pruning",
    "topology_mask": "pruning",
    "RoundQuality": "quality",
    "loss_ratio": "quality",
    "rescaled_contribution": "quality",
    "round_quality": "quality",
    "to_wad": "quality",
    "BatchEvaluator": "strategy",
    "Evaluation": "strategy",
    "Evaluator": "strategy",
    "RoundInputs": "strategy",
    "RoundResult": "strategy",
    "Strategy": "strategy",
    "StrategyState": "strategy",
    "Validation": "strategy",
    "get_strategy": "registry",
    "strategy_names": "registry",
    "AggregationConfig": "aggregation",
    "NO_SCREENING": "screening",
    "ScreeningConfig": "screening",
    "ScreeningReason": "screening",
    "ScreeningResult": "screening",
    "agreement_with_others": "screening",
    "screen": "screening",
    "screened_updates": "screening",
    "clip_scales": "robust",
    "coordinate_median": "robust",
    "krum_scores": "robust",
    "krum_selection": "robust",
    "leave_one_out_medians": "robust",
    "multi_krum": "robust",
    "norm_clipped_mean": "robust",
    "trimmed_mean": "robust",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from fedchain.fl.aggregation import AggregationConfig
    from fedchain.fl.crosstask import CrossTaskPriors, FinishedTask, history_priors, task_similarity
    from fedchain.fl.divergence import loss_histogram, loss_kl
    from fedchain.fl.fairness import accuracy_targets, calibrated_quotas, rescale_unit
    from fedchain.fl.metrics import jain_index, pearson
    from fedchain.fl.pruning import Pruning, topology_mask
    from fedchain.fl.quality import RoundQuality, loss_ratio, rescaled_contribution, round_quality, to_wad
    from fedchain.fl.registry import get_strategy, strategy_names
    from fedchain.fl.robust import (
        clip_scales,
        coordinate_median,
        krum_scores,
        krum_selection,
        leave_one_out_medians,
        multi_krum,
        norm_clipped_mean,
        trimmed_mean,
    )
    from fedchain.fl.screening import (
        NO_SCREENING,
        ScreeningConfig,
        ScreeningReason,
        ScreeningResult,
        agreement_with_others,
        screen,
        screened_updates,
    )
    from fedchain.fl.strategy import (
        BatchEvaluator,
        Evaluation,
        Evaluator,
        RoundInputs,
        RoundResult,
        Strategy,
        StrategyState,
        Validation,
    )

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
