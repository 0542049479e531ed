"""Pure numeric kernels: aggregation, contribution, reputation, rewards, pruning.

The public strategy API::

    from fedchain.fl import get_strategy, Validation, Evaluation
    strategy = get_strategy("fedavg")
    result = strategy.round(global_params, updates, data_sizes, state=None)
"""

from fedchain.fl.pruning import Pruning
from fedchain.fl.strategy import (
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
    "Evaluation",
    "Evaluator",
    "Pruning",
    "RoundInputs",
    "RoundResult",
    "Strategy",
    "StrategyState",
    "Validation",
    "get_strategy",
    "strategy_names",
]
