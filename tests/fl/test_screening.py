"""Screening: each rule on hand-built updates, honest clients kept, attacks dropped with their reason."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from fedchain.errors import ConfigError
from fedchain.fl import screening
from fedchain.fl.screening import (
    CHANCE_DEVIATIONS,
    NO_SCREENING,
    ScreeningConfig,
    ScreeningReason,
    ValidationAccuracy,
    agreement_against,
    agreement_with_others,
    chance_limit,
    excess_kurtosis,
    figure_together,
    screened_updates,
)

F64 = torch.float64
#: Parameters of the hand-built updates: enough for random directions to be nearly orthogonal
#: (the cosine of two random directions has a spread of 1/sqrt(DIM), 0.007).
DIM = 20_000
HONEST = 5


def honest_updates(n: int = HONEST, seed: int = 0) -> torch.Tensor:
    """``n`` updates sharing a direction (cosine about 0.8 to each other), norms within about 10%."""
    generator = torch.Generator().manual_seed(seed)
    common = torch.randn(DIM, generator=generator)
    return torch.stack([common + 0.5 * torch.randn(DIM, generator=generator) for _ in range(n)])


def with_attacker(attack: torch.Tensor, updates: torch.Tensor | None = None) -> torch.Tensor:
    """The honest updates with ``attack`` as the last row."""
    honest = honest_updates() if updates is None else updates
    return torch.cat([honest, attack[None, :]])


def everyone(n: int) -> torch.Tensor:
    return torch.ones(n, dtype=torch.bool)


def losses_of(n: int, value: float = 1.0) -> torch.Tensor:
    return torch.full((n,), value, dtype=F64)


def accuracy_of(n: int, value: float = 0.9, *, rarest: float = 0.1, samples: int = 1000) -> ValidationAccuracy:
    return ValidationAccuracy(torch.full((n,), value, dtype=F64), rarest, samples)


def screen(
    updates: torch.Tensor,
    present: torch.Tensor,
    losses: torch.Tensor | None = None,
    config: ScreeningConfig = ScreeningConfig(),  # noqa: B008 (frozen)
    last_step: torch.Tensor | None = None,
    *,
    accuracy: ValidationAccuracy | None = None,
    **kwargs: object,
) -> screening.ScreeningResult:
    """:func:`fedchain.fl.screening.screen`, every model at 90% validation accuracy unless a test gives its own
    (the chance test, rule 1, then passes them all)."""
    accuracy = accuracy_of(updates.shape[0]) if accuracy is None else accuracy
    return screening.screen(updates, present, losses, config, last_step, accuracy=accuracy, **kwargs)  # type: ignore[arg-type]


def test_honest_updates_are_all_accepted_with_the_defaults() -> None:
    updates = honest_updates(10)

    result = screen(updates, everyone(10), losses_of(10))

    assert result.accepted.all()
    assert result.rejected() == {}


@pytest.mark.parametrize("factor", [10.0, 1000.0])
def test_a_scaled_update_is_rejected_for_its_norm(factor: float) -> None:
    honest = honest_updates()

    result = screen(with_attacker(factor * honest[0], honest), everyone(HONEST + 1), losses_of(HONEST + 1))

    assert result.rejected() == {HONEST: ScreeningReason.NORM_TOO_LARGE}
    assert result.norms[HONEST] / result.median_norm > ScreeningConfig().max_norm_ratio  # type: ignore[operator]


def test_a_sign_flipped_update_is_rejected_for_its_direction() -> None:
    honest = honest_updates()

    result = screen(with_attacker(-honest[0], honest), everyone(HONEST + 1), losses_of(HONEST + 1))

    assert result.rejected() == {HONEST: ScreeningReason.DIRECTION}
    assert result.cosines[HONEST] < -0.5
    assert (result.cosines[:HONEST] > 0.5).all()


def test_a_zero_update_is_rejected_as_a_free_rider() -> None:
    result = screen(with_attacker(torch.zeros(DIM)), everyone(HONEST + 1), losses_of(HONEST + 1))

    assert result.rejected() == {HONEST: ScreeningReason.NORM_TOO_SMALL}


def test_a_tiny_update_is_rejected_below_the_norm_floor() -> None:
    honest = honest_updates()

    result = screen(with_attacker(0.01 * honest[0], honest), everyone(HONEST + 1), losses_of(HONEST + 1))

    assert result.rejected() == {HONEST: ScreeningReason.NORM_TOO_SMALL}


def test_gaussian_noise_of_the_updates_own_norm_is_rejected_for_its_direction_on_agreeing_data() -> None:
    # prepare: a task on IID-like data raises min_cosine above the noise's spread (the default keeps skewed clients)
    honest = honest_updates()
    noise = torch.randn(DIM, generator=torch.Generator().manual_seed(7))
    noise = noise / noise.norm() * honest[0].norm()
    config = ScreeningConfig(min_cosine=0.1)

    result = screen(with_attacker(noise, honest), everyone(HONEST + 1), losses_of(HONEST + 1), config)

    assert result.rejected() == {HONEST: ScreeningReason.DIRECTION}
    assert abs(float(result.cosines[HONEST])) < 0.03


def noise_like(update: torch.Tensor, seed: int) -> torch.Tensor:
    """Gaussian noise of ``update``'s norm (the noise attack; a random free rider's differs only in its norm)."""
    noise = torch.randn(DIM, generator=torch.Generator().manual_seed(seed))
    return noise / noise.norm() * update.norm()


def skewed_updates(n: int, shared: float, seed: int = 0) -> torch.Tensor:
    """``n`` updates that mostly disagree: a common part of weight ``shared`` plus a large part of their own.

    Pairwise cosines are about ``shared**2 / (1 + shared**2)``: 0.083 for shared 0.3, 12 noise sigmas at DIM.
    """
    generator = torch.Generator().manual_seed(seed)
    common = torch.randn(DIM, generator=generator)
    return torch.stack([shared * common + torch.randn(DIM, generator=generator) for _ in range(n)])


@pytest.mark.parametrize("seed", [7, 8, 9])
def test_gaussian_noise_of_an_honest_norm_is_rejected_as_uncorrelated_with_the_defaults(seed: int) -> None:
    honest = honest_updates()

    result = screen(with_attacker(noise_like(honest[0], seed), honest), everyone(HONEST + 1), losses_of(HONEST + 1))

    assert result.rejected() == {HONEST: ScreeningReason.UNCORRELATED}
    assert float(result.agreement[HONEST]) < 3  # |N(0, 1)|-sized, in sigmas of noise
    assert (result.agreement[:HONEST] > 100).all()  # cosine 0.8 is 113 sigmas at DIM


def test_honest_updates_that_barely_agree_still_pass_and_noise_among_them_does_not() -> None:
    # prepare: 8 skewed honest clients (pairwise cosine about 0.08) and 2 noise attackers
    honest = skewed_updates(8, shared=0.3)
    updates = torch.cat([honest, noise_like(honest[0], 1)[None], noise_like(honest[1], 2)[None]])

    # execute
    result = screen(updates, everyone(10), losses_of(10))

    # assert: the rule does not need the honest to agree much, only more than noise can
    assert result.rejected() == {8: ScreeningReason.UNCORRELATED, 9: ScreeningReason.UNCORRELATED}
    assert (result.agreement[:8] > ScreeningConfig().min_agreement).all()  # type: ignore[operator]


@pytest.mark.parametrize("reassess", [False, True])
def test_an_honest_update_that_noise_among_the_others_drags_below_the_rule_is_kept_when_measured_again(
    reassess: bool,
) -> None:
    # prepare: 7 skewed honest clients (pairwise cosine about 0.02) and 3 noise attackers; against all nine
    # others, honest client 5 agrees 3.8 noise sigmas, against the six other honest ones 5.6
    honest = skewed_updates(7, shared=0.15)
    updates = torch.cat([honest, *(noise_like(honest[i], 20 + i)[None] for i in range(3))])
    config = ScreeningConfig(min_agreement=4.0, reassess_agreement=reassess)
    assert float(agreement_with_others(updates)[5]) * DIM**0.5 < 4 < float(agreement_with_others(honest)[5]) * DIM**0.5

    # execute
    result = screen(updates, everyone(10), losses_of(10), config)

    # assert: measured again against the updates that passed, the honest client is kept; noise is not
    noise = dict.fromkeys((7, 8, 9), ScreeningReason.UNCORRELATED)
    assert result.rejected() == (noise if reassess else {5: ScreeningReason.UNCORRELATED, **noise})
    assert (result.agreement[7:] < 3).all()


def test_sybils_sending_one_noise_vector_agree_only_with_each_other_and_are_rejected() -> None:
    # prepare: 7 honest clients and 3 copies of one noise vector: each copy has |cos| 1 with two others
    honest = honest_updates(7)
    updates = torch.cat([honest, noise_like(honest[0], 3).expand(3, -1)])

    # execute
    result = screen(updates, everyone(10), losses_of(10))

    # assert: the median over the 9 others is still a cosine with an honest update
    assert result.rejected() == dict.fromkeys((7, 8, 9), ScreeningReason.UNCORRELATED)


def test_the_agreement_rule_set_to_none_lets_noise_through_as_before() -> None:
    honest = honest_updates()
    updates = with_attacker(noise_like(honest[0], 4), honest)

    result = screen(updates, everyone(HONEST + 1), losses_of(HONEST + 1), ScreeningConfig(min_agreement=None))

    assert result.accepted.all()
    assert result.agreement.isnan().all()


def test_the_agreement_rule_skips_models_too_small_for_noise_to_look_different() -> None:
    # prepare: 3 parameters, below (2 * 8)**2: three random directions agree by chance
    updates = torch.randn(4, 3, generator=torch.Generator().manual_seed(5))

    result = screen(updates, everyone(4), config=ScreeningConfig(max_loss_ratio=None, min_cosine=None))

    assert result.agreement.isnan().all()
    assert ScreeningReason.UNCORRELATED not in result.reasons


def test_agreement_is_the_larger_of_the_median_absolute_cosine_and_the_cosine_to_the_others_median() -> None:
    """Rows x, y, -x, x+y. Median |cos| to the others: x (0, 1, .707) -> .707; y (0, 0, .707) -> 0;
    -x -> .707; x+y (.707, .707, .707) -> .707. The others' coordinate medians: for x, of y, -x, x+y:
    (0, 1), |cos| 0; for y, of x, -x, x+y: (1, 0), 0; for -x: (0, 0), 0; for x+y, of x, y, -x: (0, 0), 0."""
    updates = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [1.0, 1.0]], dtype=F64)

    agreement = agreement_with_others(updates)

    torch.testing.assert_close(agreement, torch.tensor([0.5**0.5, 0.0, 0.5**0.5, 0.5**0.5], dtype=F64))


def test_the_agreement_of_one_update_against_a_pool_is_its_agreement_with_the_others() -> None:
    # prepare: 5 honest updates, a noise vector and a copy of the first honest update
    honest = honest_updates()
    updates = torch.cat([honest, noise_like(honest[0], 12)[None], honest[:1]]).to(F64)

    # execute
    everyone_at_once = agreement_with_others(updates)
    one_at_a_time = [agreement_against(updates[i], updates[torch.arange(7) != i]) for i in range(7)]

    # assert
    torch.testing.assert_close(torch.tensor(one_at_a_time, dtype=F64), everyone_at_once)


def test_agreement_late_in_training_comes_from_the_others_median_when_single_updates_are_mostly_noise() -> None:
    # prepare: 9 updates, each a small common part of weight 0.16 plus noise: pairwise cosines of about
    # 0.025 (3.5 noise sigmas at DIM, below the default 4), but the median of 8 others averages their noise out
    generator = torch.Generator().manual_seed(11)
    common = torch.randn(DIM, generator=generator)
    updates = torch.stack([0.16 * common + torch.randn(DIM, generator=generator) for _ in range(9)])
    units = updates / updates.norm(dim=1, keepdim=True)
    pairwise = (units @ units.T).abs()[~torch.eye(9, dtype=torch.bool)].reshape(9, 8).median(dim=1).values

    # execute
    result = screen(updates, everyone(9), losses_of(9))

    # assert
    assert (pairwise * DIM**0.5 < 4).all()
    assert result.accepted.all()


def test_three_sybil_copies_of_a_poisoned_update_among_ten_are_all_rejected() -> None:
    # prepare: 7 honest clients and 3 identical copies of one sign-flipped update (norm like the honest ones)
    honest = honest_updates(7)
    poisoned = -honest.mean(dim=0)
    updates = torch.cat([honest, poisoned.expand(3, -1)])

    # execute
    result = screen(updates, everyone(10), losses_of(10))

    # assert: the copies cannot drag the median, which 7 honest updates hold
    assert result.rejected() == {
        7: ScreeningReason.DIRECTION,
        8: ScreeningReason.DIRECTION,
        9: ScreeningReason.DIRECTION,
    }
    assert result.accepted[:7].all()


def test_a_model_with_a_high_validation_loss_is_rejected_by_the_loss_check() -> None:
    # client 4: an honest model on skewed data (measured up to 26x the median); client 5: a garbage model
    updates = honest_updates(6)
    losses = torch.tensor([1.0, 1.1, 0.9, 1.2, 26.0, 150.0], dtype=F64)

    result = screen(updates, everyone(6), losses)

    assert result.rejected() == {5: ScreeningReason.LOSS_TOO_HIGH}
    assert result.median_loss == pytest.approx(1.15)


def test_a_model_whose_loss_is_not_finite_is_rejected_even_in_a_small_round() -> None:
    result = screen(honest_updates(2), everyone(2), torch.tensor([1.0, math.inf], dtype=F64))

    assert result.rejected() == {1: ScreeningReason.LOSS_NOT_FINITE}


def test_with_fewer_than_three_updates_only_the_absolute_checks_apply() -> None:
    # prepare: two updates, one scaled x1000; a third row is NaN; a fourth is absent (NaN, not present)
    honest = honest_updates(1)[0]
    updates = torch.stack([honest, 1000 * honest, torch.full((DIM,), math.nan), torch.full((DIM,), math.nan)])
    present = torch.tensor([True, True, True, False])

    # execute (rule 5 would read the last step: it is relative too)
    losses = torch.tensor([1.0, 50.0, 1.0, math.nan], dtype=F64)
    result = screen(updates, present, losses)
    later = screen(updates, present, losses, ScreeningConfig(), last_step=honest)

    # assert: the median of two is no robust statistic: the scaled update and its loss pass
    assert result.reasons == (
        ScreeningReason.ACCEPTED,
        ScreeningReason.ACCEPTED,
        ScreeningReason.NON_FINITE,
        ScreeningReason.ABSENT,
    )
    assert math.isnan(result.median_norm)
    assert later.reasons == result.reasons and not later.doubtful.any()


def test_a_zero_update_is_rejected_even_in_a_small_round() -> None:
    updates = torch.stack([honest_updates(1)[0], torch.zeros(DIM)])

    result = screen(updates, everyone(2), losses_of(2))

    assert result.rejected() == {1: ScreeningReason.NORM_TOO_SMALL}


def test_absent_rows_are_never_read_into_the_statistics() -> None:
    # prepare: the same honest round, once with an absent row of huge values appended
    honest = honest_updates()
    updates = torch.cat([honest, torch.full((1, DIM), 1e30)])
    present = torch.tensor([True] * HONEST + [False])

    # execute
    with_absent = screen(updates, present, losses_of(HONEST + 1))
    alone = screen(honest, everyone(HONEST), losses_of(HONEST))

    # assert
    assert with_absent.median_norm == alone.median_norm
    assert with_absent.reasons == (*alone.reasons, ScreeningReason.ABSENT)


def test_the_screened_updates_mark_rejected_rows_nan_and_keep_accepted_rows() -> None:
    honest = honest_updates()
    updates = with_attacker(1000 * honest[0], honest)

    sent = screened_updates(updates, screen(updates, everyone(HONEST + 1), losses_of(HONEST + 1)))

    assert torch.equal(sent[:HONEST], honest)
    assert sent[HONEST].isnan().all()


def test_clipping_scales_accepted_updates_down_to_the_median_norm() -> None:
    # prepare: norms 1, 2, 3 along one axis: the median norm is 2
    updates = torch.tensor([[1.0, 0.0], [2.0, 0.0], [3.0, 0.0]])
    config = ScreeningConfig(clip_to_median_norm=True, max_loss_ratio=None)

    # execute
    result = screen(updates, everyone(3), config=config)

    # assert
    torch.testing.assert_close(result.scales, torch.tensor([1.0, 1.0, 2 / 3], dtype=F64))
    torch.testing.assert_close(screened_updates(updates, result), torch.tensor([[1.0, 0.0], [2.0, 0.0], [2.0, 0.0]]))


def test_a_rule_set_to_none_does_not_apply() -> None:
    honest = honest_updates()
    config = ScreeningConfig(max_norm_ratio=None)

    result = screen(with_attacker(1000 * honest[0], honest), everyone(HONEST + 1), losses_of(HONEST + 1), config)

    assert result.accepted.all()


def test_screening_disabled_accepts_every_present_update() -> None:
    updates = with_attacker(-1000 * honest_updates()[0])
    present = torch.tensor([True] * HONEST + [False])

    result = screen(updates, present, config=NO_SCREENING)

    assert result.accepted.tolist() == present.tolist()


def test_the_loss_check_without_losses_says_what_to_pass() -> None:
    with pytest.raises(ConfigError, match="validation loss") as caught:
        screen(honest_updates(), everyone(HONEST))

    assert "max_loss_ratio" in caught.value.hint


@pytest.mark.parametrize(
    "settings",
    [
        {"max_norm_ratio": 1.0},
        {"max_norm_ratio": math.inf},
        {"min_norm_ratio": 1.5},
        {"min_norm_ratio": 0.0},
        {"max_loss_ratio": 0.5},
        {"min_cosine": 1.0},
        {"min_agreement": 0.0},
        {"min_agreement": math.inf},
        {"min_novelty": 0.0},
        {"min_novelty": math.nan},
        {"novelty_margin": 0.0},
        {"novelty_margin": math.inf},
        {"doubt_max_kurtosis": 0.0},
        {"doubt_max_kurtosis": math.nan},
        {"min_updates": 2},
    ],
)
def test_a_threshold_that_would_reject_honest_clients_or_mean_nothing_is_refused(settings: dict[str, float]) -> None:
    with pytest.raises(ConfigError):
        ScreeningConfig(**settings)  # type: ignore[arg-type]


def rounds_apart(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A last global step, and honest updates of the next round: each shares a direction with that step and, as
    every round learns something new, a new direction the step did not have."""
    generator = torch.Generator().manual_seed(seed)
    last_step, new = torch.randn(DIM, generator=generator), torch.randn(DIM, generator=generator)
    updates = torch.stack([last_step + 0.5 * new + 0.5 * torch.randn(DIM, generator=generator) for _ in range(HONEST)])
    return last_step, updates


@pytest.mark.parametrize("noise", [0.0, 0.1, 0.5, 2.0])
def test_a_disguised_free_rider_resending_the_last_global_step_with_noise_is_rejected_as_stale(noise: float) -> None:
    last_step, updates = rounds_apart()
    generator = torch.Generator().manual_seed(9)
    rms = float(last_step.pow(2).mean().sqrt())
    disguised = last_step + noise * rms * torch.randn(DIM, generator=generator)
    config = ScreeningConfig()  # the default rule: min_novelty 3

    result = screen(with_attacker(disguised, updates), everyone(HONEST + 1), losses_of(HONEST + 1), config, last_step)

    assert result.rejected() == {HONEST: ScreeningReason.STALE}
    assert result.novelty is not None and float(result.novelty[:HONEST].min()) > 10 * 2.0


@pytest.mark.parametrize("direction", [1.0, -1.0])
def test_an_update_unlike_its_rounds_others_that_follows_the_last_step_is_kept_and_noise_is_not(
    direction: float,
) -> None:
    """Late on skewed data (reproduce robustness, round 8): the others learn a direction of their own, one honest
    update follows (or steps back along) the last global step, with a trace of the round's direction and much of
    its own; by the two measures among the round it is below 3 noise deviations."""
    generator = torch.Generator().manual_seed(0)
    last_step, new = torch.randn(DIM, generator=generator), torch.randn(DIM, generator=generator)
    others = torch.stack([new + 0.5 * torch.randn(DIM, generator=generator) for _ in range(HONEST)])
    if direction < 0:
        torch.randn(DIM, generator=generator)  # the second case draws its own part after the first's
    skewed = direction * last_step + 0.025 * new + torch.randn(DIM, generator=generator)
    updates = with_attacker(skewed, others)
    noisy = with_attacker(noise_like(others[0], 3), others)
    n = HONEST + 1

    kept = screen(updates, everyone(n), losses_of(n), ScreeningConfig(), last_step)
    earlier = ScreeningConfig(agree_with_last_step=False, novelty_vouches=False)  # the rule before either
    before = screen(updates, everyone(n), losses_of(n), earlier, last_step)
    noise = screen(noisy, everyone(n), losses_of(n), ScreeningConfig(), last_step)

    assert kept.accepted.all() and float(kept.agreement[HONEST]) > 50  # |cos| to the step: about 0.7, 100 sigmas
    assert before.rejected() == {HONEST: ScreeningReason.UNCORRELATED} and float(before.agreement[HONEST]) < 3
    assert noise.rejected() == {HONEST: ScreeningReason.UNCORRELATED}  # noise follows no step


def late_round(learning: float, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """Late in training: honest updates follow the last step a little, and what they add to it is mostly their
    own SGD noise, but for a direction they learn together in one small layer (the last 2,000 of DIM scalars,
    each coordinate at ``learning`` times the noise's). Returns the last step, the updates with a disguised free
    rider (the step plus noise of half its RMS) as the last row, and the two layers' sizes."""
    generator = torch.Generator().manual_seed(seed)
    small = 2000
    last_step = torch.randn(DIM, generator=generator)
    new = torch.zeros(DIM)
    new[DIM - small :] = torch.randn(small, generator=generator)
    honest = torch.stack(
        [0.5 * last_step + learning * new + torch.randn(DIM, generator=generator) for _ in range(HONEST)]
    )
    rider = last_step + 0.5 * torch.randn(DIM, generator=generator)
    return last_step, with_attacker(rider, honest), [DIM - small, small]


def test_what_an_update_learns_in_one_layer_counts_as_new_and_a_free_riders_noise_does_not() -> None:
    last_step, updates, layers = late_round(learning=0.4)
    n = HONEST + 1

    by_layer = screen(updates, everyone(n), losses_of(n), ScreeningConfig(), last_step, layers=layers)
    whole = screen(updates, everyone(n), losses_of(n), ScreeningConfig(novelty_by_layer=False), last_step)
    before = ScreeningConfig(min_novelty=2.0, novelty_by_layer=False)  # the rule of specs written before
    old = screen(updates, everyone(n), losses_of(n), before, last_step, layers=layers)

    assert by_layer.rejected() == {HONEST: ScreeningReason.STALE}
    assert float(by_layer.novelty[:HONEST].min()) > 2 * 3.0
    assert set(whole.rejected()) > {HONEST}  # over the whole vector the layer's lesson drowns in the noise
    assert float(whole.novelty[:HONEST].max()) < 3 * 2.0
    assert HONEST not in old.rejected() and float(old.novelty[HONEST]) > 2.0  # noise above 2 deviations: passed


def learning_everywhere(learning: float, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """Late in training, honest updates that learn a little in each of three small layers (the last 6,000 of DIM
    scalars, 2,000 each, at ``learning`` times their noise) and nothing in the large one that dominates the whole
    vector; the last row is a disguised free rider. Returns the last step, the updates and the layers' sizes."""
    generator = torch.Generator().manual_seed(seed)
    layers = [DIM - 6000, 2000, 2000, 2000]
    last_step, new = torch.randn(DIM, generator=generator), torch.zeros(DIM)
    new[DIM - 6000 :] = torch.randn(6000, generator=generator)
    honest = torch.stack(
        [0.5 * last_step + learning * new + torch.randn(DIM, generator=generator) for _ in range(HONEST)]
    )
    rider = last_step + 0.5 * torch.randn(DIM, generator=generator)
    return last_step, with_attacker(rider, honest), layers


def test_what_an_update_learns_a_little_in_every_layer_counts_together_and_a_free_riders_noise_does_not() -> None:
    last_step, updates, layers = learning_everywhere(learning=0.2)
    n = HONEST + 1

    together = screen(updates, everyone(n), losses_of(n), ScreeningConfig(), last_step, layers=layers)
    apart = ScreeningConfig(novelty_together=False)  # the rule of specs written before
    each = screen(updates, everyone(n), losses_of(n), apart, last_step, layers=layers)

    assert each.rejected() == dict.fromkeys([0, 1, 2, HONEST], ScreeningReason.STALE)  # no layer clears 3 alone
    assert together.rejected() == {HONEST: ScreeningReason.STALE}
    assert bool((together.novelty[:HONEST] > each.novelty[:HONEST]).all())
    assert float(together.novelty[:HONEST].min()) >= 3.0


def test_the_figure_of_views_together_is_as_rare_for_noise_as_the_best_view_and_adds_up_what_each_shows() -> None:
    one = torch.tensor([[2.7]], dtype=F64)
    assert float(figure_together(one)[0]) == pytest.approx(2.7, abs=1e-9)  # one view: its own figure
    weak = torch.full((3, 1), 2.2, dtype=F64)
    assert float(figure_together(weak)[0]) > 3.0  # three weak views together: more than any of them
    lone = torch.tensor([[5.0], [0.8], [0.8]], dtype=F64)
    assert 4.0 < float(figure_together(lone)[0]) < 5.0  # one strong view among noise: about its own
    # Noise: each view's figure |N(0, 1)|. The figure together passes a threshold about as often as the best view.
    noise = torch.randn(3, 400_000, generator=torch.Generator().manual_seed(0), dtype=F64).abs()
    for threshold in (2.5, 3.0):
        best = float((noise.amax(dim=0) >= threshold).double().mean())
        combined = float((figure_together(noise) >= threshold).double().mean())
        assert combined == pytest.approx(best, rel=0.1)


def test_an_update_that_clears_the_novelty_rule_narrowly_is_accepted_in_doubt() -> None:
    """A free rider's noise clears rule 5 now and then by chance. Accepted less than ``novelty_margin`` above
    ``min_novelty``, it is aggregated but in doubt (its quality is held at the floor); honest updates, far above,
    are sure; without a margin, or without rule 5, nobody is in doubt."""
    last_step, updates = rounds_apart()
    n = HONEST + 1
    rider = with_attacker(last_step + 0.5 * torch.randn(DIM, generator=torch.Generator().manual_seed(9)), updates)
    measured = screen(rider, everyone(n), losses_of(n), ScreeningConfig(min_novelty=0.01), last_step)
    figure = float(measured.novelty[HONEST])
    assert 0.2 < figure < 3  # noise: about |N(0, 1)|

    # A threshold just under the rider's figure: the rule lets it through, narrowly.
    narrow = ScreeningConfig(min_novelty=figure - 0.1, novelty_margin=0.5)
    result = screen(rider, everyone(n), losses_of(n), narrow, last_step)
    assert result.accepted.all() and result.doubtful.tolist() == [False] * HONEST + [True]
    sure = screen(rider, everyone(n), losses_of(n), dataclasses.replace(narrow, novelty_margin=None), last_step)
    assert sure.accepted.all() and not sure.doubtful.any()
    off = screen(rider, everyone(n), losses_of(n), ScreeningConfig(min_novelty=None), last_step)
    assert not off.doubtful.any()
    first_round = screen(rider, everyone(n), losses_of(n), narrow)  # no last step: rule 5 measured nothing
    assert not first_round.doubtful.any()
    assert not screen(rider, everyone(n), losses_of(n), ScreeningConfig(enabled=False), last_step).doubtful.any()


@pytest.mark.parametrize("layers", [None, [DIM - 2000, 2000]])
def test_a_narrow_pass_is_in_doubt_when_its_new_part_is_shaped_like_gaussian_noise(layers: list[int] | None) -> None:
    """The doubt is for the disguised free rider's Gaussian noise. A narrow pass whose new part is heavy-tailed,
    as SGD's drift is (Gaussian draws of uneven scale here), is no doubt with ``doubt_max_kurtosis``;
    without it (a spec stored before the setting) both are in doubt. The shape only reads on the doubt: a rider
    that shapes its noise so escapes it, and still has to clear ``min_novelty`` every round."""
    last_step, updates = rounds_apart()
    n = HONEST + 1
    generator = torch.Generator().manual_seed(9)
    uneven = torch.randn(DIM, generator=generator) * torch.rand(DIM, generator=generator).pow(4) * 5
    riders = {
        "gaussian": last_step + 0.5 * torch.randn(DIM, generator=generator),
        "heavy": last_step + 0.5 * uneven,
    }
    doubt = {}
    for name, rider in riders.items():
        figure = float(
            screen(
                with_attacker(rider, updates), everyone(n), losses_of(n), ScreeningConfig(), last_step, layers=layers
            ).novelty[HONEST]
        )
        narrow = ScreeningConfig(min_novelty=figure - 0.1)  # the default margin: 0.5 above the threshold
        shaped = screen(with_attacker(rider, updates), everyone(n), losses_of(n), narrow, last_step, layers=layers)
        anyway = dataclasses.replace(narrow, doubt_max_kurtosis=None)
        unshaped = screen(with_attacker(rider, updates), everyone(n), losses_of(n), anyway, last_step, layers=layers)
        assert shaped.accepted.all() and unshaped.doubtful.tolist() == [False] * HONEST + [True]
        doubt[name] = bool(shaped.doubtful[HONEST])

    assert doubt == {"gaussian": True, "heavy": False}


def test_the_excess_kurtosis_is_zero_for_gaussian_noise_of_any_scale_and_grows_with_heavy_tails() -> None:
    generator = torch.Generator().manual_seed(0)
    gaussian = torch.randn(100_000, generator=generator, dtype=F64)
    laplace = torch.distributions.Laplace(0.0, 1.0).sample((100_000,)).to(F64)

    assert excess_kurtosis(gaussian) == pytest.approx(0.0, abs=0.1)
    assert excess_kurtosis(1e-6 * gaussian) == pytest.approx(excess_kurtosis(gaussian))
    assert excess_kurtosis(laplace) == pytest.approx(3.0, abs=0.3)
    assert excess_kurtosis(torch.zeros(10)) == 0.0


def test_an_update_whose_new_part_agrees_with_the_others_passes_the_agreement_rule_and_noise_does_not() -> None:
    """Late on skewed data (cgsv, Dirichlet 0.5, round 9): one honest update follows no step and agrees with the
    others over the whole vector like noise, but learns what they learn in one layer. Rule 5's figure vouches
    for it in rule 4 (``novelty_vouches``); a noise update's new part is noise, and it is still rejected."""
    generator = torch.Generator().manual_seed(0)
    small = 2000
    last_step, new = torch.randn(DIM, generator=generator), torch.zeros(DIM)
    new[DIM - small :] = torch.randn(small, generator=generator)
    others = torch.stack([0.5 * last_step + 0.4 * new + torch.randn(DIM, generator=generator) for _ in range(HONEST)])
    odd = 0.4 * new + torch.randn(DIM, generator=generator)
    layers, n = [DIM - small, small], HONEST + 1

    kept = screen(with_attacker(odd, others), everyone(n), losses_of(n), ScreeningConfig(), last_step, layers=layers)
    before = ScreeningConfig(novelty_vouches=False)
    lost = screen(with_attacker(odd, others), everyone(n), losses_of(n), before, last_step, layers=layers)
    noise = with_attacker(noise_like(odd, 3), others)
    noisy = screen(noise, everyone(n), losses_of(n), ScreeningConfig(), last_step, layers=layers)

    assert kept.accepted.all() and float(kept.agreement[HONEST]) < 3 and float(kept.novelty[HONEST]) > 6
    assert not kept.doubtful.any()
    assert lost.rejected() == {HONEST: ScreeningReason.UNCORRELATED}
    assert noisy.rejected() == {HONEST: ScreeningReason.UNCORRELATED}
    first_round = screen(with_attacker(odd, others), everyone(n), losses_of(n), ScreeningConfig(), layers=layers)
    assert first_round.rejected() == {HONEST: ScreeningReason.UNCORRELATED}  # no last step, no new part: no vouch


def test_layer_sizes_that_do_not_split_the_update_are_refused() -> None:
    last_step, updates, layers = late_round(learning=0.4)
    n = HONEST + 1

    with pytest.raises(ConfigError, match="do not split") as caught:
        screen(updates, everyone(n), losses_of(n), ScreeningConfig(), last_step, layers=layers[:1])

    assert "ParamSpec.sizes" in caught.value.hint


def test_the_novelty_rule_needs_the_last_step_and_a_threshold() -> None:
    last_step, updates = rounds_apart()
    stale = with_attacker(last_step.clone(), updates)

    first_round = screen(stale, everyone(HONEST + 1), losses_of(HONEST + 1), ScreeningConfig(min_novelty=3.0))
    off = screen(stale, everyone(HONEST + 1), losses_of(HONEST + 1), ScreeningConfig(min_novelty=None), last_step)

    assert first_round.accepted.all() and off.accepted.all()


def test_a_client_with_more_data_may_send_a_proportionally_larger_norm() -> None:
    """POW data: a client with 6x the median data takes 6x the steps; a scaled update of median data does not pass."""
    updates = honest_updates(8)
    updates[6:] *= 6.0  # rows 6 and 7: 6x the norm
    sizes = torch.tensor([100.0] * 6 + [600.0, 100.0], dtype=F64)  # row 6 holds 6x the data, row 7 does not

    result = screen(updates, everyone(8), losses_of(8), data_sizes=sizes)
    plain = screen(updates, everyone(8), losses_of(8), ScreeningConfig(norm_by_data=False), data_sizes=sizes)

    assert result.rejected() == {7: ScreeningReason.NORM_TOO_LARGE}
    assert plain.rejected() == {6: ScreeningReason.NORM_TOO_LARGE, 7: ScreeningReason.NORM_TOO_LARGE}
    assert screen(updates, everyone(8), losses_of(8)).rejected() == plain.rejected()  # no sizes: one limit for all
    with pytest.raises(ConfigError, match="one data size per update"):
        screen(updates, everyone(8), losses_of(8), data_sizes=sizes[:5])


@pytest.mark.parametrize("setting", ["norm_by_data", "agree_with_last_step", "novelty_by_layer"])
def test_a_spec_written_before_a_later_rule_reads_it_as_off(setting: str) -> None:
    from fedchain.taskspec import TaskSpec

    new = TaskSpec(dataset="mnist", model="lenet5")
    stated = f'"{setting}":true'.encode()
    older_bytes = new.to_bytes().replace(b"," + stated, b"").replace(stated + b",", b"")

    assert getattr(new.screening, setting) and stated in new.to_bytes()
    older = TaskSpec.from_bytes(older_bytes)
    assert not getattr(older.screening, setting) and older.to_bytes() == older_bytes


def test_the_chance_limit_is_half_of_chance_on_a_large_validation_set_and_stricter_on_a_small_one() -> None:
    assert chance_limit(0.5, rarest=0.1, samples=1000) == pytest.approx(0.05)
    # 200 samples: 4 binomial deviations of a coin of 1/10 below chance is 0.1 - 4 * 0.0212
    assert chance_limit(0.5, rarest=0.1, samples=200) == pytest.approx(0.1 - CHANCE_DEVIATIONS * math.sqrt(0.09 / 200))
    assert chance_limit(0.5, rarest=0.1, samples=100) < 0  # too few samples to tell: nothing is below it
    assert chance_limit(0.5, rarest=0.5, samples=1000) == pytest.approx(0.25)  # two balanced classes
    assert chance_limit(0.5, rarest=0.0, samples=1000) == 0.0  # a class missing: a model may name it honestly
    with pytest.raises(ConfigError, match="class share in"):
        chance_limit(0.5, rarest=1.5, samples=1000)


def test_chance_is_the_rarest_class_share_of_the_validation_set() -> None:
    """On a validation set where class 2 makes up 3%, an honest model that knows only class 2 scores 0.03: that
    is chance for it, not below it (1/classes would have rejected it)."""
    from fedchain.data.datasets import ImageDataset

    labels = torch.tensor([0] * 500 + [1] * 470 + [2] * 30)
    validation = ImageDataset("skewed", torch.zeros(1000, 1, 2, 2), labels, 3, (0.5,), (0.25,))
    accuracy = screening.validation_accuracy([0.03, 0.9, 0.005], validation)

    result = screen(honest_updates(3), everyone(3), losses_of(3), accuracy=accuracy)

    assert accuracy.rarest == pytest.approx(0.03) and accuracy.samples == 1000
    # the limit: 4 binomial deviations below 0.03 over 1,000 samples, 0.0084 (half of it would be 0.015)
    assert chance_limit(0.5, rarest=0.03, samples=1000) == pytest.approx(0.03 - 4 * math.sqrt(0.03 * 0.97 / 1000))
    assert result.rejected() == {2: ScreeningReason.BELOW_CHANCE}


def test_a_model_worse_than_chance_is_rejected_and_one_at_chance_is_not() -> None:
    """A label flipper's model predicts the wrong class (1-4% on 10 classes); an honest model that knows one class
    scores that class's share, about chance."""
    updates = honest_updates(6)
    accuracy = ValidationAccuracy(torch.tensor([0.9, 0.8, 0.1, 0.09, 0.02, 0.0499], dtype=F64), 0.1, 1000)

    result = screen(updates, everyone(6), losses_of(6), accuracy=accuracy)
    off = screen(updates, everyone(6), losses_of(6), ScreeningConfig(min_chance_share=None), accuracy=accuracy)

    assert result.rejected() == {4: ScreeningReason.BELOW_CHANCE, 5: ScreeningReason.BELOW_CHANCE}
    assert off.accepted.all()
    # the models the test judged and kept are what the first round's grace may take as learned; off, it judged none
    assert result.judged_by_chance.tolist() == [True, True, True, True, False, False]
    assert not off.judged_by_chance.any()
    disabled = screen(updates, everyone(6), losses_of(6), ScreeningConfig(enabled=False), accuracy=accuracy)
    assert not disabled.judged_by_chance.any()


def test_the_chance_test_is_absolute_and_waits_for_a_validation_set_large_enough() -> None:
    updates = honest_updates(2)  # fewer than min_updates: the relative rules do not apply, the chance test does
    flipper = ValidationAccuracy(torch.tensor([0.6, 0.03], dtype=F64), 0.1, 1000)
    small = ValidationAccuracy(torch.tensor([0.6, 0.03], dtype=F64), 0.1, 100)

    assert screen(updates, everyone(2), losses_of(2), accuracy=flipper).rejected() == {1: ScreeningReason.BELOW_CHANCE}
    assert screen(updates, everyone(2), losses_of(2), accuracy=small).accepted.all()  # 3 of 100 right: luck can do it
    # on the small set the test cannot reject at all, so it vouches for no model either; nor does it where its
    # limit is lowered for the set's size (10 balanced classes: under 576 samples)
    assert screen(updates, everyone(2), losses_of(2), accuracy=flipper).judged_by_chance.tolist() == [True, False]
    assert not screen(updates, everyone(2), losses_of(2), accuracy=small).judged_by_chance.any()
    for samples, full in ((300, False), (575, False), (576, True), (1000, True)):
        sized = ValidationAccuracy(torch.tensor([0.6, 0.6], dtype=F64), 0.1, samples)
        assert sized.full_strength(0.5) is full
        assert bool(screen(updates, everyone(2), losses_of(2), accuracy=sized).judged_by_chance.all()) is full
    missing = ValidationAccuracy(torch.tensor([0.6, 0.6], dtype=F64), 0.0, 1000)  # a class missing: limit 0
    assert not missing.full_strength(0.5)


def test_a_model_rejected_below_chance_is_left_out_of_the_round_statistics() -> None:
    updates = with_attacker(10.0 * honest_updates(1, seed=3)[0])  # a large update whose model is also below chance
    accuracy = ValidationAccuracy(torch.tensor([0.9] * HONEST + [0.0], dtype=F64), 0.1, 1000)

    result = screen(updates, everyone(HONEST + 1), losses_of(HONEST + 1), accuracy=accuracy)

    assert result.rejected() == {HONEST: ScreeningReason.BELOW_CHANCE}  # reported by the first rule that fires
    assert result.median_norm == pytest.approx(float(updates[:HONEST].norm(dim=1).median()), rel=0.2)
    assert math.isnan(result.norms[HONEST])


def test_the_chance_test_needs_the_accuracies_unless_it_is_off() -> None:
    updates = honest_updates(4)

    with pytest.raises(ConfigError, match="one validation accuracy per client") as raised:
        screening.screen(updates, everyone(4), losses_of(4))
    short = ValidationAccuracy(torch.full((3,), 0.9, dtype=F64), 0.1, 1000)
    with pytest.raises(ConfigError, match="one validation accuracy per client"):
        screening.screen(updates, everyone(4), losses_of(4), accuracy=short)

    assert "min_chance_share to None" in raised.value.hint
    assert screening.screen(updates, everyone(4), losses_of(4), ScreeningConfig(min_chance_share=None)).accepted.all()


@pytest.mark.parametrize("share", [0.0, 1.0, 1.5, -0.5])
def test_a_chance_share_outside_zero_to_one_is_refused(share: float) -> None:
    with pytest.raises(ConfigError, match="min_chance_share must be in"):
        ScreeningConfig(min_chance_share=share)


def test_a_spec_written_before_the_chance_test_reads_it_as_off() -> None:
    from fedchain.taskspec import TaskSpec

    new = TaskSpec(dataset="mnist", model="lenet5")
    stated = b'"min_chance_share":0.5'
    older_bytes = new.to_bytes().replace(b"," + stated, b"").replace(stated + b",", b"")

    assert new.screening.min_chance_share == 0.5 and stated in new.to_bytes()
    older = TaskSpec.from_bytes(older_bytes)
    assert older.screening.min_chance_share is None and older.to_bytes() == older_bytes
