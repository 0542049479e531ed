"""What an attack did to a run, read off hand-built results: detection, and the chain's pay and removals."""

import dataclasses
import math

import pytest

from fedchain.errors import ConfigError
from fedchain.experiments.config import ExperimentConfig, FaultConfig
from fedchain.experiments.results import ClientInfo, ExperimentResult, RoundRecord
from fedchain.experiments.robustness import (
    ATTACKS,
    FreeRiding,
    attack_faults,
    attack_setting,
    attack_start,
    chain_pay,
    detection,
    mechanism_params,
    neutral_round_time,
)

PSI = 10**15  # the default terms' psi, wei


def _result(faults: list[str], rounds: list[tuple[list[float], list[bool]]]) -> ExperimentResult:
    """A finished run of ``len(faults)`` clients whose round r scored ``rounds[r]`` = (qualities, accepted)."""
    return ExperimentResult(
        config=ExperimentConfig(rounds=len(rounds)),
        clients=tuple(ClientInfo(i, 100, fault) for i, fault in enumerate(faults)),
        rounds=tuple(
            RoundRecord(r + 1, 0.9, 0.3, tuple(quality), tuple(quality), tuple(accepted), 1.0)
            for r, (quality, accepted) in enumerate(rounds)
        ),
        standalone_runs=None,
        reward_accuracy=None,
        rounds_to_target=None,
        seconds=1.0,
    )


#: Clients 0 and 3 honest, 1 and 2 attackers. Round 1: client 2 below q_min, honest client 3 too;
#: round 2: attacker 1 rejected, attacker 2 below q_min again.
RUN = _result(
    ["none", "scaled", "sign-flipped", "none"],
    [([1.0, 1.0, 0.4, 0.3], [True, True, True, True]), ([1.0, 0.0, 0.4, 1.0], [True, False, True, True])],
)


def test_detection_counts_rejected_and_below_q_min_client_rounds_and_the_round_of_the_last_first_catch() -> None:
    found = detection(RUN, min_quality=0.5)

    # caught: (r1, c2), (r1, c3), (r2, c1), (r2, c2); attackers' 3 of 4 client-rounds, honest 1 of 4
    assert found.precision == pytest.approx(3 / 4)
    assert found.recall == pytest.approx(3 / 4)
    assert found.honest_flagged == pytest.approx(1 / 4)
    assert found.caught_round == 2  # attacker 1 first caught in round 2


def test_without_attackers_precision_recall_and_catch_round_do_not_apply() -> None:
    clean = _result(["none", "none"], [([0.2, 1.0], [True, True])])

    found = detection(clean, min_quality=0.5)

    assert math.isnan(found.precision) and math.isnan(found.recall) and found.caught_round is None
    assert found.honest_flagged == 0.5


def test_an_attacker_never_caught_leaves_no_catch_round_and_precision_undefined() -> None:
    missed = _result(["scaled", "none"], [([1.0, 1.0], [True, True])])

    found = detection(missed, min_quality=0.5)

    assert found.caught_round is None and found.recall == 0.0 and math.isnan(found.precision)


def test_the_chain_pays_by_the_mechanism_and_removes_a_client_whose_r_a_falls_below_r_a_min() -> None:
    # prepare: T = 600 s / 2 rounds = 300 s, every client's round time t_max = 120 s: r_t = 300 / 120 = 2.5
    params = mechanism_params(2)
    assert neutral_round_time(params) == 120

    # execute
    pay = chain_pay(RUN, params)

    # assert: q = 1: psi * 2.5^2 * 1 per round; q = 0.4 < q_min: r_a = 0.4 * 0.4 = 0.16 >= 0.1, psi * 6.25 * 0.16;
    # client 1 rejected in round 2: r_a = (1 * 1 + 2 * 0) / 3 * 0 = 0 < 0.1, removed with nothing for that round;
    # client 3: round 1 r_a = 0.09 < 0.1, removed, never scored again
    assert pay.paid == (2 * PSI * 25 // 4, PSI * 25 // 4, 2 * PSI, 0)
    assert pay.removed_round == (None, 2, None, 1)
    assert pay.removed([1, 2]) == 1 and pay.removed([0, 3]) == 1
    assert pay.removed_of([1, 2]) == {1} and pay.removed_of([0, 3]) == {3}
    assert pay.mean_pay([1, 2]) == pytest.approx((PSI * 6.25 + 2 * PSI) / 2)
    # round by round: round 2 alone pays client 0 again, client 1 nothing (removed), client 2 psi
    assert pay.by_round[1] == (PSI * 25 // 4, 0, PSI, 0)
    assert pay.paid_from(2) == pay.by_round[1] and pay.paid_from(3) == (0, 0, 0, 0)
    assert pay.mean_pay([1, 2], first_round=2) == pytest.approx(PSI / 2)


def test_a_free_riders_attack_starts_at_its_free_ride_from_round_every_other_attack_at_round_1() -> None:
    def run(faults: FaultConfig) -> ExperimentResult:
        return dataclasses.replace(RUN, config=ExperimentConfig(rounds=2, faults=faults))

    assert attack_start(run(attack_faults("free-ride-disguised", 0.2))) == 2
    assert attack_start(run(attack_faults("free-ride-zero", 0.2))) == 1
    assert attack_start(run(attack_faults("scale-x10", 0.2))) == 1
    assert attack_start(run(FaultConfig(free_ride_from=3))) == 1  # no free riders: the setting attacks nothing


def test_every_attack_is_a_fault_of_the_given_fraction_with_its_settings() -> None:
    assert attack_faults("none", 0.3) == FaultConfig()
    assert attack_faults("scale-x1000", 0.2) == FaultConfig(scaled_clients=0.2, scale=1000.0)
    assert attack_faults("free-ride-random", 0.3) == FaultConfig(free_riders=0.3, free_rider_mode="random")
    assert attack_faults("sybil", 0.3) == FaultConfig(sybil_clients=0.3)
    assert all(attack_faults(name, 0.3) != FaultConfig() for name in ATTACKS if name != "none")
    with pytest.raises(ConfigError, match="unknown attack 'dos'"):
        attack_faults("dos", 0.2)


def test_free_riding_settings_change_only_the_free_riders_and_name_their_runs_apart() -> None:
    later = FreeRiding(disguise_noise=1.0, free_ride_from=4)

    disguised = attack_faults("free-ride-disguised", 0.2, later)
    zero = attack_faults("free-ride-zero", 0.2, later)

    assert (disguised.free_riders, disguised.free_rider_mode) == (0.2, "disguised")
    assert (disguised.disguise_noise, disguised.free_ride_from) == (1.0, 4)
    assert (zero.free_ride_from, zero.disguise_noise) == (4, FaultConfig().disguise_noise)  # no noise to set
    assert attack_faults("sign-flip", 0.2, later) == attack_faults("sign-flip", 0.2)  # not a free rider
    assert attack_faults("free-ride-disguised", 0.2, FreeRiding()) == attack_faults("free-ride-disguised", 0.2)
    assert attack_setting("free-ride-disguised", 0.2, later) == "free-ride-disguised-noise1-from4-0.2"
    assert attack_setting("free-ride-random", 0.3, later) == "free-ride-random-from4-0.3"
    assert attack_setting("sign-flip", 0.2, later) == "sign-flip-0.2"
    assert attack_setting("none", 0.0, later) == "none"
    # the attack's own settings, given explicitly, name the same runs as the defaults
    own = FreeRiding(disguise_noise=0.5, free_ride_from=2)
    assert attack_setting("free-ride-disguised", 0.2, own) == attack_setting("free-ride-disguised", 0.2)
    assert attack_setting("free-ride-disguised", 0.2) == "free-ride-disguised-0.2"
    run = dataclasses.replace(RUN, config=ExperimentConfig(rounds=5, faults=disguised))
    assert attack_start(run) == 4  # the pay measured against the honest counts from round 4


@pytest.mark.parametrize(
    ("riding", "message", "hint"),
    [
        ({"disguise_noise": -0.1}, "noise of -0.1", "e.g. 0.5"),
        ({"disguise_noise": math.inf}, "noise of inf", "e.g. 0.5"),
        ({"free_ride_from": 0}, "from round 0", "1 or later"),
    ],
)
def test_free_riding_settings_out_of_range_are_refused_with_a_hint(riding: dict, message: str, hint: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        FreeRiding(**riding)
    assert hint in caught.value.hint
