"""Pure numeric kernels: aggregation, contribution, reputation, rewards, pruning.

The public strategy API::

    from fedchain.fl import Validation, get_strategy, round_quality
    strategy = get_strategy("cgsv", gamma0=0.5)
    result = strategy.round(global_params, updates, data_sizes, state=None)
    quality = round_quality(result, source="contribution")   # q_i for the chain

See :mod:`fedchain.fl.strategy` for the conventions (shapes, devices, NaN rules).
"""

from fedchain.fl.crosstask import CrossTaskPriors, FinishedTask, history_priors, task_similarity
from fedchain.fl.divergence import loss_histogram, loss_kl
from fedchain.fl.metrics import jain_index, pearson
from fedchain.fl.pruning import Pruning, topology_mask
from fedchain.fl.quality import RoundQuality, loss_ratio, rescaled_contribution, round_quality, to_wad
from fedchain.fl.strategy import (
    BatchEvaluator,
    Evaluation,
    Evaluator,
    RoundInputs,
    RoundResult,
    Strategy,
    StrategyState,
    Validation,
    get_strategy,
    strategy_names,
)

__all__ = [
    "BatchEvaluator",
    "CrossTaskPriors",
    "Evaluation",
    "Evaluator",
    "FinishedTask",
    "Pruning",
    "RoundInputs",
    "RoundQuality",
    "RoundResult",
    "Strategy",
    "StrategyState",
    "Validation",
    "get_strategy",
    "history_priors",
    "jain_index",
    "loss_histogram",
    "loss_kl",
    "loss_ratio",
    "pearson",
    "rescaled_contribution",
    "round_quality",
    "strategy_names",
    "task_similarity",
    "to_wad",
    "topology_mask",
]
