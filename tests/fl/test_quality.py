"""Tian's quality weighting (eq. 19) and the per-round quality q_i handed to the chain."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fedchain.errors import ConfigError
from fedchain.fl import Evaluation, Validation, get_strategy, loss_ratio, rescaled_contribution, round_quality, to_wad

F64 = torch.float64


def evaluations(*losses: float) -> Validation:
    return Validation(client_evaluations=[Evaluation(loss=loss, accuracy=0.5) for loss in losses])


def test_quality_weights_are_loss_ratio_times_size_normalised() -> None:
    """Losses 1, 2, 4: loss_avg = median = 2, q = [2, 1, 1/2]; sizes 1, 1, 2: q|D| = [2, 1, 1],
    sum 4, weights [1/2, 1/4, 1/4]. Updates e_1, e_2, e_3 -> new global [1/2, 1/4, 1/4]."""
    result = get_strategy("quality").round(torch.zeros(3), torch.eye(3), [1, 1, 2], None, evaluations(1.0, 2.0, 4.0))

    torch.testing.assert_close(result.weights, torch.tensor([0.5, 0.25, 0.25], dtype=F64))
    torch.testing.assert_close(result.contribution, torch.tensor([2.0, 1.0, 0.5], dtype=F64))
    torch.testing.assert_close(result.global_params, torch.tensor([0.5, 0.25, 0.25]))
    torch.testing.assert_close(result.client_losses, torch.tensor([1.0, 2.0, 4.0], dtype=F64))


def test_quality_calls_the_evaluator_on_each_clients_updated_model() -> None:
    """loss(p) = sum(p) + 1: global [1, 1] plus updates [1, 0], [2, 1] give losses 4 and 6; median 5,
    q = [5/4, 5/6]; equal sizes: weights [5/4, 5/6] / (25/12) = [0.6, 0.4]."""
    validation = Validation(evaluate=lambda p: Evaluation(loss=float(p.sum()) + 1, accuracy=0.0))
    updates = torch.tensor([[1.0, 0.0], [2.0, 1.0]])

    result = get_strategy("quality").round(torch.ones(2), updates, [3, 3], None, validation)

    torch.testing.assert_close(result.weights, torch.tensor([0.6, 0.4], dtype=F64))


def test_quality_rejects_a_client_whose_model_loss_is_not_finite() -> None:
    result = get_strategy("quality").round(torch.zeros(2), torch.eye(2), [1, 1], None, evaluations(1.0, float("nan")))

    assert result.accepted.tolist() == [True, False]
    torch.testing.assert_close(result.global_params, torch.tensor([1.0, 0.0]))


def test_quality_without_validation_says_what_to_pass() -> None:
    with pytest.raises(ConfigError, match="validation evaluator"):
        get_strategy("quality").round(torch.zeros(2), torch.eye(2), [1, 1])


def test_loss_ratio_ignores_rejected_clients_in_the_average() -> None:
    """Accepted losses 2 and 6: loss_avg = 4, q = [2, 2/3]; the rejected client gets 0."""
    quality = loss_ratio(torch.tensor([2.0, 6.0, 100.0], dtype=F64), torch.tensor([True, True, False]))

    torch.testing.assert_close(quality, torch.tensor([2.0, 2 / 3, 0.0], dtype=F64))


def test_loss_ratio_averages_with_the_median_of_the_accepted_losses() -> None:
    """Accepted losses 1, 2, 3, 4: loss_avg = (2 + 3) / 2 = 2.5 (numpy's median), q = [2.5, 1.25, 5/6, 0.625]."""
    quality = loss_ratio(torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=F64), torch.ones(4, dtype=torch.bool))

    torch.testing.assert_close(quality, torch.tensor([2.5, 1.25, 2.5 / 3, 0.625], dtype=F64))


@given(attacker_loss=st.floats(min_value=1e-6, max_value=1e12, allow_nan=False))
def test_one_attackers_loss_cannot_move_the_honest_clients_quality(attacker_loss: float) -> None:
    """Honest losses 1, 2, 2, 3 and one attacker: the median stays 2 whatever the attacker's loss,
    so each honest client keeps q = 2 / loss_i (a mean would give honest clients up to ~1e11 for a huge loss)."""
    losses = torch.tensor([1.0, 2.0, 2.0, 3.0, attacker_loss], dtype=F64)

    quality = loss_ratio(losses, torch.ones(5, dtype=torch.bool))

    torch.testing.assert_close(quality[:4], torch.tensor([2.0, 1.0, 1.0, 2 / 3], dtype=F64))


def test_loss_ratio_of_all_zero_losses_is_one() -> None:
    quality = loss_ratio(torch.zeros(2, dtype=F64), torch.tensor([True, True]))

    torch.testing.assert_close(quality, torch.ones(2, dtype=F64))


def test_rescaled_contribution_clips_negatives_and_has_mean_one_over_accepted() -> None:
    """Contributions [3, -1, 1, 5] with client 3 rejected: clipped [3, 0, 1, 0], sum 4, 3 accepted:
    q = [3, 0, 1, 0] * 3/4 = [2.25, 0, 0.75, 0]."""
    contribution = torch.tensor([3.0, -1.0, 1.0, 5.0], dtype=F64)

    quality = rescaled_contribution(contribution, torch.tensor([True, True, True, False]))

    torch.testing.assert_close(quality, torch.tensor([2.25, 0.0, 0.75, 0.0], dtype=F64))


def test_rescaled_contribution_with_nothing_positive_is_all_zero() -> None:
    quality = rescaled_contribution(torch.tensor([0.0, -2.0], dtype=F64), torch.tensor([True, True]))

    assert quality.tolist() == [0.0, 0.0]


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.lists(st.floats(-5, 5), min_size=1, max_size=8), st.data())
def test_rescaled_contribution_has_mean_one_when_anything_is_positive(values: list[float], data: st.DataObject) -> None:
    accepted = torch.tensor(data.draw(st.lists(st.booleans(), min_size=len(values), max_size=len(values))))
    contribution = torch.tensor(values, dtype=F64)

    quality = rescaled_contribution(contribution, accepted)

    assert (quality >= 0).all()
    assert (quality[~accepted] == 0).all()
    if (contribution[accepted] > 0).any():
        assert quality[accepted].mean().item() == pytest.approx(1.0)


def test_to_wad_is_exact_for_decimal_floats() -> None:
    assert to_wad([0.1, 1.0, 2.25, 0.0]) == (10**17, 10**18, 2_250_000_000_000_000_000, 0)


def test_to_wad_refuses_negative_and_non_finite_values() -> None:
    for bad in (-0.5, float("nan"), float("inf")):
        with pytest.raises(ConfigError):
            to_wad([bad])


def test_round_quality_defaults_to_the_strategys_measured_losses() -> None:
    result = get_strategy("quality").round(torch.zeros(3), torch.eye(3), [1, 1, 2], None, evaluations(1.0, 2.0, 4.0))

    quality = round_quality(result)

    assert quality.values == pytest.approx((2.0, 1.0, 0.5))  # median loss 2
    assert quality.wad == to_wad(quality.values)


def test_round_quality_of_fedavg_needs_client_losses() -> None:
    result = get_strategy("fedavg").round(torch.zeros(2), torch.eye(2), [1, 1])

    with pytest.raises(ConfigError, match="client_losses"):
        round_quality(result)
    assert round_quality(result, client_losses=[1.0, 3.0]).values == (2.0, 2 / 3)
    assert round_quality(result, source="contribution").wad == (10**18, 10**18)


@pytest.mark.parametrize("source", ["loss", "contribution"])
def test_the_floor_raises_accepted_qualities_below_it_and_leaves_the_rest(source: str) -> None:
    result = get_strategy("fedavg").round(torch.zeros(4), torch.eye(4), [1, 1, 1, 9])
    result = dataclasses.replace(result, accepted=torch.tensor([True, True, True, False]))
    losses = [1.0, 1.0, 50.0, 1.0]  # client 2: a poor round (0.02), client 3: rejected

    seed = round_quality(result, source=source, client_losses=losses)  # type: ignore[arg-type]
    floored = round_quality(result, source=source, client_losses=losses, floor=0.2)  # type: ignore[arg-type]

    assert seed.values[3] == floored.values[3] == 0.0  # a rejected update still scores 0 and removes its client
    expected = [max(q, 0.2) for q in seed.values[:3]]
    assert floored.values[:3] == pytest.approx(expected) and floored.wad == to_wad(floored.values)
    if source == "loss":
        assert seed.values[2] == pytest.approx(0.02) and floored.values[2] == 0.2


@pytest.mark.parametrize("floor", [-0.1, 1.0, float("nan")])
def test_a_floor_outside_0_to_1_is_refused(floor: float) -> None:
    result = get_strategy("fedavg").round(torch.zeros(2), torch.eye(2), [1, 1])
    with pytest.raises(ConfigError, match="quality floor"):
        round_quality(result, client_losses=[1.0, 2.0], floor=floor)


def test_the_data_credit_judges_a_small_clients_contribution_per_sample_up_to_the_credit() -> None:
    """Sizes 100, 400, 700, 10, 800 (client 4 rejected): the accepted mean is 302.5. Client 0 holds a third of it:
    its quality is multiplied by 3.025; client 3 a thirtieth: by the credit, 4; clients 1 and 2 hold more than
    the mean and keep theirs, as does the rejected client 4."""
    result = get_strategy("fedavg").round(torch.zeros(5), torch.eye(5), [1, 1, 1, 1, 1])
    result = dataclasses.replace(
        result,
        contribution=torch.tensor([0.1, 1.0, 2.0, 0.0, 5.0], dtype=F64),
        accepted=torch.tensor([True, True, True, True, False]),
    )
    sizes = [100, 400, 700, 10, 800]

    plain = round_quality(result, source="contribution")
    credited = round_quality(result, source="contribution", data_sizes=sizes, data_credit=4.0)

    factors = [302.5 / 100, 1.0, 1.0, 4.0, 1.0]
    assert credited.values == pytest.approx([q * f for q, f in zip(plain.values, factors, strict=True)])
    assert credited.values[3] == 0.0 and credited.values[4] == 0.0  # nothing contributed, or rejected: still 0
    assert round_quality(result, source="contribution", data_sizes=sizes, data_credit=1.0) == plain


def test_the_data_credit_leaves_the_loss_quality_alone_and_needs_the_sizes_for_a_contribution() -> None:
    result = get_strategy("fedavg").round(torch.zeros(2), torch.eye(2), [1, 1])

    by_loss = round_quality(result, client_losses=[1.0, 3.0], data_credit=4.0)

    assert by_loss == round_quality(result, client_losses=[1.0, 3.0])
    with pytest.raises(ConfigError, match="data size"):
        round_quality(result, source="contribution", data_credit=4.0)
    with pytest.raises(ConfigError, match="data credit"):
        round_quality(result, source="contribution", data_sizes=[1, 2], data_credit=0.5)


#: Which of 4 clients' updates were accepted in each of 6 rounds: all but client 2's in round 2.
CLIENT_2_REJECTED_IN_ROUND_2 = [[True] * 4, [True, True, False, True]] + [[True] * 4] * 4


def _graced_rounds(
    rows: list[list[float]],
    accepted: list[list[bool]],
    allowance: int,
    accuracies: list[float] | None = None,
    two_in_a_row: bool = False,
) -> list[tuple[float, ...]]:
    """Each round's qualities after the grace (q_min 0.5), the memory carried from round to round; every model's
    accuracy 0.9 unless ``accuracies`` (the same in every round) says otherwise."""
    from fedchain.fl.quality import GraceMemory, GraceRule, graced

    memory, out = GraceMemory(), []
    for values, ok in zip(rows, accepted, strict=True):
        known = torch.tensor(accuracies or [0.9] * len(values), dtype=F64)
        scored, memory = graced(
            torch.tensor(values, dtype=F64),
            torch.tensor(ok),
            known,
            GraceRule(0.5, allowance, two_in_a_row=two_in_a_row),
            memory,
        )
        out.append(tuple(scored.tolist()))
    return out


def test_the_grace_scores_a_poor_round_after_a_good_one_at_q_min_and_not_a_second_in_a_row() -> None:
    """Client 0: poor in rounds 2, 4 and 6, one at a time; client 1: poor every round; client 2: good, then
    rejected, then poor; client 3: never poor. Allowance 2: client 0's third poor round is scored as it is, and
    no client's first round is graced."""
    rows = [
        [1.0, 0.2, 1.0, 1.1],
        [0.1, 0.1, 0.0, 0.9],
        [1.0, 0.3, 0.2, 1.0],
        [0.05, 0.2, 1.0, 1.0],
        [1.0, 0.1, 1.0, 1.0],
        [0.3, 0.1, 1.0, 1.0],
    ]

    scored = _graced_rounds(rows, CLIENT_2_REJECTED_IN_ROUND_2, allowance=2)

    assert [r[0] for r in scored] == [1.0, 0.5, 1.0, 0.5, 1.0, 0.3]  # graced in rounds 2 and 4; then spent
    assert [r[1] for r in scored] == [0.2, 0.1, 0.3, 0.2, 0.1, 0.1]  # poor from its first round on: as it is
    assert scored[1][2] == 0.0 and scored[2][2] == 0.2  # a rejection is never graced, and counts as a poor round
    assert [r[3] for r in scored] == [1.1, 0.9, 1.0, 1.0, 1.0, 1.0]
    assert _graced_rounds(rows, CLIENT_2_REJECTED_IN_ROUND_2, allowance=0) == [
        tuple(r) for r in rows
    ]  # 0: the seed's rule


def test_with_two_in_a_row_a_spell_of_two_poor_rounds_after_a_good_one_is_graced_and_no_third() -> None:
    """docs/robustness.md ("Two poor rounds in a row"): client 0 is good, then poor in rounds 2-4: rounds 2 and 3
    are graced, round 4 is not. Client 1 is poor from its first round: nothing opens a spell. Client 2 is rejected
    in round 2: a rejection opens nothing. Client 3's two spells of two would need four graces: the allowance
    (2) ends it after the first. Without the rule, as before: one grace per spell."""
    rows = [
        [1.0, 0.1, 1.0, 1.0],
        [0.2, 0.1, 0.0, 0.3],
        [0.3, 0.1, 0.3, 0.2],
        [0.1, 0.1, 0.3, 1.0],
        [1.0, 0.1, 1.0, 0.3],
        [1.0, 0.1, 1.0, 0.2],
    ]

    spells = _graced_rounds(rows, CLIENT_2_REJECTED_IN_ROUND_2, allowance=2, two_in_a_row=True)
    single = _graced_rounds(rows, CLIENT_2_REJECTED_IN_ROUND_2, allowance=2)

    assert [r[0] for r in spells] == [1.0, 0.5, 0.5, 0.1, 1.0, 1.0]
    assert [r[1] for r in spells] == [0.1] * 6
    assert [r[2] for r in spells] == [1.0, 0.0, 0.3, 0.3, 1.0, 1.0]
    assert [r[3] for r in spells] == [1.0, 0.5, 0.5, 1.0, 0.3, 0.2]
    assert [r[0] for r in single] == [1.0, 0.5, 0.3, 0.1, 1.0, 1.0]
    assert [r[3] for r in single] == [1.0, 0.5, 0.2, 1.0, 0.5, 0.2]


def test_a_grace_memory_saved_before_spells_opens_none() -> None:
    from fedchain.fl.quality import GraceMemory, GraceRule, graced

    older = GraceMemory((True, False), (1, 0))  # a state written before the rule: no ``opened``
    values, ok = torch.tensor([0.2, 0.2], dtype=F64), torch.ones(2, dtype=torch.bool)
    rule = GraceRule(0.5, 2, two_in_a_row=True)

    scored, after = graced(values, ok, torch.full((2,), 0.9, dtype=F64), rule, older)

    assert scored.tolist() == [0.2, 0.5] and after == GraceMemory((True, True), (1, 1), (False, True))


def test_the_grace_passes_over_a_model_that_no_longer_classifies() -> None:
    """A label flipper's model on the balanced validation set: accuracy 0.1 against a median of 0.9, below a
    quarter of it; the skewed honest client's 0.3 is above. Both are poor in round 2 only."""
    rows = [[1.0, 1.0, 1.0, 1.0], [0.1, 0.1, 1.0, 1.0]]
    scored = _graced_rounds(rows, [[True] * 4] * 2, allowance=2, accuracies=[0.1, 0.3, 0.9, 0.9])
    assert scored[1] == (0.1, 0.5, 1.0, 1.0)


def test_the_tasks_first_round_is_graced_only_for_a_model_that_beats_chance_by_the_share() -> None:
    """Round 1 of a 10-class task (chance 0.1), median accuracy 0.5: a quarter of its margin over chance asks for
    0.2. The skewed client's 0.3 is graced; the young flipper's 0.15, above a quarter of the median but barely
    above chance, is not; without a chance (a rule for no known classifier) nobody is; a round whose median model
    does not beat chance graces nobody; and round 2 goes back to the plain share of the median."""
    from fedchain.fl.quality import GraceMemory, GraceRule, grace_rule, graced

    values = torch.tensor([0.2, 0.2, 1.0, 1.0], dtype=F64)
    ok = torch.ones(4, dtype=torch.bool)
    rule = grace_rule(2, min_quality=0.5, classes=10)
    assert rule == GraceRule(0.5, 2, chance=0.1)

    first, memory = graced(values, ok, torch.tensor([0.3, 0.15, 0.5, 0.5], dtype=F64), rule, GraceMemory())
    assert first.tolist() == [0.5, 0.2, 1.0, 1.0]
    assert memory == GraceMemory((True, True, False, False), (1, 0, 0, 0), (False,) * 4)  # round 1 opens no spell

    no_chance, _ = graced(values, ok, torch.tensor([0.3, 0.15, 0.5, 0.5], dtype=F64), GraceRule(0.5, 2), GraceMemory())
    assert no_chance.tolist() == values.tolist()
    at_chance, _ = graced(values, ok, torch.tensor([0.3, 0.1, 0.09, 0.1], dtype=F64), rule, GraceMemory())
    assert at_chance.tolist() == values.tolist()

    good = GraceMemory((False,) * 4, (0,) * 4)  # round 2 after a good round 1: 0.15 >= 0.25 * 0.5
    later, _ = graced(values, ok, torch.tensor([0.3, 0.15, 0.5, 0.5], dtype=F64), rule, good)
    assert later.tolist() == [0.5, 0.5, 1.0, 1.0]


def test_in_round_1_a_model_at_chance_that_lowered_the_initial_loss_is_graced_with_the_loss_test() -> None:
    """The probe of docs/robustness.md ("The first round: the loss"), in small: a client with 171 samples sat at
    chance (0.108) and lowered the initial loss 2.302 to 2.284; a label flipper of 190 raised it to 2.318 at 0.032;
    a skewed client collapsed to its classes (7.38). Only the first is graced, and only by the loss test, only in
    round 1; a rule without it, or a round whose median model is at chance, goes by the accuracy as before."""
    from fedchain.fl.quality import GraceMemory, grace_rule, graced, improved_on

    values = torch.tensor([0.43, 0.32, 0.36, 1.0, 1.0, 1.0, 1.0], dtype=F64)
    ok = torch.ones(7, dtype=torch.bool)
    accuracies = torch.tensor([0.108, 0.032, 0.095, 0.6, 0.65, 0.7, 0.8], dtype=F64)  # median 0.6
    improved = improved_on([2.284, 2.318, 7.384, 1.2, 1.1, 1.0, 0.9], 2.302)
    assert improved.tolist() == [True, False, False, True, True, True, True]
    by_loss = grace_rule(2, min_quality=0.5, classes=10, by_loss=True)
    accuracy_only = grace_rule(2, min_quality=0.5, classes=10)
    assert by_loss is not None and accuracy_only is not None

    first, memory = graced(values, ok, accuracies, by_loss, GraceMemory(), improved=improved)
    assert first.tolist() == [0.5, 0.32, 0.36, 1.0, 1.0, 1.0, 1.0]
    assert memory.used == (1, 0, 0, 0, 0, 0, 0) and memory.poor == (True, True, True, False, False, False, False)
    assert graced(values, ok, accuracies, accuracy_only, GraceMemory())[0].tolist() == values.tolist()
    at_chance = torch.full((7,), 0.1, dtype=F64)  # no median model beats chance: the loss still tells
    assert graced(values, ok, at_chance, by_loss, GraceMemory(), improved=improved)[0].tolist()[:2] == [0.5, 0.32]
    later = GraceMemory((False,) * 7, (0,) * 7)  # round 2: the plain share of the median, the loss not asked
    assert graced(values, ok, accuracies, by_loss, later)[0].tolist() == values.tolist()
    with pytest.raises(ConfigError, match="lowered the initial model's loss"):
        graced(values, ok, accuracies, by_loss, GraceMemory())


def test_the_loss_test_is_part_of_a_first_round_grace_only() -> None:
    from fedchain.fl.quality import GraceRule, grace_rule

    assert grace_rule(2, min_quality=0.5, classes=None, by_loss=True) == GraceRule(0.5, 2)
    with pytest.raises(ConfigError, match="needs the accuracy of chance"):
        GraceRule(0.5, 2, by_loss=True)


@pytest.mark.parametrize("test", ["improved", "judged"])
def test_round_quality_passes_the_first_rounds_loss_test_and_chance_verdict_to_the_grace(test: str) -> None:
    from fedchain.fl.quality import grace_rule

    result = get_strategy("fedavg").round(torch.zeros(4), torch.eye(4), [1, 1, 1, 1])
    rule = grace_rule(1, min_quality=0.5, classes=10, by_loss=test == "improved", by_screen=test == "judged")
    losses = [2.0, 2.0, 2.0, 5.0]  # median 2.0: q = [1, 1, 1, 0.4]; the last model at chance
    accuracies = [0.5, 0.5, 0.5, 0.1]

    def scored(passed: list[bool]) -> tuple[float, ...]:
        improved, judged = (passed, None) if test == "improved" else (None, passed)
        quality = round_quality(
            result, client_losses=losses, floor=0.2, grace=rule, accuracies=accuracies, improved=improved, judged=judged
        )
        return quality.values

    assert scored([True] * 4) == (1.0, 1.0, 1.0, 0.5)
    assert scored([True, True, True, False]) == (1.0, 1.0, 1.0, 0.4)


def test_in_round_1_a_model_the_chance_test_kept_is_graced_with_the_screens_verdict() -> None:
    """docs/robustness.md ("The first round: the chance test"), in small: Fashion-MNIST, POW, client 0 of 342
    samples sat at 0.08 in round 1 with its loss risen (2.30 -> 2.9), a contribution quality of 0.484. Neither the
    accuracy nor the loss test graces it; screening's chance test judged it and kept it (its limit there was 0.04),
    and with ``by_screen`` that is enough. A model the test did not judge (off, or a set too small to reject on)
    is not graced by it, and round 2 does not ask it."""
    from fedchain.fl.quality import GraceMemory, grace_rule, graced, improved_on

    values = torch.tensor([0.484, 1.0, 1.0, 1.0, 1.2], dtype=F64)
    ok = torch.ones(5, dtype=torch.bool)
    accuracies = torch.tensor([0.08, 0.5, 0.55, 0.6, 0.62], dtype=F64)  # median 0.55
    improved = improved_on([2.9, 1.6, 1.5, 1.4, 1.3], 2.302)
    judged = torch.ones(5, dtype=torch.bool)
    by_screen = grace_rule(2, min_quality=0.5, classes=10, by_loss=True, by_screen=True)
    by_loss = grace_rule(2, min_quality=0.5, classes=10, by_loss=True)
    assert by_screen is not None and by_loss is not None

    first, memory = graced(values, ok, accuracies, by_screen, GraceMemory(), improved=improved, judged=judged)
    assert first.tolist() == [0.5, 1.0, 1.0, 1.0, 1.2]
    assert memory.used == (1, 0, 0, 0, 0) and memory.poor == (True, False, False, False, False)
    assert graced(values, ok, accuracies, by_loss, GraceMemory(), improved=improved)[0].tolist() == values.tolist()
    unjudged = torch.zeros(5, dtype=torch.bool)
    kept = graced(values, ok, accuracies, by_screen, GraceMemory(), improved=improved, judged=unjudged)[0]
    assert kept.tolist() == values.tolist()
    later = GraceMemory((True,) + (False,) * 4, (0,) * 5)  # round 2 after a poor round 1: the verdict is not asked
    assert graced(values, ok, accuracies, by_screen, later, judged=judged)[0].tolist() == values.tolist()
    rejected = torch.tensor([False, True, True, True, True])  # a rejected update is never graced
    unkept = graced(values * rejected, rejected, accuracies, by_screen, GraceMemory(), improved=improved, judged=judged)
    assert unkept[0].tolist()[0] == 0.0
    with pytest.raises(ConfigError, match="chance test judged and kept"):
        graced(values, ok, accuracies, by_screen, GraceMemory(), improved=improved)


def test_the_screens_verdict_is_part_of_a_first_round_grace_only() -> None:
    from fedchain.fl.quality import GraceRule, grace_rule

    assert grace_rule(2, min_quality=0.5, classes=None, by_screen=True) == GraceRule(0.5, 2)
    with pytest.raises(ConfigError, match="needs the accuracy of chance"):
        GraceRule(0.5, 2, by_screen=True)


def test_an_extra_first_round_grace_leaves_the_allowance_for_the_later_rounds() -> None:
    """docs/robustness.md ("The first round's grace apart"), in small: MNIST, POW, fedfaim, client 6 of 171 samples
    was graced in round 1 and round 8, and its poor round 10 after a good round 9 went ungraced, as its two graces
    were spent. With ``first_extra`` round 1 is not one of them; a client poor round after round still gets no
    grace after its first, and a rule without a first round cannot have it."""
    from fedchain.fl.quality import GraceMemory, GraceRule, grace_rule, graced

    def run(rule: GraceRule, rows: list[float]) -> tuple[list[float], GraceMemory]:
        memory, scored = GraceMemory(), []
        for quality in rows:
            values = torch.tensor([quality, 1.0, 1.0], dtype=F64)
            ok = torch.ones(3, dtype=torch.bool)
            result, memory = graced(values, ok, torch.full((3,), 0.5, dtype=F64), rule, memory, improved=ok)
            scored.append(float(result[0]))
        return scored, memory

    counted = grace_rule(2, min_quality=0.5, classes=10, by_loss=True)
    extra = grace_rule(2, min_quality=0.5, classes=10, by_loss=True, first_extra=True)
    assert counted is not None and extra is not None and extra.first_extra and not counted.first_extra
    client_6 = [0.45, 1.2, 0.48, 1.1, 0.49]  # rounds 1, 8, 10 in small: poor, good, poor, good, poor

    assert run(counted, client_6) == (
        [0.5, 1.2, 0.5, 1.1, 0.49],
        GraceMemory((True, False, False), (2, 0, 0), (False, False, False)),
    )
    assert run(extra, client_6) == (
        [0.5, 1.2, 0.5, 1.1, 0.5],
        GraceMemory((True, False, False), (2, 0, 0), (True, False, False)),
    )
    flipper = [0.3, 0.2, 0.1, 0.2]  # poor round after round: graced once, in round 1, either way
    assert run(extra, flipper)[0] == run(counted, flipper)[0] == [0.5, 0.2, 0.1, 0.2]
    assert grace_rule(2, min_quality=0.5, classes=None, first_extra=True) == GraceRule(0.5, 2)
    with pytest.raises(ConfigError, match="needs the accuracy of chance"):
        GraceRule(0.5, 2, first_extra=True)


@pytest.mark.parametrize("classes", [1, 0, 2.5, True])
def test_a_grace_for_fewer_than_two_classes_or_a_chance_outside_0_1_is_refused(classes: object) -> None:
    from fedchain.fl.quality import GraceRule, grace_rule

    with pytest.raises(ConfigError, match="at least 2 classes"):
        grace_rule(2, min_quality=0.5, classes=classes)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="accuracy of chance"):
        GraceRule(0.5, 2, chance=1.0)


def test_round_quality_applies_the_grace_before_the_floor_and_returns_the_memory() -> None:
    from fedchain.fl.quality import GraceMemory, GraceRule

    result = get_strategy("fedavg").round(torch.zeros(4), torch.eye(4), [1, 1, 1, 1])
    accuracies = [0.9, 0.9, 0.8, 0.5]
    rule = GraceRule(0.5, 1)
    first = round_quality(result, client_losses=[1.0, 1.0, 1.0, 1.0], grace=rule, accuracies=accuracies)
    assert first.values == (1.0,) * 4 and first.memory == GraceMemory((False,) * 4, (0,) * 4, (False,) * 4)
    losses = [1.0, 1.0, 10.0, 50.0]  # median 5.5: q = [5.5, 5.5, 0.55, 0.11]
    second = round_quality(
        result, client_losses=losses, floor=0.2, grace=rule, memory=first.memory, accuracies=accuracies
    )
    assert second.values == pytest.approx((5.5, 5.5, 0.55, 0.5))
    assert second.memory == GraceMemory((False, False, False, True), (0, 0, 0, 1), (False, False, False, True))
    third = round_quality(
        result, client_losses=losses, floor=0.2, grace=rule, memory=second.memory, accuracies=accuracies
    )
    assert third.values == pytest.approx((5.5, 5.5, 0.55, 0.2))  # poor after poor: the floor, not the grace
    unscored = round_quality(result, client_losses=losses, floor=0.2, grace=rule, accuracies=accuracies)
    assert unscored.values[3] == 0.2  # a rule without a chance never graces the task's first round
    with pytest.raises(ConfigError, match="remembers 4 clients"):
        round_quality(
            get_strategy("fedavg").round(torch.zeros(2), torch.eye(2), [1, 1]),
            client_losses=[1.0, 2.0],
            grace=rule,
            memory=first.memory,
            accuracies=[0.9, 0.9],
        )
    with pytest.raises(ConfigError, match="needs each client's validation accuracy"):
        round_quality(result, client_losses=losses, grace=rule)


def test_a_doubtful_update_is_held_at_the_floor_never_graced_and_counts_as_poor() -> None:
    """Round 2 after a good round 1. Client 1 passed screening narrowly (a free rider's noise clears rule 5 by
    chance now and then): its good loss ratio is held at the floor. Client 3, poor and doubtful, is not graced
    though its model classifies. In round 3 client 1, sure now but poor, gets no grace: its last round counts as
    poor. Without a floor (the seed's measure) a doubt removes nobody: the values stand, the grace is still
    refused."""
    from fedchain.fl.quality import GraceMemory, GraceRule, RoundQuality

    result = get_strategy("fedavg").round(torch.zeros(4), torch.eye(4), [1, 1, 1, 1])
    rule, good, accuracies = GraceRule(0.5, 2), GraceMemory((False,) * 4, (0,) * 4), [0.9] * 4
    doubt = [False, True, False, True]
    losses = [1.0, 1.0, 1.0, 10.0]  # median 1: q = [1, 1, 1, 0.1]

    def scored(
        memory: GraceMemory, doubtful: list[bool] | None, floor: float = 0.2, losses: list[float] = losses
    ) -> RoundQuality:
        return round_quality(
            result,
            client_losses=losses,
            floor=floor,
            grace=rule,
            memory=memory,
            accuracies=accuracies,
            doubtful=doubtful,
        )

    assert scored(good, None).values == pytest.approx((1.0, 1.0, 1.0, 0.5))  # sure: client 3 graced
    second = scored(good, doubt)
    assert second.values == pytest.approx((1.0, 0.2, 1.0, 0.2))
    assert second.memory == GraceMemory((False, True, False, True), (0, 0, 0, 0), (False,) * 4)
    third = scored(second.memory, None, losses=[1.0, 10.0, 1.0, 1.0])
    assert third.values == pytest.approx((1.0, 0.2, 1.0, 1.0))  # poor after a doubtful round: no grace
    seed = scored(good, doubt, floor=0.0)
    assert seed.values == pytest.approx((1.0, 1.0, 1.0, 0.1)) and seed.memory == second.memory
    with pytest.raises(ConfigError, match="3 doubt flags for 4 clients"):
        scored(good, doubt[:3])


@pytest.mark.parametrize("allowance", [-1, 1.5, True, "2"])
def test_a_grace_that_is_not_a_whole_number_of_rounds_is_refused(allowance: object) -> None:
    from fedchain.fl.quality import GraceRule
    from fedchain.taskspec import TaskSpec

    with pytest.raises(ConfigError, match="quality_grace must be a whole number"):
        GraceRule(0.5, allowance)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="quality_grace must be a whole number"):
        TaskSpec(quality_grace=allowance)  # type: ignore[arg-type]


def test_the_grace_memory_travels_in_the_strategy_state_through_a_checkpoint(tmp_path: object) -> None:
    from pathlib import Path

    from fedchain.aggregator.checkpoint import load_strategy_state, save_strategy_state
    from fedchain.fl.quality import GraceMemory, grace_memory, remembered
    from fedchain.fl.strategies.fedave import FedAVEState

    assert grace_memory(None) == GraceMemory()
    state = remembered(FedAVEState(round=3), GraceMemory((True, False), (1, 2), (True, False)))
    save_strategy_state(Path(str(tmp_path)), 3, state)
    loaded = load_strategy_state(Path(str(tmp_path)), 3, FedAVEState)
    assert loaded is not None and grace_memory(loaded) == GraceMemory((True, False), (1, 2), (True, False))
