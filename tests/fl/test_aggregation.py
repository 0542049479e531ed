"""The aggregation rule as an option of the strategies: hand-built updates, refusals, the mean unchanged."""

from __future__ import annotations

import pytest
import torch

from fedchain.errors import ConfigError
from fedchain.fl import get_strategy
from fedchain.fl.aggregation import MEAN, AggregationConfig
from fedchain.fl.registry import configured_strategy
from fedchain.fl.strategy import Evaluation, Validation

#: Four honest updates near [1, 1] and one attacker at [-100, 100]; equal data sizes.
HONEST = torch.tensor([[1.0, 1.0], [1.2, 0.8], [0.8, 1.2], [1.0, 1.1]])
ATTACKER = torch.tensor([[-100.0, 100.0]])
UPDATES = torch.cat([HONEST, ATTACKER])
SIZES = [10.0] * 5
GLOBAL = torch.zeros(2)


def fedavg_update(aggregation: AggregationConfig) -> torch.Tensor:
    strategy = get_strategy("fedavg", aggregation=aggregation)
    return strategy.round(GLOBAL, UPDATES, SIZES).global_params - GLOBAL


def test_the_default_rule_is_the_weighted_mean_of_fedavg() -> None:
    torch.testing.assert_close(fedavg_update(MEAN), UPDATES.mean(dim=0))


def test_the_coordinate_median_ignores_one_attacker_of_five() -> None:
    """Per coordinate the middle of five values: x from (-100, 0.8, 1, 1, 1.2) is 1; y from (0.8, 1, 1.1, 1.2, 100) is 1.1."""
    torch.testing.assert_close(fedavg_update(AggregationConfig(rule="median")), torch.tensor([1.0, 1.1]))


def test_the_trimmed_mean_cuts_one_value_of_five_from_each_end() -> None:
    """trim 0.2 of 5 cuts 1 each end: x mean(0.8, 1, 1) ; y mean(1, 1.1, 1.2)."""
    expected = torch.tensor([(0.8 + 1.0 + 1.0) / 3, (1.0 + 1.1 + 1.2) / 3])

    torch.testing.assert_close(fedavg_update(AggregationConfig(rule="trimmed_mean", trim_fraction=0.2)), expected)


def test_multi_krum_averages_the_honest_cluster_without_the_attacker() -> None:
    aggregated = fedavg_update(AggregationConfig(rule="multi_krum", krum_byzantine=1))  # keeps 5 - 1 = 4

    torch.testing.assert_close(aggregated, HONEST.mean(dim=0))


def test_krum_keeps_the_single_update_closest_to_the_others() -> None:
    """f=1: each scores its 5-1-2 = 2 nearest squared distances: [1, 1.1] 0.01 + 0.05, the lowest ([1, 1] 0.09)."""
    aggregated = fedavg_update(AggregationConfig(rule="multi_krum", krum_byzantine=1, krum_keep=1))

    torch.testing.assert_close(aggregated, torch.tensor([1.0, 1.1]))


def test_norm_clipping_bounds_what_the_attacker_adds_to_the_mean() -> None:
    """Clip to norm 2: the honest updates (norms about 1.4-1.5) stay; the attacker becomes [-sqrt 2, sqrt 2]."""
    root2 = 2**0.5
    expected = (HONEST.sum(dim=0) + torch.tensor([-root2, root2])) / 5

    torch.testing.assert_close(fedavg_update(AggregationConfig(clip_norm=2.0)), expected)


def test_a_rule_ignores_rejected_updates() -> None:
    """A NaN update is rejected by the strategy; the median of the four others is then their mean of the middle two."""
    updates = torch.cat([HONEST, torch.full((1, 2), float("nan"))])

    result = get_strategy("fedavg", aggregation=AggregationConfig(rule="median")).round(GLOBAL, updates, SIZES)

    torch.testing.assert_close(result.global_params, torch.tensor([1.0, 1.05]))
    assert result.accepted.tolist() == [True, True, True, True, False]


def test_quality_weighting_combines_with_the_median() -> None:
    validation = Validation(
        client_evaluations=[Evaluation(loss=1.0, accuracy=0.9)] * 4 + [Evaluation(loss=9.0, accuracy=0.1)]
    )
    strategy = get_strategy("quality", aggregation=AggregationConfig(rule="median"))

    result = strategy.round(GLOBAL, UPDATES, SIZES, validation=validation)

    torch.testing.assert_close(result.global_params, torch.tensor([1.0, 1.1]))


def test_fedfaim_aggregates_its_passed_updates_with_the_rule() -> None:
    """Every model evaluates alike, so all five pass fedfaim's (plain) check; the median then ignores the attacker."""
    validation = Validation(evaluate=lambda params: Evaluation(loss=1.0, accuracy=0.5))
    strategy = get_strategy(
        "fedfaim", significance=0.0, outlier_spread=None, aggregation=AggregationConfig(rule="median")
    )

    result = strategy.round(GLOBAL, UPDATES, SIZES, validation=validation)

    assert result.accepted.all()
    torch.testing.assert_close(result.global_params, torch.tensor([1.0, 1.1]))


@pytest.mark.parametrize("name", ["cgsv", "fedave"])
@pytest.mark.parametrize("aggregation", [AggregationConfig(rule="median"), AggregationConfig(clip_norm=1.0)])
def test_strategies_that_normalise_updates_refuse_a_robust_rule_and_name_what_works(
    name: str, aggregation: AggregationConfig
) -> None:
    with pytest.raises(ConfigError, match="plain mean") as caught:
        get_strategy(name, aggregation=aggregation)

    assert "fedavg" in caught.value.hint and "fedfaim" in caught.value.hint and "quality" in caught.value.hint


def test_strategies_take_the_rule_from_yaml_style_options() -> None:
    strategy = configured_strategy("fedavg", {}, AggregationConfig(rule="trimmed_mean", trim_fraction=0.1))

    assert strategy.aggregation == AggregationConfig(rule="trimmed_mean", trim_fraction=0.1)
    assert get_strategy("fedavg", aggregation={"rule": "median"}).aggregation.rule == "median"


def test_the_rule_is_no_strategy_option_of_its_own() -> None:
    with pytest.raises(ConfigError, match="not a strategy option") as caught:
        configured_strategy("fedavg", {"aggregation": {"rule": "median"}})

    assert "top level" in caught.value.hint


@pytest.mark.parametrize(
    "settings",
    [
        {"rule": "mode"},
        {"trim_fraction": 0.5},
        {"trim_fraction": -0.1},
        {"krum_byzantine": -1},
        {"krum_keep": 0},
        {"clip_norm": 0.0},
        {"clip_norm": float("inf")},
    ],
)
def test_settings_outside_their_range_are_refused(settings: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        AggregationConfig(**settings)  # type: ignore[arg-type]


def test_the_fair_protocol_takes_the_rule_for_its_global_model_as_fedavg_does() -> None:
    validation = Validation(evaluate=lambda params: Evaluation(loss=1.0, accuracy=0.5))
    rule = AggregationConfig(rule="median")
    fair = get_strategy("fair", signal="cosine", contribution_measure="signal", aggregation=rule)

    result = fair.round(GLOBAL, UPDATES, SIZES, validation=validation)

    expected = get_strategy("fedavg", aggregation=rule).round(GLOBAL, UPDATES, SIZES).global_params
    torch.testing.assert_close(result.global_params, expected)
    torch.testing.assert_close(result.global_params, torch.tensor([1.0, 1.1]))
