"""The fog node's cost model (eqs. 11-12) and its rational bid, by hand and as properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fedchain.errors import ConfigError
from fog.bidding import MAX_PRICE, CostModel, decide_bid


def test_time_and_cost_follow_eqs_11_and_12_by_hand() -> None:
    # prepare: f = 2e9 Hz, alpha = 1e-11, the task's c = 1000 cycles per sample, D = 600 samples
    model = CostModel(frequency=2 * 10**9, alpha=1e-11, margin=0.5)

    # execute / assert: T = c D / f = 6e5 / 2e9 = 3e-4 s; E = alpha/2 c D f^2 = 5e-12 * 6e5 * 4e18 = 1.2e13 wei
    assert model.training_time(600, 1000) == pytest.approx(3e-4)
    assert model.cost(600, 1000) == pytest.approx(1.2e13)
    assert 18_000_000_000_000 <= model.price(600, 1000) <= 18_000_000_000_001


def test_own_cycles_per_sample_replace_the_tasks() -> None:
    model = CostModel(frequency=10**9, alpha=2e-18, cycles_per_sample=10)

    assert model.training_time(100, 1000) == pytest.approx(1e-6)
    assert model.cost(100, 1000) == pytest.approx(1e-18 * 10 * 100 * 1e18)


@given(
    frequency=st.integers(1, 10**12),
    alpha=st.floats(0, 1e-6, allow_nan=False),
    cycles=st.integers(1, 10**6),
    data_size=st.integers(1, 10**6),
    margin=st.floats(0, 10, allow_nan=False),
)
def test_the_bid_price_is_never_below_the_cost(
    frequency: int, alpha: float, cycles: int, data_size: int, margin: float
) -> None:
    model = CostModel(frequency=frequency, alpha=alpha, margin=margin)

    assert model.price(data_size, cycles) >= model.cost(data_size, cycles)


def test_a_negative_margin_is_refused_as_irrational() -> None:
    with pytest.raises(ConfigError, match="margin"):
        CostModel(margin=-0.01)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"active_jobs": 3}, "busy"),
        ({"round_duration": 1, "data_size": 10**7}, "too slow"),
        ({"fog_deposit": 10**18 + 1}, "deposit"),
    ],
)
def test_no_bid_for_a_job_it_cannot_serve(change: dict[str, int], reason: str) -> None:
    job = {
        "data_size": 600,
        "task_cycles_per_sample": 1000,
        "round_duration": 60,
        "fog_deposit": 10**16,
        "active_jobs": 0,
        "max_jobs": 3,
        "max_deposit": 10**18,
    }

    decision = decide_bid(CostModel(frequency=10**9), **{**job, **change})

    assert not decision.bid and reason in decision.reason


def test_a_price_too_large_for_a_bid_is_not_bid() -> None:
    model = CostModel(frequency=10**12, alpha=1.0)

    decision = decide_bid(
        model,
        data_size=10**6,
        task_cycles_per_sample=10**6,
        round_duration=10**9,
        fog_deposit=0,
        active_jobs=0,
        max_jobs=1,
        max_deposit=0,
    )

    assert decision.price > MAX_PRICE and not decision.bid


def test_a_servable_job_is_bid_at_cost_plus_margin() -> None:
    decision = decide_bid(
        CostModel(frequency=10**9, alpha=1e-11, margin=0.1),
        data_size=600,
        task_cycles_per_sample=1000,
        round_duration=60,
        fog_deposit=10**16,
        active_jobs=0,
        max_jobs=1,
        max_deposit=10**18,
    )

    # E = 5e-12 * 6e5 * 1e18 = 3e12 wei; price = ceil(1.1 E), within a wei of float rounding
    assert decision.bid and decision.reason == ""
    assert decision.cost == pytest.approx(3e12)
    assert 3_300_000_000_000 <= decision.price <= 3_300_000_000_001


def test_a_token_task_is_priced_at_the_nodes_rate_rounded_up_and_its_deposit_limit_rounded_down() -> None:
    # prepare: the job above (E = 3e12 wei, price 3.3e12 wei); 3000 USDC (6 decimals) for one ether
    rate = 3000 * 10**6
    job = {"data_size": 600, "task_cycles_per_sample": 1000, "round_duration": 60, "active_jobs": 0, "max_jobs": 1}
    model = CostModel(frequency=10**9, alpha=1e-11, margin=0.1)

    # execute
    decision = decide_bid(model, **job, fog_deposit=30 * 10**6, max_deposit=10**16, units_per_ether=rate)
    too_dear = decide_bid(model, **job, fog_deposit=30 * 10**6 + 1, max_deposit=10**16, units_per_ether=rate)

    # assert: 3.3e12 wei x 3e9 / 1e18 = 9900 units, rounded up (the wei price may be a wei over: then 9901), never
    # below the cost of 9000 units; the limit of 0.01 ether is 30 USDC, so a deposit a unit over it gets no bid
    assert decision.bid and 9900 <= decision.price <= 9901 and decision.cost == pytest.approx(9000.0)
    assert not too_dear.bid and "over the limit of 30000000" in too_dear.reason
