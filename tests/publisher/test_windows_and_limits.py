"""Which task windows a chain's block clock allows, and which terms the contracts can hold (pure: no chain).

The smallest workable windows are hand-computed from the rules in
fedchain.publisher.terms: bidding and reveal (confirmations + 3) blocks, a
round the expected training time T = expected_duration / rounds plus
(confirmations + 2) blocks, a time tolerance of one block, a challenge window
10 s for a client to re-score its entry plus (confirmations + 3) blocks.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from fedchain.chain.blocktime import BlockInterval
from fedchain.errors import ConfigError, TermOutOfRange
from fedchain.fl import reputation
from fedchain.publisher import terms
from fedchain.publisher.terms import (
    MAX_BUDGET,
    PublishConfig,
    TaskTerms,
    budget_warning,
    check_windows,
    load_publish_config,
    windows_error,
)

ETHEREUM = BlockInterval(seconds=12.0, on_demand=False, gaps=19)
L2 = BlockInterval(seconds=2.0, on_demand=False, gaps=19)
AUTOMINE = BlockInterval(seconds=0.0, on_demand=True, gaps=19)
CONFIGS = Path(__file__).parents[2] / "configs" / "system"

#: T = 600 / 5 = 120 s of training per round.
TERMS = TaskTerms(
    rounds=5, expected_duration=600, bidding_duration=30, reveal_duration=30, round_duration=120, time_tolerance=5
)


def test_on_a_12_s_chain_at_depth_2_each_short_window_is_named_with_its_smallest_workable_value() -> None:
    problems = check_windows(TERMS, ETHEREUM, confirmations=2)

    assert [(p.name, p.value, p.smallest, p.blocks) for p in problems] == [
        ("bidding_duration", 30, 60, 5),  # (2 + 3) blocks x 12 s
        ("reveal_duration", 30, 60, 5),
        ("round_duration", 120, 168, 4),  # T = 120 s + (2 + 2) blocks x 12 s
        ("time_tolerance", 5, 12, 1),
    ]


def test_windows_exactly_at_the_smallest_workable_values_pass_and_one_second_less_does_not() -> None:
    enough = TaskTerms(
        rounds=5, expected_duration=600, bidding_duration=60, reveal_duration=60, round_duration=168, time_tolerance=12
    )
    short = TaskTerms(
        rounds=5, expected_duration=600, bidding_duration=59, reveal_duration=60, round_duration=167, time_tolerance=12
    )

    assert check_windows(enough, ETHEREUM, confirmations=2) == []
    assert [p.name for p in check_windows(short, ETHEREUM, confirmations=2)] == ["bidding_duration", "round_duration"]


def test_on_a_2_s_chain_the_same_windows_need_far_fewer_seconds() -> None:
    problems = check_windows(TERMS, L2, confirmations=5)

    # bidding and reveal (5 + 3) x 2 = 16 s <= 30; the round 120 + (5 + 2) x 2 = 134 s > 120; tolerance 2 s <= 5
    assert [(p.name, p.smallest) for p in problems] == [("round_duration", 134)]
    assert [(p.name, p.smallest, p.blocks) for p in check_windows(TERMS, L2, confirmations=0)] == [
        ("round_duration", 124, 2)
    ]


def test_blocks_faster_than_a_second_round_their_windows_up_to_whole_seconds() -> None:
    arbitrum = BlockInterval(seconds=0.25, on_demand=False, gaps=19)
    terms = TaskTerms(
        rounds=1, expected_duration=10, bidding_duration=1, reveal_duration=1, round_duration=11, time_tolerance=1
    )

    assert check_windows(terms, arbitrum, confirmations=0) == []  # 3 x 0.25 s -> 1 s; 10 s + 2 x 0.25 s -> 11 s
    # bidding and reveal 5 x 0.25 s -> 2 s; the round 10 s + 4 x 0.25 s = 11 s still fits
    assert [(p.name, p.smallest) for p in check_windows(terms, arbitrum, confirmations=2)] == [
        ("bidding_duration", 2),
        ("reveal_duration", 2),
    ]


def test_an_automining_chain_accepts_every_window_it_accepts_today() -> None:
    tightest = TaskTerms(
        rounds=1, expected_duration=1000, bidding_duration=1, reveal_duration=1, round_duration=1, time_tolerance=0
    )

    assert check_windows(tightest, AUTOMINE, confirmations=0) == []
    assert check_windows(tightest, AUTOMINE, confirmations=12) == []


def test_the_refusal_names_the_chain_each_window_its_flag_and_config_key() -> None:
    problems = check_windows(TERMS, ETHEREUM, confirmations=2)

    text = str(windows_error(problems, ETHEREUM, confirmations=2))

    assert "a block every 12 s, agents acting at 2 confirmations" in text
    assert "bidding_duration 30 s is too short: at least 60 s (5 blocks)" in text
    assert "round_duration 120 s is too short: at least 168 s (120 s + 4 blocks)" in text
    assert "--bidding-duration (terms.bidding_duration)" in text and "--time-tolerance (terms.time_tolerance)" in text
    assert "hint:" in text


def test_a_negative_depth_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="confirmations"):
        check_windows(TERMS, ETHEREUM, confirmations=-1)
    with pytest.raises(ConfigError, match="confirmations"):
        PublishConfig(confirmations=-1)


@pytest.mark.parametrize(("name", "chain", "depth"), [("task.yaml", ETHEREUM, 2), ("l2.yaml", L2, 5)])
def test_the_example_public_chain_configs_fit_their_chains(name: str, chain: BlockInterval, depth: int) -> None:
    config = load_publish_config(CONFIGS / name)

    assert config.confirmations == depth
    assert check_windows(config.terms, chain, config.confirmations) == []


def test_a_budget_of_2_to_the_96_wei_is_refused_and_one_wei_less_is_held() -> None:
    assert PublishConfig(budget=MAX_BUDGET).budget == 2**96 - 1

    with pytest.raises(TermOutOfRange) as refused:
        load_publish_config(budget=str(2**96))

    assert f"budget {2**96} wei: at most {2**96 - 1} wei (about 7.92e+10 ether); set --budget (budget) lower" in str(
        refused.value
    )


def test_every_term_the_contracts_cannot_hold_is_named_at_once_with_its_flag() -> None:
    with pytest.raises(TermOutOfRange) as refused:
        TaskTerms(
            client_deposit=2**96,
            fog_deposit=2**96 - 1,
            psi=2**128,
            min_quality=20.0,
            rounds=1001,
            max_clients=501,
            round_duration=2**32,
        )

    text = str(refused.value)
    assert (
        f"client_deposit {2**96} wei: at most {2**96 - 1} wei" in text
        and "--client-deposit (terms.client_deposit)" in text
    )
    assert "fog_deposit" not in text  # 2^96 - 1 fits its uint96
    assert f"psi {2**128} wei" in text
    assert "min_quality 20: at most 18.4467" in text  # a uint64 of 1e18 fixed point
    assert "rounds 1001: at most 1000" in text and "max_clients 501: at most 500" in text
    assert f"round_duration {2**32}: at most {2**32 - 1}" in text


def test_the_limits_the_terms_repeat_are_the_mechanisms() -> None:
    assert (terms.MAX_ROUNDS, terms.MAX_REPUTATION_CAP) == (reputation.MAX_ROUNDS, reputation.MAX_REPUTATION_CAP)


def test_a_negative_amount_given_in_code_is_refused_too() -> None:
    with pytest.raises(TermOutOfRange, match="psi -1 wei: it must be >= 0"):
        TaskTerms(psi=-1)


def test_on_a_12_s_chain_at_depth_2_a_challenge_window_needs_the_re_scoring_time_and_5_blocks() -> None:
    # 10 s (CHALLENGE_WORK_S) for the client to re-score its entry + (2 + 3) blocks x 12 s = 70 s
    fitting = TaskTerms(
        rounds=5, expected_duration=600, bidding_duration=60, reveal_duration=60, round_duration=168, time_tolerance=12
    )  # every other window just fits (see above)
    enough, short = replace(fitting, challenge_window=70), replace(fitting, challenge_window=69)

    problems = check_windows(short, ETHEREUM, confirmations=2)

    assert check_windows(enough, ETHEREUM, confirmations=2) == []
    assert [(p.name, p.value, p.smallest, p.blocks, p.training) for p in problems] == [
        ("challenge_window", 69, 70, 5, 10)
    ]
    text = str(windows_error(problems, ETHEREUM, confirmations=2))
    assert "challenge_window 69 s is too short: at least 70 s (10 s + 5 blocks)" in text
    assert "a client to see the post at 2 confirmations, re-score its entry and get its challenge mined" in text
    assert "--challenge-window (terms.challenge_window)" in text
    assert check_windows(TaskTerms(challenge_window=1), AUTOMINE, confirmations=0) == []  # blocks on demand


def test_a_challenge_window_of_nothing_or_a_bond_below_half_a_deposit_is_refused() -> None:
    with pytest.raises(ConfigError, match="challenge_window must be at least 1, got 0"):
        TaskTerms(challenge_window=0)
    with pytest.raises(
        ConfigError, match="challenge_bond must be at least half the client deposit, 5 wei, got 4"
    ) as cheap:
        TaskTerms(client_deposit=9, challenge_bond=4)

    assert "a cheap challenge" in (cheap.value.hint or "")
    assert TaskTerms(client_deposit=9, challenge_bond=5).effective_challenge_bond == 5
    # none named: half the client deposit, rounded up, at least 1 wei (TaskRegistry.minimumChallengeBond)
    assert TaskTerms(client_deposit=10**16).effective_challenge_bond == 5 * 10**15
    assert TaskTerms(client_deposit=7).effective_challenge_bond == 4
    assert TaskTerms(client_deposit=0, challenge_bond=None).effective_challenge_bond == 1


def test_the_least_aggregator_bond_is_every_deposit_plus_one_rounds_most_pay_at_most_the_budget() -> None:
    # 50 clients x 0.01 ether; one round pays each at most psi x cap^3 = 1e15 x 1000 wei: 50 ether, capped by the budget
    terms = TaskTerms(max_clients=50, client_deposit=10**16, psi=10**15, reputation_cap=10.0)

    assert terms.minimum_bond(10**18) == 50 * 10**16 + 10**18
    assert terms.minimum_bond(10**20) == 50 * 10**16 + 50 * 10**18
    assert terms.bond(10**18) == terms.minimum_bond(10**18)  # none named: the least
    assert TaskTerms(aggregator_bond=5 * 10**18).bond(10**18) == 5 * 10**18
    params = PublishConfig(terms=terms, budget=10**18).params(model_id=bytes(32), dataset_id=bytes(32))
    assert (params.aggregator_bond, params.challenge_bond, params.challenge_window) == (15 * 10**17, 5 * 10**15, 3600)


def test_an_aggregator_bond_below_what_one_round_can_move_is_refused_and_the_least_is_held() -> None:
    floor = TaskTerms().minimum_bond(10**18)

    assert PublishConfig(terms=TaskTerms(aggregator_bond=floor), budget=10**18).terms.bond(10**18) == floor
    with pytest.raises(TermOutOfRange) as refused:
        PublishConfig(terms=TaskTerms(aggregator_bond=floor - 1), budget=10**18)
    with pytest.raises(TermOutOfRange, match=f"aggregator_bond {terms.MAX_BOND + 1} wei: at most"):
        PublishConfig(terms=TaskTerms(aggregator_bond=terms.MAX_BOND + 1), budget=10**18)

    text = str(refused.value)
    assert f"aggregator_bond {floor - 1} wei is less than what one round's post can move: {floor} wei" in text
    assert "--aggregator-bond" in (refused.value.hint or "")
    # the same terms with a bigger budget need a bigger bond
    with pytest.raises(TermOutOfRange):
        load_publish_config(terms={"aggregator_bond": str(floor)}, budget="100ether")


def test_a_budget_that_fast_clients_would_spend_early_is_warned_with_the_figures_and_the_budget_that_covers_them() -> (
    None
):
    # the default terms (psi 0.001 ether, cap 10) for 3 clients over 5 rounds with 0.05 ether: rounds of T / 10
    # or less pay psi x 10^2 = 0.1 ether per client, so the budget is spent in round 1
    config = PublishConfig(terms=TaskTerms(), budget=5 * 10**16, expected_clients=3)

    warning = budget_warning(config)
    estimate = terms.budget_estimate(config.terms, 3)

    assert estimate.round_fast == 10**17 and estimate.bonus_fast == 10**12 * 600 * 10
    assert estimate.fast == 3 * (5 * 10**17 + 6 * 10**15) == 1518 * 10**15
    assert warning is not None and "0.05 ETH may run out" in warning and "3 client(s) over 5 round(s)" in warning
    assert "rounds take 12 s or less" in warning and "A budget of 1.518 ETH covers every case" in warning
    assert budget_warning(replace(config, budget=estimate.fast)) is None
    on_time_short = budget_warning(replace(config, budget=estimate.on_time - 1))
    assert on_time_short is not None and "runs out even if every client is on time" in on_time_short


def test_expected_clients_is_checked_and_defaults_to_max_clients() -> None:
    with pytest.raises(ConfigError, match="expected_clients must be from 1 to max_clients"):
        PublishConfig(terms=TaskTerms(max_clients=4), expected_clients=5)
    loose = PublishConfig(terms=TaskTerms(max_clients=4, psi=1, phi=0), budget=4 * 5 * 100)

    assert budget_warning(loose) is None and budget_warning(replace(loose, budget=4 * 5 * 100 - 1)) is not None


@pytest.mark.parametrize("name", ["task.yaml", "l2.yaml"])
def test_the_example_configs_fit_each_other_and_their_budget(name: str) -> None:
    from fog.config import load_fog_config

    config = load_publish_config(CONFIGS / name)
    fog = load_fog_config(CONFIGS / "fog.yaml", {"watch_entries": False})

    assert config.terms.fog_deposit <= fog.max_deposit  # a fog node from the examples bids on the example tasks
    assert budget_warning(config) is None
