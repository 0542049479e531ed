"""Screening: which of a round's updates any strategy may see (DESIGN.md, Robustness).

A client whose quality falls below the task's thresholds loses its deposit, so
whoever can make honest clients score badly takes their money. Before a
strategy aggregates or scores anything, :func:`screen` drops the updates that
robust statistics over the round call attacks, and :func:`screened_updates`
hands the strategy the survivors: a screened-out row becomes NaN, which every
strategy already treats as a rejected update (quality 0 on chain, like a
malformed one). The rules, in the order a rejection is reported:

1. absolute checks: an update with a NaN or infinite value, a model whose
   validation loss is not finite, a model that classifies the validation set
   worse than chance (``min_chance_share``: the labels it learned are wrong,
   as a label flipper's are; chance is the share of the set's rarest class),
   and (with a norm floor) the zero update;
2. norm against the median norm: above ``max_norm_ratio`` times the round's
   median norm (scaling, boosting), or below ``min_norm_ratio`` times it (a
   free rider sending nearly nothing);
3. direction against a robust aggregate: cosine to the coordinate-wise median
   of the other updates below ``min_cosine`` (sign flips, noise, label
   flipping); the update itself is left out of the median it is compared with,
   or pure noise would agree with it by about 1/sqrt(n) for n updates;
4. agreement: an update indistinguishable from random noise. Gaussian noise
   (the noise attack, a random free rider) has a cosine of about
   ``N(0, 1) / sqrt(d)`` with anything, for ``d`` parameters, while honest
   updates share a component. Two measures of it, in standard deviations of
   noise (times ``sqrt(d)``), and the update is rejected when the larger is
   below ``min_agreement``: the median over the others of ``|cos(u_i, u_j)|``
   (holds on very skewed data, where the others' median direction is weak),
   and ``|cos|`` to the coordinate-wise median of the others (holds late in
   training, when SGD noise dominates every single update and only an
   aggregate of the others shows their common direction). With
   ``reassess_agreement`` an update below the threshold is measured again
   against the updates that passed only: noise among the others dilutes an
   honest update's agreement (three noise attackers of ten pushed honest
   updates below it late in training), and noise cannot vouch for noise
   there. With ``agree_with_last_step``, from round 2 a third measure:
   ``|cos|`` to the last global step. Late in training on skewed data an
   honest update can be near orthogonal to every other one of its round
   (1.9 noise deviations, rejected, its client removed on chain) and still
   follow the step the round before took, or step back along it (24 and
   -19 deviations); noise does neither, and an update that only resends the
   step is rule 5's. With ``novelty_vouches``, from round 2 rule 5's first
   figure speaks for the update too: one whose new part (whole or in a large
   tensor) agrees with the others' by ``min_agreement`` is no noise, though
   late on skewed data its whole vector can agree like noise (2.2 deviations,
   its new part 6.1). Noise scores alike by both measures, and what the vouch
   lets through meets rule 5 and its doubt. Models of fewer than
   ``(2 * min_agreement)**2`` parameters skip the rule (random directions
   agree too often there to tell);
5. novelty: an update that adds nothing to the last global step but noise.
   The disguised free rider of Fraboni et al. (AISTATS 2021) trains nothing
   and resends the difference between the last two global models, which
   every client sees, plus Gaussian noise: its norm and direction pass rules
   2-4, and its model scores like an honest one. Each update's part
   orthogonal to that step (what it adds to it) is measured with rule 4's
   agreement against the others' parts: honest updates learn something
   new together each round, the free rider's part is noise (or nothing).
   With ``novelty_by_layer`` the new part of every large tensor of the model
   (:data:`MIN_LAYER_SIZE` scalars or more, each taken orthogonal to the
   step's part in it) is measured on its own too, and the update keeps its
   best figure: late in training an honest update's new part is mostly SGD
   noise over the whole vector while one layer still learns with the others
   (MNIST and Fashion-MNIST, 10 rounds: 2.1 noise deviations over the whole
   vector, 3.4 or more with its best layer), and a noise vector is noise in
   every layer. With ``novelty_together`` the large tensors' figures also count
   together: late in training an honest update can learn a little in every
   layer and clear the threshold in none (2.6, 2.2 and 1.9 in its three large
   tensors, its client removed on chain), while noise is noise in each. The
   sum of their squares, about chi-square with one degree per tensor for
   noise, is turned into the single figure as unlikely for noise (the best of
   that many ``|N(0, 1)|``), and the update keeps the larger. Rejected below
   ``min_novelty``; reassessed as in rule 4.
   Needs the last step, so it starts in round 2. An update accepted with a
   figure less than ``novelty_margin`` above ``min_novelty`` is in doubt (:attr:`ScreeningResult.doubtful`):
   a rider's noise clears ``min_novelty`` now and then by chance, and its
   quality is then held at the round's floor (:func:`fedchain.fl.quality.round_quality`),
   so the round it slipped through pays it little and counts as poor. The doubt is for noise: with
   ``doubt_max_kurtosis`` a narrow pass whose new part is heavy-tailed in a large tensor (SGD's drift:
   an excess kurtosis of 5 or more in at least one) is no doubt, while the rider's Gaussian noise (0 in
   each) is;
6. the validation-loss check: the client's model's validation loss above
   ``max_loss_ratio`` times the median loss of the round's models.

Every statistic is a median over the present, finite updates, unweighted (a
client chooses its own data size, so a weight would be an attacker's lever):
an attacker moves it only by controlling half the round, Sybil copies
included. With fewer than :attr:`ScreeningConfig.min_updates` present updates
the median of two is their mean and the median of one is itself, so the
relative rules (2-6) prove nothing and only the absolute checks apply.
Optionally (``clip_to_median_norm``) the accepted updates are scaled down to
at most the median norm, so that no survivor outweighs a typical update.

The config is a field of the task spec (:class:`fedchain.taskspec.TaskSpec`),
so the auditor re-runs exactly the aggregator's rules. This module imports
torch only when it screens: the task commands read the config without it.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fedchain.errors import ConfigError

if TYPE_CHECKING:
    import torch

    from fedchain.data.datasets import ImageDataset


class ScreeningReason(str, enum.Enum):
    """Why screening kept or dropped one client's update (a stable code for logs and reports)."""

    ACCEPTED = "accepted"
    #: No update this round (missing, malformed, removed): nothing was screened.
    ABSENT = "absent"
    NON_FINITE = "non_finite"
    LOSS_NOT_FINITE = "loss_not_finite"
    BELOW_CHANCE = "below_chance"
    NORM_TOO_LARGE = "norm_too_large"
    NORM_TOO_SMALL = "norm_too_small"
    DIRECTION = "direction"
    UNCORRELATED = "uncorrelated"
    STALE = "stale"
    LOSS_TOO_HIGH = "loss_too_high"


@dataclass(frozen=True)
class ScreeningConfig:
    """The screening rules of a task; a threshold of None turns its rule off.

    The defaults were chosen on measured MNIST runs (lenet5 and cnn, 5 and 10 clients, lr 0.1,
    batch 10, up to 10 rounds; IID, and Dirichlet with alpha 0.5 and 0.1). They stop x10 and
    x1000 scaling, zero updates, sign flips of updates that agree with the others (IID-like
    data), and Gaussian noise (the noise attack, random free riders) by its lack of agreement
    with any update, skewed data included. Label flipping is stopped by what the flipper's model
    predicts, not by its loss: its model reached only 1-9.6x the median validation loss, where
    honest models on skewed data reach 26x, but its accuracy falls below chance
    (``min_chance_share``).
    Power-law data sizes need ``norm_by_data``: one client with 10x the data took 9x the median
    norm and 8x the median loss, and in round 1 of a POW split the two largest clients (5.4x and
    2.7x the median data) took more than 5x the median norm (docs/robustness.md).

    Attributes:
        enabled: screen at all; False hands every present update to the strategy as before.
        max_norm_ratio: reject a norm above this many median norms. Honest norms of one
            round lay within 0.34-2.3x the median (clients with more data take more steps), once
            4.3x (IID, round 6 of 10, which 4 rejected); a x10 scaling gave at least 6.7x
            (docs/robustness.md, 2026-11-25). 5 keeps the first and stops the second.
        norm_by_data: a client with more data than the round's median data size may send a
            proportionally larger norm: its limit is ``max_norm_ratio`` median norms times its data
            size over the median data size (never less than the plain limit). Its SGD takes that many
            more steps; a client that claims more data to send a larger update gains nothing it would
            not gain from the claim alone, whose weight FedAvg already scales by. A spec written before
            this setting reads as False.
        min_norm_ratio: reject a norm below this fraction of the median norm (a free rider).
            Honest norms stayed above 0.34 of the median; 0.1 only catches near-zero updates.
        min_cosine: reject an update whose cosine to the coordinate-wise median of the others
            is below this. Honest cosines reached -0.16 on Dirichlet(0.1) data in 10 rounds
            (0.46 on IID); a sign flip on IID data gives about -0.6 and Gaussian noise about 0
            (spread 1/sqrt(d) for d parameters). -0.3 keeps the skewed clients; a task on
            IID-like data can raise it to 0.1 to stop noise too.
        min_agreement: reject an update whose agreement with the others (module docstring, rule 4),
            in standard deviations of noise, is below this. Measured on 10 clients (lenet5, d = 61,706,
            cnn, d = 206,026; docs/robustness.md): noise and random free riders scored 0.2-2.6, honest
            updates at least 10 in 5 rounds of IID, Dirichlet 0.5 and 0.1 data, and 6 by round 10 of
            IID data, where the pairwise measure alone fell to 1.7; but late in a Dirichlet-0.5 run an
            honest update scored 3.3 in a round without attackers (reproduce robustness, round 8), and a
            rejected round removes the client on chain. At 3 noise passes about once in 370 client-rounds
            (|N(0, 1)| above 3): an attacker removed at its first rejection is then caught a round later,
            while an honest client wrongly rejected is removed for good. Specs written with 4 keep it. A
            task spec written before this setting reads as None (off), as its aggregator screened.
        agree_with_last_step: from round 2, an update's agreement is at least its ``|cos|`` to the last
            global step, in the same units (module docstring, rule 4). Measured (reproduce robustness,
            MNIST, fedavg and fedfaim, IID, Dirichlet 0.5 and POW, with noise, random free riders and
            Sybils): the two honest updates rule 4 rejected (1.9 and 2.8, each removing its client on
            chain) scored 24 and 19 against the last step, and none of the 216 attacker updates it
            rejected reached 3 there. A spec written before this setting reads as False.
        novelty_vouches: from round 2, an update whose new part (rule 5's figure, first look) agrees with the
            others' by ``min_agreement`` or more passes rule 4 whatever its agreement over the whole vector: late
            on skewed data an honest update can fall below 3 there (2.2, cgsv, Dirichlet 0.5, round 9: its client
            removed on chain) while its new part agrees at 6 and its best large tensor at 7. Noise scores alike
            by both rules, so what this lets through meets rule 5 and its doubt (``novelty_margin``). A spec
            written before this setting reads as False.
        reassess_agreement: measure an update that fails ``min_agreement`` again against the updates
            that passed it (module docstring, rule 4). With 30% noise attackers on Dirichlet-0.5 data,
            honest updates of rounds 7-10 scored 2.3-3.9 against a pool holding the noise, and each
            rejection removed an honest client on chain. A spec written before this setting reads as False.
        min_novelty: reject an update whose new part (module docstring, rule 5), measured as rule 4's
            agreement, is below this. The new part of a disguised free rider is its noise, so it scores
            about ``|N(0, 1)|`` by each measure. Measured over the whole vector alone (reproduce robustness,
            10 clients, 10 rounds, lenet5, MNIST and Fashion-MNIST, IID, Dirichlet 0.5 and POW, every
            strategy, 2 seeds, with and without 2 disguised free riders; docs/robustness.md, 2026-11-27):
            honest updates 2.1 or more, free riders 4.5% of their rounds at 2 or more. With
            ``novelty_by_layer``: honest 3.6 or more (3.4 in the attack rows of every other attack), free
            riders 1.7% of their rounds at 3 or more. One rejection removes the client on chain. Specs written
            with 2 before ``novelty_by_layer`` keep 2; a spec written before this setting reads as None (off).
        novelty_margin: an update that rule 5 accepts with a figure less than this above ``min_novelty`` is in
            doubt (:attr:`ScreeningResult.doubtful`): it is aggregated, but its quality is held at the round's
            floor and never graced (:func:`fedchain.fl.quality.round_quality`). A disguised free rider clears
            ``min_novelty`` (3) in about 1.7% of its rounds by chance, 0.8% by 0.25 more and 0.1% by 0.5 more,
            and is paid in full for that round before it is caught in its next one (5-11% of an honest pay);
            honest updates scored 3.6 or more (3.4 in the attack rows), so a doubt costs an honest client at
            most one round's pay, not its deposit (docs/robustness.md, "A narrow pass"). No effect when rule 5
            is off. A spec written before this setting reads as None (no doubt).
        doubt_max_kurtosis: a narrow pass (``novelty_margin``) is in doubt only when its new part is shaped like
            Gaussian noise in every large tensor (the whole vector when rule 5 measures no tensor): the largest
            excess kurtosis (:func:`excess_kurtosis`, 0 for Gaussian noise) of those parts below this. The
            doubt is for a free rider's noise, and the noise of the disguised free rider, the random free rider
            and the noise attack is Gaussian: its largest figure was at most 0.29 in 162 attacking client-rounds,
            while an honest update's new part is SGD's heavy-tailed drift, 5.0 or more in 1,368 honest
            client-rounds (17 robustness runs: MNIST and Fashion-MNIST, LeNet-5 and the CNN, IID, Dirichlet 0.5
            and POW; docs/robustness.md, "The shape of a narrow pass"). Only the doubt reads it: every update
            still has to clear ``min_novelty``, and a rider that shapes its noise is scored in full in a round it
            slips through, as before the doubt, and rejected in its next one. None (what a spec stored before the
            setting means): every narrow pass is in doubt.
        novelty_by_layer: rule 5 also measures each tensor of :data:`MIN_LAYER_SIZE` scalars or more on its
            own, and an update keeps its best figure (module docstring); :func:`screen` needs the model's
            layer sizes then. A spec written before this setting reads as False.
        novelty_together: with ``novelty_by_layer``, rule 5 also scores the large tensors' figures together
            (:func:`figure_together`) and an update keeps the larger figure. Measured (docs/robustness.md,
            "The layers together"; MNIST, Dirichlet 0.5, fedfaim): an honest update of round 10 scored 1.9-2.6
            in every view (rejected, its client removed on chain) and 3.47 together; 1,800 simulated disguised
            free riders against that run's honest updates cleared 3.5 as often as before (0.06%) and 3 in 1.4%
            of their rounds instead of 1.1% (in doubt, held at the floor). A spec written before this setting
            reads as False.
        min_chance_share: reject a model whose validation accuracy is below this share of chance (the
            share of the validation set's rarest class, 1 / classes when balanced), when the validation set is
            large enough to tell (:func:`chance_limit`). A model trained on its own labels predicts them,
            however skewed its data: one that knows a single class scores that class's share of the validation
            set, chance at worst. One trained on labels mapped to others predicts the wrong class
            systematically. Measured (docs/robustness.md, "Label flippers: a model worse than chance"; 10
            clients, 10 rounds, MNIST and Fashion-MNIST, IID, Dirichlet 0.5 and POW): honest models scored
            0.08 or more (clients of 171-342 samples in round 1 on POW data), label flippers' models 0-0.03
            in most first rounds. A spec written before this setting reads as None (off).
        max_loss_ratio: reject a model whose validation loss is above this many median losses:
            a garbage model (x1000 scaling, a broken update) that the norm rules miss. Honest
            models on Dirichlet-0.5 data reached 26x the median (lenet5, 10 rounds) and 59x
            (cnn, 5 rounds), and 5 rejected them, which removes an honest client on chain;
            a x10 scaling's model reached 18-17,730x (caught by the norm rule first).
            100 keeps every honest model measured (docs/robustness.md, 2026-11-25).
        clip_to_median_norm: scale accepted updates down to at most the median norm (off by
            default: it changes what FedAvg computes for honest clients with large data).
        min_updates: the fewest present updates for which the relative rules apply; below it
            only the absolute checks do (a median of one or two is no robust statistic).
    """

    enabled: bool = True
    max_norm_ratio: float | None = 5.0
    norm_by_data: bool = True
    min_norm_ratio: float | None = 0.1
    min_cosine: float | None = -0.3
    min_agreement: float | None = 3.0
    agree_with_last_step: bool = True
    reassess_agreement: bool = True
    novelty_vouches: bool = True
    min_chance_share: float | None = 0.5
    max_loss_ratio: float | None = 100.0
    min_novelty: float | None = 3.0
    novelty_margin: float | None = 0.5
    doubt_max_kurtosis: float | None = 2.0
    novelty_by_layer: bool = True
    novelty_together: bool = True
    clip_to_median_norm: bool = False
    min_updates: int = 3

    def __post_init__(self) -> None:
        for name in ("max_norm_ratio", "min_norm_ratio", "max_loss_ratio"):
            value = getattr(self, name)
            if value is not None and not (value > 0 and math.isfinite(value)):
                raise ConfigError(
                    f"screening.{name} must be a positive finite number or None, got {value}",
                    hint="a ratio of the round's median; None turns the rule off",
                )
        if self.max_norm_ratio is not None and self.max_norm_ratio <= 1:
            raise ConfigError(
                f"screening.max_norm_ratio must exceed 1, got {self.max_norm_ratio}",
                hint="at 1 or less half the honest clients sit above the limit; 5 is the default",
            )
        if self.min_norm_ratio is not None and self.min_norm_ratio >= 1:
            raise ConfigError(
                f"screening.min_norm_ratio must be below 1, got {self.min_norm_ratio}",
                hint="at 1 or more half the honest clients sit below the floor; 0.1 is the default",
            )
        if self.max_loss_ratio is not None and self.max_loss_ratio <= 1:
            raise ConfigError(
                f"screening.max_loss_ratio must exceed 1, got {self.max_loss_ratio}",
                hint="at 1 or less half the honest clients sit above the limit; 100 is the default",
            )
        if self.min_cosine is not None and not -1 <= self.min_cosine < 1:
            raise ConfigError(
                f"screening.min_cosine must be in [-1, 1), got {self.min_cosine}", hint="-0.3 is the default"
            )
        if self.min_agreement is not None and not (self.min_agreement > 0 and math.isfinite(self.min_agreement)):
            raise ConfigError(
                f"screening.min_agreement must be a positive finite number or None, got {self.min_agreement}",
                hint="standard deviations of noise's cosine (1/sqrt(d)); 3 is the default, None turns the rule off",
            )
        if self.min_novelty is not None and not (self.min_novelty > 0 and math.isfinite(self.min_novelty)):
            raise ConfigError(
                f"screening.min_novelty must be a positive finite number or None, got {self.min_novelty}",
                hint="standard deviations of noise's cosine (1/sqrt(d)); 3 is the default, None turns the rule off",
            )
        if self.novelty_margin is not None and not (self.novelty_margin > 0 and math.isfinite(self.novelty_margin)):
            raise ConfigError(
                f"screening.novelty_margin must be a positive finite number or None, got {self.novelty_margin}",
                hint="0.5 is the default; None scores every update that passes min_novelty in full",
            )
        if self.doubt_max_kurtosis is not None and not (
            self.doubt_max_kurtosis > 0 and math.isfinite(self.doubt_max_kurtosis)
        ):
            raise ConfigError(
                f"screening.doubt_max_kurtosis must be a positive finite number or None, got {self.doubt_max_kurtosis}",
                hint="excess kurtosis (Gaussian noise: 0); 2 is the default, None holds every narrow pass in doubt",
            )
        if self.min_chance_share is not None and not 0 < self.min_chance_share < 1:
            raise ConfigError(
                f"screening.min_chance_share must be in (0, 1) or None, got {self.min_chance_share}",
                hint="a share of chance accuracy (the validation set's rarest class share); 0.5 is the default, "
                "None turns the rule off",
            )
        if self.min_updates < 3:
            raise ConfigError(
                f"screening.min_updates must be at least 3, got {self.min_updates}",
                hint="the median of one or two updates is not robust to any of them",
            )

    @property
    def needs_losses(self) -> bool:
        """Whether :func:`screen` needs each client's validation loss."""
        return self.enabled and self.max_loss_ratio is not None

    @property
    def needs_accuracies(self) -> bool:
        """Whether :func:`screen` needs each client's validation accuracy (:class:`ValidationAccuracy`)."""
        return self.enabled and self.min_chance_share is not None


#: Settings added after the first task specs were written, with the value a spec without them means:
#: the rule its aggregator ran (none). A spec leaves a setting at this value out of its bytes, so an
#: old spec read and written again keeps its datasetId (:meth:`fedchain.taskspec.TaskSpec.to_dict`).
ADDED_LATER: dict[str, object] = {
    "min_agreement": None,
    "agree_with_last_step": False,
    "reassess_agreement": False,
    "novelty_vouches": False,
    "min_novelty": None,
    "novelty_margin": None,
    "doubt_max_kurtosis": None,
    "novelty_by_layer": False,
    "novelty_together": False,
    "norm_by_data": False,
    "min_chance_share": None,
}

#: Screening off: every present update goes to the strategy (experiments that measure an undefended strategy).
NO_SCREENING = ScreeningConfig(enabled=False)


@dataclass(frozen=True)
class ScreeningResult:
    """The outcome of :func:`screen` for one round of ``n`` clients.

    Attributes:
        accepted: which updates the strategy may see, bool ``[n]``.
        reasons: per client, why it was accepted or rejected.
        scales: the factor :func:`screened_updates` multiplies each accepted update by
            (clipping; 1 elsewhere), float64 ``[n]``.
        norms: every present finite update's norm, NaN elsewhere, float64 ``[n]``.
        cosines: cosine to the coordinate-wise median of the others where computed, NaN elsewhere, float64 ``[n]``.
        agreement: the larger of the median ``|cos|`` to the other updates and ``|cos|`` to their median, times
            sqrt(d), where computed (rule 4), NaN elsewhere, float64 ``[n]``.
        novelty: rule 5's agreement of what each update adds to the last global step, where computed, NaN
            elsewhere, float64 ``[n]``.
        median_norm: the round's median norm (NaN when the relative rules did not apply).
        median_loss: the round's median validation loss (NaN when not computed).
        doubtful: accepted updates whose novelty is less than ``novelty_margin`` above ``min_novelty`` (rule 5)
            and (``doubt_max_kurtosis``) whose new part is shaped like Gaussian noise in every large tensor,
            bool ``[n]``.
        judged_by_chance: accepted updates whose model rule 1's chance test (``min_chance_share``) judged at its
            full strength and kept, bool ``[n]``: all False when the rule is off, or when its limit on this
            validation set is lowered for the set's size (:meth:`ValidationAccuracy.full_strength`; on 10 balanced
            classes, under 576 samples), so that nothing is shown by it there. The first round's grace can take it
            as a model that has learned (:attr:`fedchain.fl.quality.GraceRule.by_screen`).
    """

    accepted: torch.Tensor
    reasons: tuple[ScreeningReason, ...]
    scales: torch.Tensor
    norms: torch.Tensor
    cosines: torch.Tensor
    agreement: torch.Tensor
    novelty: torch.Tensor
    median_norm: float
    median_loss: float
    doubtful: torch.Tensor
    judged_by_chance: torch.Tensor

    def rejected(self) -> dict[int, ScreeningReason]:
        """The clients screening dropped (absent ones excluded) and why."""
        keep = (ScreeningReason.ACCEPTED, ScreeningReason.ABSENT)
        return {i: reason for i, reason in enumerate(self.reasons) if reason not in keep}


#: How many binomial standard deviations below chance an accuracy must lie too before ``min_chance_share``
#: rejects it (:func:`chance_limit`): on a small validation set a model near chance scores below half of it by
#: luck (a coin of 1/10 over 100 samples: 2.4% of the time), and the rule must not take a deposit for that.
CHANCE_DEVIATIONS = 4.0


def chance_limit(share: float, *, rarest: float, samples: int) -> float:
    """The accuracy below which ``min_chance_share`` (``share``) rejects a model, on a validation set of
    ``samples`` samples whose rarest class of the task makes up ``rarest`` of it.

    Chance is ``p = rarest``: what a model that ignores its input scores at worst, naming that class for every
    sample (an honest model that knows only that class does just this). The limit is ``share`` of it, and at
    least :data:`CHANCE_DEVIATIONS` binomial deviations ``sqrt(p (1 - p) / samples)`` below it. On 10 balanced
    classes: 0.05 on 1,000 samples, 0.015 on 200, and below 0 (the rule never fires) under 144; with a class
    missing from the validation set, 0.
    """
    if not (0 <= rarest <= 1 and samples >= 1):
        raise ConfigError(
            f"the chance test needs a class share in [0, 1] and a validation sample, got {rarest} and {samples}",
            hint="pass the validation set's smallest class share (0 when a class is missing) and its size",
        )
    return min(share * rarest, rarest - CHANCE_DEVIATIONS * math.sqrt(rarest * (1 - rarest) / samples))


@dataclass(frozen=True)
class ValidationAccuracy:
    """Each client's model's accuracy on the validation set, and that set's make-up, for ``min_chance_share``.

    Attributes:
        values: accuracy of each client's updated model, float ``[n]`` (anything where absent).
        rarest: the share of the validation set held by the task's rarest class (0 when one is missing).
        samples: the validation set's size.
    """

    values: torch.Tensor
    rarest: float
    samples: int

    def below(self, share: float) -> torch.Tensor:
        """Which models score below :func:`chance_limit`, bool ``[n]`` on the CPU."""
        import torch

        limit = chance_limit(share, rarest=self.rarest, samples=self.samples)
        return self.values.to(device="cpu", dtype=torch.float64) < limit

    def full_strength(self, share: float) -> bool:
        """Whether the chance test of ``share`` rejects here at its full strength: its limit is ``share`` of
        chance, not lowered by :data:`CHANCE_DEVIATIONS` for a small validation set (on 10 balanced classes and a
        share of 0.5: from 576 samples), and no class is missing."""
        return self.rarest > 0 and chance_limit(share, rarest=self.rarest, samples=self.samples) >= share * self.rarest


def validation_accuracy(accuracies: Sequence[float], validation: ImageDataset) -> ValidationAccuracy:
    """The :class:`ValidationAccuracy` of models scoring ``accuracies`` on the ``validation`` set."""
    import torch

    values = torch.tensor([float(a) for a in accuracies], dtype=torch.float64)
    samples = int(validation.labels.numel())
    counts = torch.bincount(validation.labels.to(torch.int64).cpu(), minlength=validation.num_classes)
    rarest = float(counts[: validation.num_classes].min()) / samples if samples else 0.0
    return ValidationAccuracy(values, rarest, samples)


def _median(values: torch.Tensor) -> float:
    """numpy's median (the two middle values averaged for an even count); NaN for no values."""
    return float(values.quantile(0.5)) if values.numel() else math.nan


def screen(
    updates: torch.Tensor,
    present: torch.Tensor,
    losses: torch.Tensor | None = None,
    config: ScreeningConfig = ScreeningConfig(),
    last_step: torch.Tensor | None = None,
    data_sizes: torch.Tensor | None = None,
    layers: Sequence[int] | None = None,
    accuracy: ValidationAccuracy | None = None,
) -> ScreeningResult:
    """Screen one round's updates (module docstring for the rules and their order).

    Args:
        updates: flat updates ``[n, d]`` (rows of absent clients may hold anything, NaN included).
        present: bool ``[n]``, the clients whose update arrived and may be screened.
        losses: validation loss of each client's updated model ``[n]`` (NaN where absent); needed
            when ``config.max_loss_ratio`` is set (computing them is the caller's).
        config: the task's rules.
        last_step: the global model this round started from minus the one before ``[d]`` (None in round 1):
            rule 5 (``min_novelty``) measures what each update adds to it, and rule 4 how far each follows it
            (``agree_with_last_step``).
        data_sizes: each client's data size ``[n]`` (None: all alike); ``config.norm_by_data`` scales the
            norm limit of a client with more data than the median.
        layers: the number of scalars of each of the model's tensors, in the flat vector's order
            (``ParamSpec.sizes``), for ``config.novelty_by_layer``; None: rule 5 measures the whole vector only.
        accuracy: each updated model's validation accuracy, with the share of the validation set's rarest class
            and its size (:func:`validation_accuracy`); needed when ``config.min_chance_share`` is set (rule 1).
    """
    import torch

    from fedchain.fl.aggregate import ZERO_NORM, cosine_to, finite_rows, row_norms
    from fedchain.fl.robust import clip_scales, leave_one_out_medians

    n = updates.shape[0]
    present = present.to(device="cpu", dtype=torch.bool)
    if updates.ndim != 2 or present.shape != (n,):
        raise ConfigError(
            f"screening needs updates [n, d] and a mask [n], got {tuple(updates.shape)} and {tuple(present.shape)}",
            hint="pass one mask entry per update row",
        )
    nan = torch.full((n,), math.nan, dtype=torch.float64)
    reasons = [ScreeningReason.ACCEPTED if p else ScreeningReason.ABSENT for p in present.tolist()]
    if not config.enabled:
        none = torch.zeros(n, dtype=torch.bool)
        ones = torch.ones(n, dtype=torch.float64)
        return ScreeningResult(
            present.clone(), tuple(reasons), ones, nan, nan, nan, nan, math.nan, math.nan, none, none.clone()
        )
    if config.needs_losses and (losses is None or losses.shape != (n,)):
        raise ConfigError(
            "the validation-loss check needs one validation loss per client",
            hint="pass losses=[n] (the validation loss of each updated model), or set screening.max_loss_ratio to None",
        )

    if config.needs_accuracies and (accuracy is None or accuracy.values.shape != (n,)):
        raise ConfigError(
            "the chance test needs one validation accuracy per client",
            hint="pass accuracy=validation_accuracy([n] accuracies, the validation set), "
            "or set screening.min_chance_share to None",
        )

    def reject(mask: torch.Tensor, reason: ScreeningReason) -> None:
        for i in torch.nonzero(mask & ok).flatten().tolist():
            reasons[i] = reason
        ok.logical_and_(~mask)

    ok = present.clone()
    reject(~finite_rows(updates).cpu(), ScreeningReason.NON_FINITE)
    loss_values = None
    if config.needs_losses:
        assert losses is not None
        loss_values = losses.to(device="cpu", dtype=torch.float64)
        reject(~torch.isfinite(loss_values), ScreeningReason.LOSS_NOT_FINITE)
    if config.min_chance_share is not None:
        assert accuracy is not None
        reject(accuracy.below(config.min_chance_share), ScreeningReason.BELOW_CHANCE)
    clean = torch.where(ok.to(updates.device)[:, None], updates, torch.zeros_like(updates))
    norms = torch.where(ok, row_norms(clean), nan)
    if config.min_norm_ratio is not None:
        reject(norms <= ZERO_NORM, ScreeningReason.NORM_TOO_SMALL)
    # Every statistic comes from one population: the present updates that passed the absolute checks.
    population = ok.clone()
    rows = torch.nonzero(population).flatten()
    cosines, agreement, novelty, median_norm, median_loss = nan.clone(), nan.clone(), nan.clone(), math.nan, math.nan
    views: list[torch.Tensor] = []  # rule 5's new parts, when it runs
    if rows.numel() >= config.min_updates:
        median_norm = _median(norms[rows])
        if config.max_norm_ratio is not None:
            limits = torch.full((n,), config.max_norm_ratio * median_norm, dtype=torch.float64)
            if config.norm_by_data and data_sizes is not None:
                sizes = torch.as_tensor(data_sizes, dtype=torch.float64).cpu()
                if sizes.shape != (n,):
                    raise ConfigError(
                        f"screening needs one data size per update, got {tuple(sizes.shape)} for {n} updates",
                        hint="pass data_sizes=[n], or None to screen every norm against the same limit",
                    )
                median_size = _median(sizes[rows])
                if median_size > 0:
                    limits = limits * (sizes / median_size).clamp_min(1.0)
            reject(norms > limits, ScreeningReason.NORM_TOO_LARGE)
        if config.min_norm_ratio is not None:
            reject(norms < config.min_norm_ratio * median_norm, ScreeningReason.NORM_TOO_SMALL)
        if config.min_cosine is not None:
            medians = leave_one_out_medians(clean, population)
            for i in rows.tolist():
                if float(torch.linalg.vector_norm(medians[i].to(torch.float64))) > ZERO_NORM:
                    cosines[i] = cosine_to(clean[i : i + 1], medians[i])[0]
            # NaN (the others' median is the zero update: no direction to agree with) fails no comparison.
            reject(cosines < config.min_cosine, ScreeningReason.DIRECTION)
        dimension = updates.shape[1]
        if config.min_novelty is not None and last_step is not None and dimension >= (2 * config.min_novelty) ** 2:
            # Rule 5's first look, before rule 4 rejects: with novelty_vouches its figure speaks for rule 4 too.
            views = _new_parts(clean, last_step.to(updates.device), layers if config.novelty_by_layer else None)
            on_device = rows.to(updates.device)
            figures = torch.stack([agreement_with_others(view[on_device]) * math.sqrt(view.shape[1]) for view in views])
            novelty[rows] = _novelty(figures, config.novelty_together)
        if config.min_agreement is not None and dimension >= (2 * config.min_agreement) ** 2:
            agreement[rows] = agreement_with_others(clean[rows.to(updates.device)]) * math.sqrt(dimension)
            if config.agree_with_last_step and last_step is not None:
                follows = cosine_to(clean, last_step.to(updates.device)).abs() * math.sqrt(dimension)
                agreement[rows] = torch.maximum(agreement[rows], follows[rows])
            if config.reassess_agreement:
                _reassess(agreement, [clean], population, config.min_agreement, config.min_updates)
            vouched = novelty >= config.min_agreement if config.novelty_vouches else torch.zeros_like(ok)
            reject((agreement < config.min_agreement) & ~vouched, ScreeningReason.UNCORRELATED)
        if views and config.min_novelty is not None:
            if config.reassess_agreement:
                _reassess(
                    novelty, views, population & ok, config.min_novelty, config.min_updates, config.novelty_together
                )
            reject(novelty < config.min_novelty, ScreeningReason.STALE)
        if loss_values is not None and config.max_loss_ratio is not None:
            median_loss = _median(loss_values[rows])
            reject(loss_values > config.max_loss_ratio * median_loss, ScreeningReason.LOSS_TOO_HIGH)
    scales = torch.ones(n, dtype=torch.float64)
    if config.clip_to_median_norm and math.isfinite(median_norm):
        scales = torch.where(ok, clip_scales(torch.nan_to_num(norms, nan=0.0), median_norm), scales)
    doubtful = torch.zeros_like(ok)
    if config.min_novelty is not None and config.novelty_margin is not None:
        # NaN (rule 5 not run for the update) is below nothing: no doubt.
        doubtful = ok & (novelty < config.min_novelty + config.novelty_margin)
        if config.doubt_max_kurtosis is not None and views:
            tensors = views[1:] or views  # each large tensor (the whole vector mixes their scales), else the whole
            for i in torch.nonzero(doubtful).flatten().tolist():
                doubtful[i] = max(excess_kurtosis(view[i]) for view in tensors) < config.doubt_max_kurtosis
    judged = torch.zeros_like(ok)
    if config.min_chance_share is not None:
        assert accuracy is not None
        judged = ok & accuracy.full_strength(config.min_chance_share)
    return ScreeningResult(
        ok, tuple(reasons), scales, norms, cosines, agreement, novelty, median_norm, median_loss, doubtful, judged
    )


def excess_kurtosis(values: torch.Tensor) -> float:
    """The excess kurtosis of the numbers in ``values`` about zero, ``mean(x^4) / mean(x^2)^2 - 3``: 0 for Gaussian
    noise of any scale (within about ``sqrt(24 / n)`` for n numbers), larger for heavy tails (Laplace noise: 3).
    Taken about zero, not the mean, as rule 5's agreement measures directions from zero; all zeros give 0."""
    import torch

    x = values.to(torch.float64).flatten()
    second = float(x.pow(2).mean())
    if second <= 0 or not math.isfinite(second):
        return 0.0
    return float(x.pow(4).mean()) / second**2 - 3.0


def _beyond(updates: torch.Tensor, step: torch.Tensor) -> torch.Tensor:
    """Each row of ``updates`` minus its projection on ``step``: what it adds to the last global step."""
    import torch

    from fedchain.fl.aggregate import ZERO_NORM

    rows = updates.to(torch.float64)
    direction = step.to(torch.float64)
    norm = float(torch.linalg.vector_norm(direction))
    if norm <= ZERO_NORM:
        return rows
    unit = direction / norm
    return rows - (rows @ unit)[:, None] * unit[None, :]


#: Rule 5 measures a tensor of the model on its own (``novelty_by_layer``) from this many scalars: a bias or a
#: small layer holds too few numbers for the agreement of noise to be near ``|N(0, 1)|``, and a figure of its own
#: for each would only give noise more draws.
MIN_LAYER_SIZE = 1000


def _new_parts(updates: torch.Tensor, step: torch.Tensor, layers: Sequence[int] | None) -> list[torch.Tensor]:
    """What each row of ``updates`` adds to ``step``: over the whole vector, then (``layers``) over each tensor
    of at least :data:`MIN_LAYER_SIZE` scalars, orthogonal to the step's part in that tensor."""
    parts = [_beyond(updates, step)]
    if layers is None:
        return parts
    if sum(layers) != updates.shape[1]:
        raise ConfigError(
            f"layer sizes adding up to {sum(layers)} do not split updates of {updates.shape[1]} parameters",
            hint="pass the model's tensor sizes in the flat vector's order (ParamSpec.sizes)",
        )
    offset = 0
    for size in layers:
        if size >= MIN_LAYER_SIZE:
            parts.append(_beyond(updates[:, offset : offset + size], step[offset : offset + size]))
        offset += size
    return parts


#: Above this cosine two updates count as copies of one another: honest updates of different data never
#: came near it (at most 0.83 in the measured rounds), and a copy is no independent agreement.
COPY_COSINE = 0.99


def agreement_with_others(updates: torch.Tensor) -> torch.Tensor:
    """Rule 4's agreement of each row of ``updates [m, d]`` (m >= 3) with the others, float64 ``[m]`` on the CPU.

    The larger of the median over the other rows of ``|cos|`` (numpy's median) and ``|cos|`` to the
    coordinate-wise median of the other rows that are not copies of it (cosine above
    :data:`COPY_COSINE`): Sybils sending one noise vector would otherwise pull the median of the others
    towards their own. A zero row agrees with nothing (0).
    """
    import torch

    from fedchain.fl.aggregate import cosine_to, unit_rows
    from fedchain.fl.robust import coordinate_median, leave_one_out_medians

    units = unit_rows(updates.to(torch.float64))
    m = units.shape[0]
    cosines = (units @ units.T).cpu()
    others = ~torch.eye(m, dtype=torch.bool)
    pairwise = cosines.abs()[others].reshape(m, m - 1).quantile(0.5, dim=1)
    everyone = torch.ones(m, dtype=torch.bool)
    medians = leave_one_out_medians(updates, everyone)
    to_median = torch.zeros(m, dtype=torch.float64)
    for i in range(m):
        independent = others[i] & (cosines[i] <= COPY_COSINE)
        if not bool(independent.any()):
            continue
        median = (
            medians[i] if bool(independent[others[i]].all()) else coordinate_median(updates, torch.ones(m), independent)
        )
        to_median[i] = cosine_to(updates[i : i + 1], median)[0].abs()
    return torch.maximum(pairwise, to_median)


def _reassess(
    agreement: torch.Tensor,
    views: Sequence[torch.Tensor],
    population: torch.Tensor,
    threshold: float,
    fewest: int,
    together: bool = False,
) -> None:
    """Rule 4's second look, in place: every update of ``population`` whose ``agreement`` is below ``threshold``
    is measured again against the updates that reached it (when at least ``fewest``), and keeps the larger figure.

    ``views`` are the updates ``[n, d_k]`` as the rule measures them (the whole vector; rule 5: the new parts,
    whole and per layer); the figure is the best over them, as the first look's, or (``together``) the larger of
    that and the layers' figures together (:func:`_novelty`)."""
    import torch

    passed = population & (agreement >= threshold)
    if int(passed.sum()) < fewest:
        return
    chosen = torch.nonzero(passed).flatten()
    pools = [(view, view[chosen.to(view.device)], math.sqrt(view.shape[1])) for view in views]
    for i in torch.nonzero(population & ~passed).flatten().tolist():
        figures = torch.tensor(
            [[agreement_against(view[i], pool) * scale] for view, pool, scale in pools], dtype=torch.float64
        )
        agreement[i] = max(float(agreement[i]), float(_novelty(figures, together)[0]))


def _novelty(figures: torch.Tensor, together: bool) -> torch.Tensor:
    """Rule 5's figure of each update from its views' figures ``[k, m]`` (the whole new part first, then each
    large tensor's): the best view's, or (``together``, with two or more tensors) the larger of that and
    :func:`figure_together` over the tensors. The whole vector is left out of the sum: it is mostly the
    largest tensor again, and counting that twice would make noise look like agreement."""
    best = figures.amax(dim=0)
    if not together or figures.shape[0] < 3:
        return best
    return best.maximum(figure_together(figures[1:]))


def figure_together(figures: torch.Tensor) -> torch.Tensor:
    """The figures ``[k, m]`` of k views of m updates, in standard deviations of noise, as one figure per update.

    For a noise update each view's figure is about ``|N(0, 1)|`` and the views of different tensors are about
    independent, so the sum of the squares is about chi-square with k degrees of freedom. Its tail probability
    ``p`` under noise is turned into the figure ``z`` that the best of k ``|N(0, 1)|`` reaches as rarely:
    ``1 - (1 - 2 Phi(-z))^k = p``. One view (k = 1) gives its own figure back; k views of ``z_0`` each give
    more than ``z_0`` (the evidence adds up); one strong view among noise gives about its own figure.
    """
    import torch

    k = figures.shape[0]
    squares = figures.to(torch.float64).pow(2).sum(dim=0)
    tail = torch.special.gammaincc(torch.full_like(squares, k / 2), squares / 2)
    each = (-torch.expm1(torch.log1p(-tail) / k)).clamp_min(1e-300)  # one view's tail, 2 Phi(-z)
    return -torch.special.ndtri(each / 2)


def agreement_against(update: torch.Tensor, pool: torch.Tensor) -> float:
    """Rule 4's agreement of one update ``[d]`` with the rows of ``pool [k, d]`` (k >= 1, not holding it), as a
    cosine: what :func:`agreement_with_others` gives a row against the other rows, for a single update."""
    import torch

    from fedchain.fl.aggregate import cosine_to
    from fedchain.fl.robust import coordinate_median

    cosines = cosine_to(pool, update)
    pairwise = float(cosines.abs().quantile(0.5))
    independent = cosines <= COPY_COSINE
    if not bool(independent.any()):
        return pairwise
    median = coordinate_median(pool, torch.ones(pool.shape[0], dtype=torch.float64), independent)
    return max(pairwise, abs(float(cosine_to(update[None, :], median)[0])))


def screened_updates(updates: torch.Tensor, result: ScreeningResult) -> torch.Tensor:
    """The updates a strategy gets: rejected and absent rows NaN (the strategies' rejection), accepted ones clipped.

    A new tensor of the updates' dtype and device.
    """
    import torch

    accepted = result.accepted.to(updates.device)[:, None]
    scaled = updates * result.scales.to(device=updates.device, dtype=updates.dtype)[:, None]
    return torch.where(accepted, scaled, torch.full_like(updates, math.nan))


__all__ = [
    "ADDED_LATER",
    "CHANCE_DEVIATIONS",
    "COPY_COSINE",
    "NO_SCREENING",
    "ScreeningConfig",
    "ScreeningReason",
    "ScreeningResult",
    "ValidationAccuracy",
    "agreement_against",
    "agreement_with_others",
    "chance_limit",
    "screen",
    "screened_updates",
    "validation_accuracy",
]
