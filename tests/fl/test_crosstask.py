"""The cross-task term of eqs. 6-8 (fedchain.fl.crosstask) against hand-computed values, its rules and properties."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping

import pytest

from fedchain.fl.crosstask import (
    FinishedTask,
    current_reputations,
    history_priors,
    history_priors_float,
    task_similarity,
    task_similarity_float,
    time_gap,
)
from fedchain.fl.reputation import WAD, loss_reputation_with_prior

A, B, C, D, E = (f"0x{digit * 40}" for digit in "abcde")
#: Client A's address written in upper case (a checksummed address differs from the lower-case one the same way).
A_UPPER = "0x" + A[2:].upper()


def wad(x: float) -> int:
    """A decimal written in the test as 1e18 fixed point (exact for the tenths used here)."""
    return round(x * 10) * WAD // 10


def as_float(reputations: Mapping[str, float]) -> dict[str, float]:
    """Fixed-point reputations as floats, for the ``*_float`` rendering."""
    return {client: value / WAD for client, value in reputations.items()}


def test_similarity_of_two_tasks_is_the_adjusted_cosine_over_common_clients_with_own_means() -> None:
    # prepare: current A .6 B 1 C 1 E 1 (mean .9, deviations -.3 .1 .1 .1, squares .12);
    # other A .6 B 1 D .8 (mean .8, deviations -.2 .2 0, squares .08); common A, B: .06 + .02 = .08
    current = {A: wad(0.6), B: wad(1.0), C: wad(1.0), E: wad(1.0)}
    other = {A: wad(0.6), B: wad(1.0), D: wad(0.8)}
    # execute
    sim = task_similarity(current, other)
    # assert: .08 / sqrt(.12 * .08) = sqrt(2/3)
    assert sim == math.isqrt(2 * WAD**2 // 3) == 816_496_580_927_726_032
    assert task_similarity_float(as_float(current), as_float(other)) == pytest.approx(math.sqrt(2 / 3))


def test_similarity_is_negative_when_common_clients_deviate_in_opposite_directions() -> None:
    # prepare: current deviations A -.3 B .1 C .1; other A 1.2 B .8 C 1 (deviations .2 -.2 0)
    current = {A: wad(0.6), B: wad(1.0), C: wad(1.0), E: wad(1.0)}
    other = {A: wad(1.2), B: wad(0.8), C: wad(1.0)}
    # execute
    sim = task_similarity(current, other)
    # assert: -.08 / sqrt(.12 * .08) = -sqrt(2/3), rounded toward zero
    assert sim == -816_496_580_927_726_032


def test_similarity_of_a_task_with_itself_is_exactly_one_and_with_equal_reputations_zero() -> None:
    # prepare
    reputations = {A: wad(0.3), B: wad(0.9), C: wad(1.7)}
    flat = {A: WAD, B: WAD, C: WAD}
    # execute / assert
    assert task_similarity(reputations, reputations) == WAD
    assert task_similarity(reputations, flat) == task_similarity(flat, reputations) == 0
    assert task_similarity(reputations, {D: WAD, E: 2 * WAD}) == 0


def test_similarity_is_symmetric_bounded_and_matches_the_float_rendering() -> None:
    # prepare: random tasks over a pool of 8 clients, seed fixed
    rng = random.Random(7)
    pool = [f"0x{i:040x}" for i in range(8)]
    for _ in range(200):
        h = {c: rng.randrange(0, 3 * WAD) for c in rng.sample(pool, rng.randint(1, 8))}
        i = {c: rng.randrange(0, 3 * WAD) for c in rng.sample(pool, rng.randint(1, 8))}
        # execute
        sim_hi, sim_ih = task_similarity(h, i), task_similarity(i, h)
        sim_float = task_similarity_float(as_float(h), as_float(i))
        # assert
        assert sim_hi == sim_ih
        assert -WAD <= sim_hi <= WAD
        assert sim_hi / WAD == pytest.approx(sim_float, abs=1e-9)


def test_time_gap_is_the_seconds_between_finish_and_start_at_least_one() -> None:
    assert time_gap(2000, 1500) == 500
    assert time_gap(2000, 2000) == 1
    assert time_gap(2000, 2500) == 1


def test_current_reputations_are_the_latest_known_final_reputations_else_the_initial_one() -> None:
    # prepare: A and B were in both tasks, C only in the first; E is new
    earlier = [
        FinishedTask(task_id=2, finished_at=1500, reputations={A: wad(0.6), B: wad(1.0), D: wad(0.8)}),
        FinishedTask(task_id=1, finished_at=1000, reputations={A: wad(1.2), B: wad(0.8), C: wad(1.0)}),
    ]
    # execute
    current = current_reputations([A, B, C, E], earlier, initial=WAD)
    # assert
    assert current == {A: wad(0.6), B: wad(1.0), C: wad(1.0), E: WAD}


def test_history_term_uses_only_tasks_with_positive_similarity_and_zero_for_clients_outside_them() -> None:
    # prepare: the similarity example above: task 1 is dissimilar (-sqrt(2/3)), task 2 similar (sqrt(2/3))
    earlier = [
        FinishedTask(task_id=1, finished_at=1000, reputations={A: wad(1.2), B: wad(0.8), C: wad(1.0)}),
        FinishedTask(task_id=2, finished_at=1500, reputations={A: wad(0.6), B: wad(1.0), D: wad(0.8)}),
    ]
    # execute
    result = history_priors([A, B, C, E], current_task_id=3, started_at=2000, earlier=earlier, reputation_cap=2 * WAD)
    # assert: U = {task 2}, so H is each client's final r_a there; C and E never took part in task 2
    assert result.similar == ((2, 816_496_580_927_726_032),)
    assert result.priors == (wad(0.6), wad(1.0), 0, 0)


def test_history_term_weights_similar_tasks_by_inverse_time_gap() -> None:
    # prepare: two clients, so both earlier tasks have similarity exactly 1;
    # gaps 1000 s and 100 s give weights 1 : 10
    earlier = [
        FinishedTask(task_id=1, finished_at=1000, reputations={A: wad(1.0), B: wad(0.5)}),
        FinishedTask(task_id=2, finished_at=1900, reputations={A: wad(0.8), B: wad(0.4)}),
    ]
    # execute
    result = history_priors([A, B], current_task_id=3, started_at=2000, earlier=earlier, reputation_cap=2 * WAD)
    floats = history_priors_float(
        [A, B],
        current_task_id=3,
        started_at=2000,
        earlier=[FinishedTask(t.task_id, t.finished_at, as_float(t.reputations)) for t in earlier],
        reputation_cap=2.0,
    )
    # assert: H_A = (1.0 + 10 * 0.8) / 11 = 9/11, H_B = (0.5 + 10 * 0.4) / 11 = 4.5/11, rounded down
    assert result.similar == ((1, WAD), (2, WAD))
    assert result.priors == (9 * WAD // 11, 45 * WAD // 110) == (818_181_818_181_818_181, 409_090_909_090_909_090)
    assert floats == pytest.approx((9 / 11, 4.5 / 11))


def test_history_term_is_capped_at_the_reputation_cap() -> None:
    # prepare: A ended task 1 at 3.0, above the current task's cap of 2.0
    earlier = [FinishedTask(task_id=1, finished_at=1000, reputations={A: 3 * WAD, B: WAD})]
    # execute
    result = history_priors([A, B], current_task_id=2, started_at=2000, earlier=earlier, reputation_cap=2 * WAD)
    # assert
    assert result.priors == (2 * WAD, WAD)


def test_history_term_ignores_unfinished_tasks_and_the_current_task() -> None:
    # prepare
    earlier = [
        FinishedTask(task_id=1, finished_at=2500, reputations={A: wad(1.0), B: wad(0.5)}),  # finished after the start
        FinishedTask(task_id=3, finished_at=1000, reputations={A: wad(1.0), B: wad(0.5)}),  # the current task
    ]
    # execute
    result = history_priors([A, B], current_task_id=3, started_at=2000, earlier=earlier, reputation_cap=2 * WAD)
    # assert
    assert result.similar == ()
    assert result.priors == (0, 0)


def test_history_term_ignores_tasks_sharing_a_single_client_even_when_similar() -> None:
    # prepare: the current task stands at A 1.0 (task 4), B 0.5 (task 5); each earlier task shares one
    # client with it and, on that client alone, would have similarity (.25 * .25) / (sqrt(.125) sqrt(.125)) = 0.5
    shares_a = {A: wad(1.0), D: wad(0.5)}
    earlier = [
        FinishedTask(task_id=4, finished_at=1000, reputations=shares_a),
        FinishedTask(task_id=5, finished_at=1000, reputations={B: wad(0.5), E: wad(1.0)}),
    ]
    assert task_similarity({A: wad(1.0), B: wad(0.5)}, shares_a) == WAD // 2
    # execute
    result = history_priors([A, B], current_task_id=6, started_at=2000, earlier=earlier, reputation_cap=2 * WAD)
    # assert
    assert result.similar == ()
    assert result.priors == (0, 0)


def test_history_term_matches_clients_case_insensitively_and_follows_their_order() -> None:
    # prepare
    earlier = [FinishedTask(task_id=1, finished_at=1000, reputations={A_UPPER: wad(1.0), B: wad(0.5)})]
    # execute
    forward = history_priors([A, B], current_task_id=2, started_at=2000, earlier=earlier, reputation_cap=2 * WAD)
    backward = history_priors([B, A], current_task_id=2, started_at=2000, earlier=earlier, reputation_cap=2 * WAD)
    # assert
    assert forward.priors == (wad(1.0), wad(0.5))
    assert backward.priors == (wad(0.5), wad(1.0))


def test_history_term_lies_between_the_clients_own_reputations_in_similar_tasks() -> None:
    # prepare: random histories over 6 clients, seed fixed
    rng = random.Random(11)
    pool = [f"0x{i:040x}" for i in range(6)]
    for _ in range(50):
        earlier = [
            FinishedTask(
                task_id=t,
                finished_at=rng.randrange(0, 10_000),
                reputations={c: rng.randrange(0, 2 * WAD) for c in rng.sample(pool, rng.randint(2, 6))},
            )
            for t in range(1, 6)
        ]
        clients = rng.sample(pool, rng.randint(1, 6))
        # execute
        result = history_priors(
            clients, current_task_id=99, started_at=10_000, earlier=earlier, reputation_cap=10 * WAD
        )
        # assert
        similar = {task_id for task_id, _ in result.similar}
        for client, prior in zip(clients, result.priors, strict=True):
            own = [t.reputations[client] for t in earlier if t.task_id in similar and client in t.reputations]
            assert (min(own) <= prior <= max(own)) if own else prior == 0


def test_loss_reputation_with_prior_adds_the_history_term_to_the_mean_term_under_the_cap() -> None:
    # q = 1.0 reaches q_min = 0.5, so the prior counts
    assert loss_reputation_with_prior(wad(0.6), wad(0.9), WAD, wad(0.5), reputation_cap=2 * WAD) == wad(1.5)
    assert loss_reputation_with_prior(wad(1.6), wad(0.9), WAD, wad(0.5), reputation_cap=2 * WAD) == 2 * WAD


def test_duplicate_clients_are_refused_with_a_reason() -> None:
    with pytest.raises(ValueError, match="distinct"):
        history_priors([A, A_UPPER], current_task_id=2, started_at=10, earlier=[], reputation_cap=WAD)


def test_a_negative_reputation_is_refused_with_a_reason() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        FinishedTask(task_id=1, finished_at=0, reputations={A: -1})
