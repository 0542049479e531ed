"""The strategy registry: each built-in strategy's name, lookup by name and listing.

The import graph is one-way: :mod:`fedchain.fl.strategy` is the API,
:mod:`fedchain.fl.strategies` implement it, and this module maps names to them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeVar, overload

from fedchain.config import from_mapping
from fedchain.errors import ConfigError
from fedchain.fl.aggregation import MEAN, AggregationConfig
from fedchain.fl.strategies import CGSV, Fair, FedAVE, FedAvg, FedFAIM, QualityWeighted
from fedchain.fl.strategy import Strategy

#: Every built-in strategy class by its :attr:`Strategy.name`.
STRATEGIES: Mapping[str, type[Strategy]] = {
    cls.name: cls for cls in (FedAvg, QualityWeighted, CGSV, FedFAIM, FedAVE, Fair)
}

#: Any strategy type (:func:`fit_layer_sizes` returns what it was given).
S = TypeVar("S", bound=Strategy)


def strategy_names() -> tuple[str, ...]:
    """The registered strategy names, sorted."""
    return tuple(sorted(STRATEGIES))


# The built-in names give their own class to type checkers; any other name, a Strategy.
@overload
def get_strategy(name: Literal["fedavg"], **options: Any) -> FedAvg: ...
@overload
def get_strategy(name: Literal["quality"], **options: Any) -> QualityWeighted: ...
@overload
def get_strategy(name: Literal["cgsv"], **options: Any) -> CGSV: ...
@overload
def get_strategy(name: Literal["fedfaim"], **options: Any) -> FedFAIM: ...
@overload
def get_strategy(name: Literal["fedave"], **options: Any) -> FedAVE: ...
@overload
def get_strategy(name: Literal["fair"], **options: Any) -> Fair: ...
@overload
def get_strategy(name: str, **options: Any) -> Strategy: ...


def get_strategy(name: str, **options: Any) -> Strategy:
    """The strategy ``name`` configured by ``options`` (its dataclass fields).

    Options may come from YAML: nested mappings (``pruning: {sparsity: 0.5}``)
    become their dataclasses and values are type-checked.
    """
    if name not in STRATEGIES:
        raise ConfigError(
            f"unknown strategy {name!r}",
            hint=f"known strategies: {', '.join(strategy_names())}",
        )
    return from_mapping(STRATEGIES[name], options, prefix=f"{name}.")


def configured_strategy(name: str, options: Mapping[str, Any], aggregation: AggregationConfig = MEAN) -> Strategy:
    """The strategy ``name`` with its ``options`` and a task's (or an experiment's) aggregation rule.

    The rule is a setting of its own (``aggregation:`` in a task spec or an experiment config), so the
    options may not set it too: a :class:`ConfigError` says where it goes.
    """
    if "aggregation" in options:
        raise ConfigError(
            f"strategy {name!r}: aggregation is not a strategy option",
            hint="set it at the top level of the task spec or experiment config (aggregation: {rule: median})",
        )
    return get_strategy(name, **options, aggregation=aggregation)


def fit_layer_sizes(strategy: S, layer_sizes: Sequence[int]) -> S:
    """``strategy`` with the model's layer sizes when it masks rewards per layer and was given none.

    fedave and fair keep each layer's largest entries of an update as a reward, so that every
    layer of a rewarded model moves; without the sizes they fall back to the whole vector. The
    experiments, the aggregator and the auditor all fit the strategy this way, so a reward is
    the same object in each.
    """
    if not isinstance(strategy, FedAVE | Fair) or strategy.layer_sizes:
        return strategy
    return dataclasses.replace(strategy, layer_sizes=tuple(layer_sizes))
