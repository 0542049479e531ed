"""The mechanism's formulas (DESIGN.md, Tian et al. 2023 eqs. 4-18) against hand-computed values and properties."""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedchain.fl.reputation import (
    WAD,
    ClientReputation,
    MechanismParams,
    RevealedBid,
    auction_utility,
    choose_winner,
    final_bonus,
    fog_cost,
    implied_time_reputation,
    linear_weights,
    loss_reputation,
    loss_reputation_float,
    loss_reputation_with_prior,
    round_payment,
    scale_pro_rata,
    score_round,
    standby_winner,
    time_reputation,
    time_reputation_float,
    total_reputation,
)


def params(**changes: int) -> MechanismParams:
    base: dict[str, Any] = {
        "rounds": 3,
        "expected_duration": 600,  # T = 200 s per round
        "psi": 10**15,
        "phi": 10**12,
        "min_loss_reputation": WAD // 10,
        "min_time_reputation": WAD // 10,
        "min_quality": WAD // 2,
        "max_round_time": 300,
        "reputation_cap": 10 * WAD,
    }
    base.update(changes)
    return MechanismParams(**base)


def test_mechanism_params_are_read_by_field_name_from_task_params() -> None:
    from types import SimpleNamespace

    task = SimpleNamespace(**vars(params()), model_id=b"\0" * 32, client_deposit=7)  # extra fields are ignored
    assert MechanismParams.of(task) == params()


def test_linear_weights_increase_strictly_and_sum_to_one() -> None:
    for n in (1, 2, 5, 40):
        weights = linear_weights(n)
        assert math.isclose(sum(weights), 1.0)
        assert all(a < b for a, b in itertools.pairwise(weights))
    assert linear_weights(3) == pytest.approx((1 / 6, 2 / 6, 3 / 6))


def test_loss_reputation_is_the_linearly_weighted_mean_of_qualities() -> None:
    # Prepare: q = 1.0, 0.5, 2.0 -> (1*1 + 2*0.5 + 3*2) / 6 = 8/6.
    weighted_sum = 1 * WAD + 2 * (WAD // 2) + 3 * 2 * WAD
    # Execute / assert: fixed point rounds 16e18 / 12 down; the float history agrees.
    assert loss_reputation(weighted_sum, 3, 2 * WAD, WAD // 2, 10 * WAD) == 1_333_333_333_333_333_333
    assert loss_reputation_float([1.0, 0.5, 2.0], 0.5) == pytest.approx(8 / 6)


def test_quality_below_q_min_multiplies_the_loss_reputation_by_the_quality() -> None:
    # q = 1.0, 0.2 with q_min 0.5: mean (1 + 2*0.2)/3 = 0.4667, times 0.2 = 0.09333.
    weighted_sum = WAD + 2 * (WAD // 5)
    assert loss_reputation(weighted_sum, 2, WAD // 5, WAD // 2, 10 * WAD) == 93_333_333_333_333_333
    assert loss_reputation_float([1.0, 0.2], 0.5) == pytest.approx(1.4 / 3 * 0.2)


def test_the_prior_counts_in_a_round_at_or_above_q_min_and_not_below() -> None:
    # Prior 2.0, mean term 0.6, q_min 0.5, cap 10: q = 0.8 and q = 0.5 (exactly q_min) give 2.6; q = 0.4 gives 0.6.
    prior, mean_term, q_min, cap = 2 * WAD, 6 * WAD // 10, WAD // 2, 10 * WAD
    assert loss_reputation_with_prior(prior, mean_term, 8 * WAD // 10, q_min, cap) == 26 * WAD // 10
    assert loss_reputation_with_prior(prior, mean_term, q_min, q_min, cap) == 26 * WAD // 10
    assert loss_reputation_with_prior(prior, mean_term, q_min - 1, q_min, cap) == mean_term
    assert loss_reputation_with_prior(prior, mean_term, 0, q_min, cap) == mean_term


def test_a_high_prior_does_not_carry_a_client_through_a_round_below_q_min() -> None:
    # Prior 5.0. Round 1, q = 1.0: r_a = 5 + 1 = 6. Round 2, q = 0.2 < q_min 0.5: the prior is left out,
    # r_a = (1 + 2*0.2)/3 * 0.2 = 0.09333 < r_a_min 0.1: removed, unpaid (with the prior r_a would be 5.0933).
    # Had round 2 been exactly q_min: r_a = 5 + (1 + 2*0.5)/3 = 5.6667.
    prior = 5 * WAD
    first = score_round(ClientReputation(), params(), WAD, 200, True, prior)
    garbage = score_round(first.reputation, params(), WAD // 5, 200, True, prior)
    borderline = score_round(first.reputation, params(), WAD // 2, 200, True, prior)
    rejected = score_round(first.reputation, params(), WAD, 200, False, prior)
    assert first.reputation.loss_reputation == 6 * WAD
    assert garbage.reputation.loss_reputation == 93_333_333_333_333_333
    assert garbage.removed and garbage.payment == 0
    assert borderline.reputation.loss_reputation == prior + 666_666_666_666_666_666
    assert not borderline.removed
    assert rejected.reputation.loss_reputation == 0 and rejected.removed


def test_time_reputation_averages_t_over_round_times_and_penalises_slow_rounds() -> None:
    # T = 600/3 = 200 s; t = 100, 400 -> ratios 2.0, 0.5 -> mean (2 + 2*0.5)/3 = 1.0; 400 > t_max 300 -> * 0.75.
    state = score_round(ClientReputation(), params(), WAD, 100, True).reputation
    state = score_round(state, params(), WAD, 400, True).reputation
    assert state.sum_time_ratio == 2 * WAD + 2 * (WAD // 2)
    assert state.time_reputation == 750_000_000_000_000_000
    assert time_reputation(3 * WAD, 2, 300, 400 * WAD, 10 * WAD) == 750_000_000_000_000_000
    assert time_reputation_float([100, 400], 200, 300) == pytest.approx(0.75)


def test_reputations_and_inputs_are_capped() -> None:
    # A quality of 50 and a 1-second round are both capped at 2.0.
    capped = params(reputation_cap=2 * WAD)
    score = score_round(ClientReputation(), capped, 50 * WAD, 1, True)
    assert score.reputation.sum_quality == 2 * WAD
    assert score.reputation.loss_reputation == 2 * WAD
    assert score.reputation.time_reputation == 2 * WAD


def test_round_payment_is_psi_times_time_reputation_squared_times_loss_reputation() -> None:
    # psi = 1e15 wei, r_t = 0.75, r_a = 0.4 -> 1e15 * 0.5625 * 0.4 = 2.25e14 wei.
    assert round_payment(10**15, 4 * WAD // 10, 3 * WAD // 4, WAD // 10, WAD // 10) == 225 * 10**12


def test_round_payment_is_zero_below_either_threshold() -> None:
    assert round_payment(10**15, WAD // 20, WAD, WAD // 10, WAD // 10) == 0
    assert round_payment(10**15, WAD, WAD // 20, WAD // 10, WAD // 10) == 0


def test_a_rejected_update_scores_quality_zero_and_removes_the_client() -> None:
    # q = 0 < q_min multiplies r_a by 0, below r_a_min = 0.1: removed, no payment.
    score = score_round(ClientReputation(), params(), 3 * WAD, 150, False)
    assert score.reputation.loss_reputation == 0
    assert score.removed and score.payment == 0


def test_score_round_pays_eq15_for_a_client_in_good_standing() -> None:
    # One round: q = 1.0, t = 200 s = T -> r_a = r_t = 1.0 -> payment psi.
    score = score_round(ClientReputation(), params(), WAD, 200, True)
    assert (score.reputation.loss_reputation, score.reputation.time_reputation) == (WAD, WAD)
    assert score.payment == 10**15 and not score.removed


def test_final_bonus_rewards_finishing_before_the_expected_time() -> None:
    # phi = 1e12 wei/s, T_ex - T_r = 150 s, r_at = 0.5 -> 7.5e13 wei; late finishes earn nothing.
    assert final_bonus(10**12, 600, 450, WAD // 2) == 75 * 10**12
    assert final_bonus(10**12, 600, 601, WAD) == 0
    assert total_reputation(WAD // 2, 3 * WAD, 10 * WAD) == 3 * WAD // 2
    # Capped like every reputation (DESIGN.md): r_a = r_t = cap gives cap, not cap squared.
    assert total_reputation(2 * WAD, 2 * WAD, 2 * WAD) == 2 * WAD
    assert total_reputation(3 * WAD, 3 * WAD, 10 * WAD) == 9 * WAD


def test_pro_rata_scaling_never_exceeds_the_budget_and_rounds_down() -> None:
    assert scale_pro_rata([3, 1], 2) == [1, 0]
    assert scale_pro_rata([3, 1], 4) == [3, 1]
    assert scale_pro_rata([10**18, 2 * 10**18, 0], 10**18) == [333_333_333_333_333_333, 666_666_666_666_666_666, 0]


def auction_params(second_price: bool) -> MechanismParams:
    # T = 100/10 = 10 s; c*D = 2*10 = 20 cycles: f = 2 -> T_x = 10 s (r_t 1.0), f = 1 -> 20 s (r_t 0.5).
    return MechanismParams(
        rounds=10,
        expected_duration=100,
        psi=1000,
        phi=0,
        min_loss_reputation=0,
        min_time_reputation=0,
        min_quality=0,
        max_round_time=100,
        reputation_cap=WAD,
        cycles_per_sample=2,
        second_price=second_price,
    )


def test_implied_time_reputation_follows_eq11() -> None:
    assert implied_time_reputation(auction_params(False), 10, 2) == WAD
    assert implied_time_reputation(auction_params(False), 10, 1) == WAD // 2


def test_auction_utility_is_payment_minus_price() -> None:
    # U_A = 1000 * 1^2 * 1 - 300 = 700; U_B = 1000 * 0.5^2 * 1 - 100 = 150.
    p = auction_params(False)
    assert auction_utility(p, WAD, 10, RevealedBid(2, 300)) == 700
    assert auction_utility(p, WAD, 10, RevealedBid(1, 100)) == 150


def test_first_price_winner_is_paid_its_bid_and_second_price_the_runner_up_margin() -> None:
    bids = [RevealedBid(1, 100), None, RevealedBid(2, 300)]
    assert choose_winner(auction_params(False), WAD, 10, bids).__dict__ == {"winner": 2, "price": 300}
    # Second price: 300 + (700 - 150) = 850, the price at which the client is indifferent.
    assert choose_winner(auction_params(True), WAD, 10, bids).__dict__ == {"winner": 2, "price": 850}
    assert choose_winner(auction_params(True), WAD, 10, [None, RevealedBid(2, 300)]).price == 300
    assert choose_winner(auction_params(False), WAD, 10, [None]).winner is None


def test_ties_go_to_the_earliest_bid() -> None:
    bids = [RevealedBid(2, 300), RevealedBid(2, 300)]
    assert choose_winner(auction_params(False), WAD, 10, bids).winner == 0


def test_standby_winner_skips_ineligible_and_too_expensive_bids() -> None:
    bids = [RevealedBid(2, 300), RevealedBid(2, 900), RevealedBid(1, 100), None]
    assert standby_winner(auction_params(False), WAD, 10, bids, [False, True, True, True], 300) == 2
    assert standby_winner(auction_params(False), WAD, 10, bids, [False, True, False, True], 300) is None


def test_a_joined_client_starts_at_reputation_one_and_earns_no_bonus_until_scored() -> None:
    joined = ClientReputation.joined(params(reputation_cap=WAD // 2))
    assert (joined.loss_reputation, joined.time_reputation, joined.rounds) == (WAD // 2, WAD // 2, 0)
    assert joined.bonus(params(), 100) == 0
    scored = score_round(ClientReputation.joined(params()), params(), WAD, 200, True).reputation
    # phi * (600 - 100) * (1.0 * 1.0) = 1e12 * 500.
    assert scored.bonus(params(), 100) == 500 * 10**12


def test_fog_cost_is_half_alpha_c_d_f_squared() -> None:
    assert fog_cost(2.0, 1.0, 10.0, 3.0) == 90.0


@settings(max_examples=60, derandomize=True, deadline=None)
@given(
    qualities=st.lists(st.floats(0.0, 3.0), min_size=1, max_size=12),
    times=st.lists(st.integers(1, 1000), min_size=12, max_size=12),
)
def test_fixed_point_running_sums_match_the_float_history(qualities: list[float], times: list[int]) -> None:
    # Prepare: each round's quality in fixed point and its time in seconds.
    p = params(rounds=12, expected_duration=2400, min_loss_reputation=0, min_time_reputation=0)
    state = ClientReputation()
    wads = [int(q * WAD) for q in qualities]
    # Execute: the contract's O(1) update, one round at a time.
    for q in wads:
        state = score_round(state, p, q, times[state.rounds], True).reputation
    # Assert: the same as the paper's formulas over the whole history, to float precision.
    history = [w / WAD for w in wads]
    spent = times[: len(wads)]
    assert state.loss_reputation / WAD == pytest.approx(loss_reputation_float(history, 0.5, 10.0), rel=1e-9, abs=1e-15)
    assert state.time_reputation / WAD == pytest.approx(
        time_reputation_float(spent, 200.0, 300.0, 10.0), rel=1e-9, abs=1e-15
    )


@settings(max_examples=60, derandomize=True, deadline=None)
@given(amounts=st.lists(st.integers(0, 10**24), max_size=20), available=st.integers(0, 10**24))
def test_pro_rata_scaling_pays_at_most_the_budget(amounts: list[int], available: int) -> None:
    scaled = scale_pro_rata(amounts, available)
    if sum(amounts) <= available:
        assert scaled == amounts
    else:
        assert sum(scaled) <= available
    assert all(0 <= s <= a for s, a in zip(scaled, amounts, strict=True))


def _removed_in(mechanism: MechanismParams, qualities: list[float]) -> int | None:
    """The round in which a client scoring ``qualities`` (one a round, the same round time each) is removed."""
    from fedchain.experiments.robustness import neutral_round_time
    from fedchain.fl.quality import to_wad

    state = ClientReputation.joined(mechanism)
    for k, quality in enumerate(to_wad(qualities), start=1):
        scored = score_round(state, mechanism, quality, neutral_round_time(mechanism), True)
        if scored.removed:
            return k
        state = scored.reputation
    return None


def test_the_default_quality_floor_keeps_a_client_through_one_poor_round_but_not_through_poor_rounds() -> None:
    """Why DEFAULT_QUALITY_FLOOR sits between r_a_min and its square root, on a default task's terms."""
    from fedchain.experiments.robustness import mechanism_params
    from fedchain.fl.floor import DEFAULT_QUALITY_FLOOR

    mechanism = mechanism_params(rounds=10)
    r_a_min = mechanism.min_loss_reputation / WAD
    assert r_a_min < DEFAULT_QUALITY_FLOOR < math.sqrt(r_a_min)

    def removed_in(qualities: list[float]) -> int | None:
        return _removed_in(mechanism, qualities)

    assert removed_in([1.0] * 4 + [0.02]) == 5  # the seed's measure: one skewed round costs the deposit
    assert removed_in([1.0] * 4 + [DEFAULT_QUALITY_FLOOR] + [1.0] * 5) is None  # floored: the client stays
    assert removed_in([1.0] * 4 + [DEFAULT_QUALITY_FLOOR] * 2 + [1.0] * 4) is None
    assert removed_in([1.0] + [DEFAULT_QUALITY_FLOOR] * 9) is not None  # a client poor round after round falls


@pytest.mark.parametrize(
    ("min_quality", "min_loss_reputation"), [(0.5, 0.1), (0.3, 0.05), (0.7, 0.2), (0.9, 0.1), (0.5, 0.3)]
)
def test_the_early_floor_keeps_one_poor_round_from_removing_a_client_whose_earlier_rounds_reached_q_min(
    min_quality: float, min_loss_reputation: float
) -> None:
    """protective_floor is the least quality that does it, in the chain's own fixed point, in every round."""
    from fedchain.experiments.robustness import mechanism_params
    from fedchain.fl.floor import protective_floor, round_floor
    from fedchain.fl.quality import to_wad

    mechanism = dataclasses.replace(
        mechanism_params(rounds=12),
        min_quality=to_wad([min_quality])[0],
        min_loss_reputation=to_wad([min_loss_reputation])[0],
    )
    thresholds = {"min_quality": min_quality, "min_loss_reputation": min_loss_reputation}

    def removed_in(qualities: list[float]) -> int | None:
        return _removed_in(mechanism, qualities)

    for n in range(1, 13):
        floor = protective_floor(n, **thresholds)
        assert removed_in([min_quality] * (n - 1) + [floor]) is None, n
        if floor < min_quality:  # the least: a thousandth less removes the client
            assert removed_in([min_quality] * (n - 1) + [floor - 0.001]) == n, n
    if min_loss_reputation < min_quality**2:  # a client at the floor round after round still falls, by round 3
        floors = [round_floor(0.2, n, early=True, **thresholds) for n in range(1, 13)]
        removed = removed_in(floors)
        assert removed is not None and removed <= 3


def test_the_grace_keeps_an_odd_poor_round_from_decaying_r_a_and_leaves_a_flipper_as_it_was() -> None:
    """Through the chain's fixed point with a default task's terms: a client poor in rounds 2, 5 and 8 (0.05,
    its model still classifies) is graced twice and stays; a flipper (poor every round, its model's accuracy
    a tenth of the others') gets no grace and is removed in the round it was removed in without one."""
    import torch

    from fedchain.experiments.robustness import mechanism_params
    from fedchain.fl.floor import round_floor
    from fedchain.fl.quality import GraceMemory, GraceRule, graced

    mechanism = mechanism_params(rounds=10)
    thresholds = {"min_quality": 0.5, "min_loss_reputation": 0.1}

    def scored(own: list[float], accuracy: float, allowance: int) -> list[float]:
        memory, out = GraceMemory(), []
        for n, q in enumerate(own, start=1):
            values = torch.tensor([q, 1.0, 1.0], dtype=torch.float64)
            accuracies = torch.tensor([accuracy, 0.9, 0.9], dtype=torch.float64)
            values, memory = graced(
                values, torch.ones(3, dtype=torch.bool), accuracies, GraceRule(0.5, allowance), memory
            )
            out.append(max(float(values[0]), round_floor(0.2, n, early=True, **thresholds)))
        return out

    skewed = [1.0, 0.05, 1.0, 1.0, 0.05, 1.0, 1.0, 0.05, 1.0, 1.0]
    with_grace = scored(skewed, accuracy=0.4, allowance=2)
    assert with_grace[1] == with_grace[4] == 0.5 and with_grace[7] < 0.5  # two graces, then as it is
    assert _removed_in(mechanism, with_grace) is None
    flipper = [0.1] * 10
    assert scored(flipper, accuracy=0.09, allowance=2) == scored(flipper, accuracy=0.09, allowance=0)
    assert _removed_in(mechanism, scored(flipper, accuracy=0.09, allowance=2)) == 2
