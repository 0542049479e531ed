"""The per-round quality ``q_i^n`` the chain consumes (DESIGN.md, Tian eq. 4).

Two sources, one per task:

- ``"loss"`` (default): ``q_i = loss_avg / loss_i``, where ``loss_i`` is the
  validation loss of client i's updated model and ``loss_avg`` the median over
  the accepted (screened, :mod:`fedchain.fl.screening`) clients: with a mean,
  one attacker's huge loss would raise every honest client's quality a
  thousandfold, and its tiny loss lower them; a median moves only when half
  the round moves it. Losses are floored at :data:`LOSS_FLOOR` (both sides),
  so a perfect model gets a large finite quality, and all-zero losses give 1.
- ``"contribution"``: the strategy's per-round contribution, rescaled so that
  its mean over the accepted clients is 1. Rule for zero and negative values:
  a negative (or NaN) contribution counts as 0, a contribution that harms the
  model earns no quality; when no accepted client has a positive contribution,
  every quality is 0 (nothing was contributed, so nothing is rescaled to 1).

A contribution also grows with the data behind it, so on POW data the
smallest honest clients contributed little round after round and were
removed. With the task's ``data_credit`` (:func:`data_credited`) an accepted
client holding less than the accepted clients' mean data has its contribution
quality multiplied by mean / its data, at most by the credit: it is judged per
sample. A contribution of 0 stays 0, and a client claiming less data than it
has gains no more than the credit (docs/robustness.md, "Small clients").

Rejected clients always get quality 0. An accepted client gets at least the task's
``floor`` (:func:`floored`, 0: the seed's measure as it is): on chain a round
below q_min multiplies r_a by its quality, so one honest client's poor round
(a model trained on skewed data scored on the balanced validation set:
0.02-0.15) would take r_a below r_a_min and cost the client its deposit by
itself. With the floor a single poor round cuts that round's reputation and
pay, and only a client that stays poor round after round (a label flipper)
falls below r_a_min. The floor of a round comes from
:func:`fedchain.fl.floor.round_floor`: in the early rounds the history is too
short for a floor of 0.2, and a task's ``early_floor`` raises it there
(docs/robustness.md, "Quality on skewed data" and "The first rounds").
Values come as floats and as 1e18
fixed-point integers for the contract: ``q * 10**18`` computed exactly from
the float's shortest decimal form (``repr``: 0.1 is exactly ``10**17``),
rounded half to even.

The floor cuts a poor round's cost; the grace (:func:`graced`, a task's
``quality_grace``) takes it away when the round is an honest exception. One
quality per round cannot tell an honest client on skewed data from a label
flipper or a client with noisy labels (every measure tried puts some honest
rounds below the attackers': docs/robustness.md, "The grace"), but two things
do: the honest client's poor rounds come one at a time, the faulty client's
round after round; and the honest client's model still classifies (on the
balanced validation set it keeps at least a quarter of the median accuracy,
a flipper's almost none). So an accepted update below q_min is scored q_min
itself when the client's last scored round reached q_min and its model's
accuracy is at least :data:`GRACE_ACCURACY_SHARE` of the
accepted clients' median, at most ``quality_grace`` times per client and
task. The task's first round has no last round to go by, and young models
classify barely (a label flipper's kept half a median accuracy of 0.2 there),
so a grace in it asks the model to beat chance (``1 / classes``) by that
share of the median's margin over chance: ``acc - chance >= share * (median -
chance)``; with the task's ``grace_first_round_loss`` a model whose validation loss is below the initial model's
passes too: a client holding a few hundred samples trains a handful of steps in round 1, and its model lowers the
loss while it still sits at chance, where every label flipper's raised it (docs/robustness.md, "The first round:
the loss"); with the task's ``grace_first_round_screened`` a model that screening's chance test judged and kept
passes as well: the test rejects a model below half of chance, as a label flipper's is, while an honest model of one
or two classes may sit at chance with its loss risen, where neither test above tells it from a flipper
(docs/robustness.md, "The first round: the chance test"). With the task's ``grace_first_round_extra`` a first
round's grace does not count against ``quality_grace``: it forgives a young model, not an odd poor round, and the
small and skewed clients it graces are the ones most likely to need their later graces (docs/robustness.md, "The
first round's grace apart"). With the task's ``grace_two_in_a_row`` the round right after a grace that followed a good
round may be graced too: an honest client on skewed data is now and then poor in two rounds in a row after good ones,
while a label flipper is poor from its first round (docs/robustness.md, "Two poor rounds in a row"). The memory the
rule needs (:class:`GraceMemory`)
travels with the strategy's state, so every agent that scores the rounds in order keeps it the same way.

An update that screening accepted narrowly (:attr:`fedchain.fl.screening.ScreeningResult.doubtful`: rule 5's
novelty less than ``novelty_margin`` above its threshold) is in doubt: a disguised free rider's noise clears the
threshold now and then by chance. With a floor, its quality is held at the floor (at most), it is never graced,
and its round counts as poor; without a floor (the seed's measure) only the last two hold, so that chance alone
never removes a client. It is still aggregated.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Literal

import torch

from fedchain.errors import ConfigError
from fedchain.fl.floor import check_data_credit, check_floor, check_grace
from fedchain.fl.strategy import RoundResult, S, StrategyState
from fedchain.units import WAD

#: Smallest loss used in the ratio: keeps a zero loss from dividing by zero.
LOSS_FLOOR = 1e-8

QualitySource = Literal["loss", "contribution"]

#: Strategies whose per-round contribution is the chain's quality by default (DESIGN.md, eq. 4): the simulation,
#: the aggregator and the auditor all read it here, so that they score a task alike.
CONTRIBUTION_STRATEGIES = frozenset({"cgsv", "fedfaim", "fedave", "fair"})


def default_source(strategy: str) -> QualitySource:
    """The quality the chain gets for ``strategy`` by default: its contribution for a contribution strategy
    (:data:`CONTRIBUTION_STRATEGIES`), else the Tian loss ratio."""
    return "contribution" if strategy in CONTRIBUTION_STRATEGIES else "loss"


#: The least accuracy of a graced client's model, as a share of the accepted clients' median accuracy
#: (:func:`graced`). Measured (docs/robustness.md, "The grace"): honest models of skewed data in their poor
#: rounds kept 0.11-1.06 of the median, 95% of them 0.25 or more; label flippers' 0.00-0.36, 95% below 0.25.
GRACE_ACCURACY_SHARE = 0.25


@dataclass(frozen=True)
class GraceRule:
    """The grace of a task (module docstring): its q_min, and how many rounds each client may be graced."""

    #: q_min as a fraction: a round below it is poor, and a graced round is scored at it.
    min_quality: float
    #: Rounds per client and task scored at q_min instead of below it (0: no grace, the seed's rule); a first
    #: round's grace is one of them unless :attr:`first_extra`.
    allowance: int
    #: The least accuracy of a graced client's model, as a share of the accepted clients' median.
    accuracy_share: float = GRACE_ACCURACY_SHARE
    #: The accuracy of a model that does not classify, ``1 / classes`` on the balanced validation set: a grace
    #: in the task's first round asks for the share of the median's margin over it. None: no grace in the first
    #: round.
    chance: float | None = None
    #: In the task's first round, a model whose validation loss is below the task's initial model's has learned
    #: too, at chance or not (a client holding a few hundred samples trains a handful of steps there); needs a
    #: ``chance`` (a first-round grace) and every client's ``improved`` (:func:`graced`).
    by_loss: bool = False
    #: In the task's first round, a model that screening's chance test judged and kept
    #: (:attr:`fedchain.fl.screening.ScreeningResult.judged_by_chance`) has learned too; needs a ``chance`` (a
    #: first-round grace) and the judged mask (:func:`graced`).
    by_screen: bool = False
    #: A grace in the task's first round does not count against :attr:`allowance`; needs a ``chance`` (a
    #: first-round grace).
    first_extra: bool = False
    #: A client graced after a round that reached q_min may be graced in the next round too: a spell of two poor
    #: rounds after a good one (within :attr:`allowance`); never a third in a row, never after a first round's
    #: grace or a poor round that was not graced.
    two_in_a_row: bool = False

    def __post_init__(self) -> None:
        check_grace(self.allowance)
        if not (0 <= self.min_quality < math.inf):  # the terms take any q_min >= 0, above 1 too
            raise ConfigError(f"q_min must be a finite number >= 0, got {self.min_quality}")
        if not 0 <= self.accuracy_share <= 1:
            raise ConfigError(f"the grace's accuracy share must be in [0, 1], got {self.accuracy_share}")
        if self.chance is not None and not 0 <= self.chance < 1:
            raise ConfigError(f"the accuracy of chance must be in [0, 1), got {self.chance}")
        if self.by_loss and self.chance is None:
            raise ConfigError("the loss test is a first-round grace's: it needs the accuracy of chance (classes)")
        if self.by_screen and self.chance is None:
            raise ConfigError("the chance test's verdict is a first-round grace's: it needs the accuracy of chance")
        if self.first_extra and self.chance is None:
            raise ConfigError("an extra first-round grace is a first-round grace: it needs the accuracy of chance")


def grace_rule(
    allowance: int,
    *,
    min_quality: float,
    classes: int | None,
    by_loss: bool = False,
    by_screen: bool = False,
    first_extra: bool = False,
    two_in_a_row: bool = False,
) -> GraceRule | None:
    """The grace of ``allowance`` rounds with q_min ``min_quality`` for a model of ``classes`` classes (its chance
    ``1 / classes``; None: no grace in the task's first round, and ``by_loss``, ``by_screen`` and ``first_extra``
    are moot); None for 0 (no grace). ``by_loss``, ``by_screen``, ``first_extra``, ``two_in_a_row``:
    :attr:`GraceRule.by_loss`, :attr:`GraceRule.by_screen`, :attr:`GraceRule.first_extra`,
    :attr:`GraceRule.two_in_a_row`."""
    if classes is not None and (isinstance(classes, bool) or not isinstance(classes, int) or classes < 2):
        raise ConfigError(f"a classifier has at least 2 classes, got {classes!r}")
    chance = None if classes is None else 1 / classes
    return (
        GraceRule(
            min_quality,
            allowance,
            chance=chance,
            by_loss=by_loss and chance is not None,
            by_screen=by_screen and chance is not None,
            first_extra=first_extra and chance is not None,
            two_in_a_row=two_in_a_row,
        )
        if allowance
        else None
    )


def improved_on(losses: torch.Tensor | Sequence[float], start_loss: float) -> torch.Tensor:
    """Which client models have a validation loss below ``start_loss``, the loss of the model they trained from
    (:attr:`GraceRule.by_loss`); a NaN loss (no usable update) has not."""
    return torch.as_tensor(losses, dtype=torch.float64) < start_loss


@dataclass(frozen=True)
class GraceMemory:
    """Per client, what the grace remembers: whether its last scored round was poor, and the graces it used.

    Empty tuples mean the task's first round (or a state saved before the rule): no client has a round yet, and
    the grace asks more of a model (:attr:`GraceRule.chance`; without it, none is graced): in round 1 a label
    flipper's model still kept half the median accuracy, which was itself 0.2.
    """

    #: Client i's last scored round was below q_min (or its update was rejected).
    poor: tuple[bool, ...] = ()
    #: Rounds in which client i was graced so far.
    used: tuple[int, ...] = ()
    #: Client i's last round was graced after a round that reached q_min (:attr:`GraceRule.two_in_a_row`); empty
    #: in a memory saved before the rule: none.
    opened: tuple[bool, ...] = ()

    @property
    def first(self) -> bool:
        """Nothing remembered yet: the task's first round."""
        return not self.poor and not self.used

    def of(self, n: int) -> GraceMemory:
        """The memory of ``n`` clients (none poor, none graced in the first round); a ConfigError when it
        remembers another number of clients."""
        if self.first:
            return GraceMemory((False,) * n, (0,) * n, (False,) * n)
        opened = self.opened or (False,) * len(self.poor)  # a memory saved before the rule opened no spell
        if len(self.poor) != n or len(self.used) != n or len(opened) != n:
            raise ConfigError(
                f"the grace remembers {len(self.poor)} clients, the round has {n}",
                hint="score every round of a task from the state of the round before it",
            )
        return dataclasses.replace(self, opened=opened)


@dataclass(frozen=True)
class RoundQuality:
    """Every client's quality of one round."""

    #: q_i as floats.
    values: tuple[float, ...]
    #: q_i in 1e18 fixed point, as the contract takes them.
    wad: tuple[int, ...]
    #: The grace's memory after this round (:func:`graced`); empty when the round was scored without one.
    memory: GraceMemory = GraceMemory()


def loss_ratio(losses: torch.Tensor, accepted: torch.Tensor) -> torch.Tensor:
    """Tian eq. 4 over the accepted clients: ``median_accepted(loss) / loss_i``; 0 where not accepted.

    The median is numpy's (the two middle losses averaged for an even count), so no single
    client's loss moves another client's quality beyond the next loss in order (module docstring).
    """
    losses = losses.to(torch.float64)
    if not accepted.any():
        return torch.zeros_like(losses)
    average = losses[accepted].quantile(0.5).clamp_min(LOSS_FLOOR)
    ratio = average / torch.where(accepted, losses, torch.ones_like(losses)).clamp_min(LOSS_FLOOR)
    return torch.where(accepted, ratio, torch.zeros_like(ratio))


def rescaled_contribution(contribution: torch.Tensor, accepted: torch.Tensor) -> torch.Tensor:
    """Contributions clipped at 0 and scaled to mean 1 over the accepted clients (module rules)."""
    positive = torch.nan_to_num(contribution.to(torch.float64), nan=0.0).clamp_min(0.0)
    positive = torch.where(accepted, positive, torch.zeros_like(positive))
    total = positive.sum()
    if total <= 0:
        return torch.zeros_like(positive)
    return positive / total * int(accepted.sum())


def data_credited(
    values: torch.Tensor, accepted: torch.Tensor, data_sizes: torch.Tensor, credit: float
) -> torch.Tensor:
    """``q_i * min(credit, mean D / D_i)`` for the accepted clients with less data than the accepted clients'
    mean ``D``; the others keep their value (module docstring)."""
    check_data_credit(credit)
    sizes = data_sizes.to(torch.float64)
    if sizes.shape != values.shape:
        raise ConfigError(f"got {sizes.numel()} data sizes for {values.numel()} clients")
    if credit == 1 or not accepted.any():
        return values
    mean = sizes[accepted].mean()
    factor = (mean / sizes.clamp_min(1.0)).clamp(1.0, credit)
    return torch.where(accepted, values * factor, values)


def grace_memory(state: StrategyState | None) -> GraceMemory:
    """The grace memory ``state`` carries (empty for None: the first round)."""
    return GraceMemory() if state is None else GraceMemory(state.quality_poor, state.graces_used, state.graces_opened)


def remembered(state: S, memory: GraceMemory) -> S:
    """``state`` carrying ``memory`` to the next round."""
    return dataclasses.replace(state, quality_poor=memory.poor, graces_used=memory.used, graces_opened=memory.opened)


def graced(
    values: torch.Tensor,
    accepted: torch.Tensor,
    accuracies: torch.Tensor,
    rule: GraceRule,
    memory: GraceMemory,
    doubtful: torch.Tensor | None = None,
    improved: torch.Tensor | None = None,
    judged: torch.Tensor | None = None,
) -> tuple[torch.Tensor, GraceMemory]:
    """The qualities with the grace applied, and the memory after the round (module docstring).

    An accepted client below ``rule.min_quality`` is scored at it when its last scored round was not poor, its
    model's validation accuracy (``accuracies``) is at least ``rule.accuracy_share`` of the accepted clients'
    median, and it has used fewer than ``rule.allowance`` graces. A round is poor when the update was rejected
    or its quality (before the grace) is below q_min, so a grace never follows a poor round, graced or not, but
    with ``rule.two_in_a_row`` a grace may follow one that a round at q_min or above came before (a spell of two
    poor rounds after a good one; never a third, never after the task's first round's grace). In the
    task's first round (``memory`` empty) the accuracy is counted above ``rule.chance``, and without a chance no
    client is graced; with ``rule.by_loss`` a model that lowered the initial model's validation loss (``improved``,
    :func:`improved_on`, needed then) shows it has learned as well, and with ``rule.by_screen`` so does a model
    that screening's chance test judged and kept (``judged``,
    :attr:`~fedchain.fl.screening.ScreeningResult.judged_by_chance`, needed then). A ``doubtful`` update (module
    docstring) is poor and never graced. A first round's grace counts against the allowance unless
    ``rule.first_extra``.
    """
    first = memory.first
    memory = memory.of(values.numel())
    accuracies = accuracies.to(torch.float64)
    if accuracies.shape != values.shape:
        raise ConfigError(f"got {accuracies.numel()} accuracies for {values.numel()} clients")
    median = float(accuracies[accepted].quantile(0.5)) if accepted.any() else 0.0
    if not first:
        classifies = (accuracies >= rule.accuracy_share * median).tolist()
    elif rule.chance is None:
        classifies = [False] * values.numel()
    else:
        learned = torch.zeros_like(accepted)
        if median > rule.chance:  # when no median model beats chance, none is shown to classify by accuracy
            learned = accuracies - rule.chance >= rule.accuracy_share * (median - rule.chance)
        if rule.by_loss:
            learned = learned | _evidence(
                improved,
                values,
                needs="loss test needs whether each client's model lowered the initial model's loss",
                hint="pass improved=improved_on(client_losses, loss of the initial model), or a rule without by_loss",
            )
        if rule.by_screen:
            learned = learned | _evidence(
                judged,
                values,
                needs="chance-test grace needs which models screening's chance test judged and kept",
                hint="pass judged=ScreeningResult.judged_by_chance of the round, or a rule without by_screen",
            )
        classifies = learned.tolist()
    doubt = torch.zeros_like(accepted) if doubtful is None else _mask(doubtful, values)
    poor = ~accepted | (values < rule.min_quality) | doubt
    # After a poor round only the second grace of a spell that a good round opened (two_in_a_row).
    after = [not last or (rule.two_in_a_row and o) for last, o in zip(memory.poor, memory.opened, strict=True)]
    forgiven = [
        bool(p and ok and knows and may and used < rule.allowance and not d)
        for p, ok, knows, may, used, d in zip(
            poor.tolist(), accepted.tolist(), classifies, after, memory.used, doubt.tolist(), strict=True
        )
    ]
    result = torch.where(torch.tensor(forgiven), torch.full_like(values, rule.min_quality), values)
    counts = not (first and rule.first_extra)  # whether this round's graces use up the allowance
    used = tuple(u + int(f and counts) for u, f in zip(memory.used, forgiven, strict=True))
    # A spell is opened by a grace after a good round, not in the task's first round (no round before it).
    opened = tuple(bool(f and not first and not last) for f, last in zip(forgiven, memory.poor, strict=True))
    return result, GraceMemory(tuple(bool(p) for p in poor.tolist()), used, opened)


def _evidence(evidence: torch.Tensor | None, values: torch.Tensor, *, needs: str, hint: str) -> torch.Tensor:
    """``evidence`` as one flag per client of ``values``; a ConfigError saying what the first round's grace
    ``needs`` when it is missing."""
    if evidence is None:
        raise ConfigError(f"the first round's {needs}", hint=hint)
    return _mask(evidence, values)


def _mask(doubtful: torch.Tensor | Sequence[bool], values: torch.Tensor) -> torch.Tensor:
    mask = torch.as_tensor(doubtful, dtype=torch.bool).cpu()
    if mask.shape != values.shape:
        raise ConfigError(f"got {mask.numel()} doubt flags for {values.numel()} clients")
    return mask


def held(values: torch.Tensor, accepted: torch.Tensor, doubtful: torch.Tensor, floor: float) -> torch.Tensor:
    """``min(q_i, floor)`` for the accepted ``doubtful`` clients (module docstring); the rest as they are, and
    everyone as they are without a floor."""
    check_floor(floor)
    if floor == 0:
        return values
    return torch.where(accepted & _mask(doubtful, values), values.clamp_max(floor), values)


def floored(values: torch.Tensor, accepted: torch.Tensor, floor: float) -> torch.Tensor:
    """``max(q_i, floor)`` for the accepted clients; the others keep their value (module docstring)."""
    check_floor(floor)
    if floor == 0:
        return values
    return torch.where(accepted, values.clamp_min(floor), values)


def to_wad(values: Sequence[float] | torch.Tensor) -> tuple[int, ...]:
    """Exact 1e18 fixed point of non-negative finite floats (round half to even)."""
    floats = values.tolist() if isinstance(values, torch.Tensor) else list(values)
    wads = []
    for value in floats:
        if not (value >= 0 and value != float("inf")):
            raise ConfigError(f"a quality must be finite and non-negative, got {value}", hint="check the client losses")
        wads.append(int((Decimal(repr(float(value))) * WAD).to_integral_value(rounding=ROUND_HALF_EVEN)))
    return tuple(wads)


def round_quality(
    result: RoundResult,
    *,
    source: QualitySource = "loss",
    client_losses: torch.Tensor | Sequence[float] | None = None,
    floor: float = 0.0,
    data_sizes: torch.Tensor | Sequence[float] | None = None,
    data_credit: float = 1.0,
    grace: GraceRule | None = None,
    memory: GraceMemory = GraceMemory(),
    accuracies: torch.Tensor | Sequence[float] | None = None,
    doubtful: torch.Tensor | Sequence[bool] | None = None,
    improved: torch.Tensor | Sequence[bool] | None = None,
    judged: torch.Tensor | Sequence[bool] | None = None,
) -> RoundQuality:
    """The round's ``q_i`` for the chain, from ``result`` and the chosen ``source``.

    ``client_losses`` (validation loss of each client's updated model) is needed
    for ``source="loss"`` when the strategy did not measure them itself
    (``result.client_losses`` is None, e.g. fedavg and cgsv). ``floor``: the least
    quality of an accepted client (the task's :attr:`~fedchain.taskspec.TaskSpec.quality_floor`).
    ``data_credit``: the most a contribution quality grows for a client with less data than the mean
    (:attr:`~fedchain.taskspec.TaskSpec.data_credit`, 1: none); above 1 it needs every client's ``data_sizes``.
    ``grace``: the task's grace (None: none), applied before the floor with ``memory``, the grace's memory
    after the round before (:attr:`RoundQuality.memory` of that round; empty in the first), and ``accuracies``,
    the validation accuracy of every client's updated model (needed with a grace). ``doubtful``: the updates
    screening accepted narrowly (:attr:`~fedchain.fl.screening.ScreeningResult.doubtful`; None: none), held at
    the floor and never graced. ``improved``: in the task's first round with a grace whose ``by_loss`` is set,
    which client models lowered the initial model's validation loss (:func:`improved_on`); with one whose
    ``by_screen`` is set, which models screening's chance test judged and kept (``judged``,
    :attr:`~fedchain.fl.screening.ScreeningResult.judged_by_chance`).
    """
    accepted = result.accepted
    if source == "contribution":
        values = rescaled_contribution(result.contribution, accepted)
        if data_credit != 1:
            if data_sizes is None:
                raise ConfigError(
                    "a data credit needs every client's data size", hint="pass data_sizes=..., or data_credit=1"
                )
            values = data_credited(values, accepted, torch.as_tensor(data_sizes, dtype=torch.float64), data_credit)
    elif source == "loss":
        losses = result.client_losses if client_losses is None else torch.as_tensor(client_losses, dtype=torch.float64)
        if losses is None:
            raise ConfigError(
                "the loss quality needs each client's validation loss",
                hint="pass client_losses=... (validation loss of global + Delta_i), or source='contribution'",
            )
        if losses.shape != accepted.shape:
            raise ConfigError(f"got {losses.numel()} client losses for {accepted.numel()} clients")
        accepted = accepted & torch.isfinite(losses)
        values = loss_ratio(losses, accepted)
    else:
        raise ConfigError(f"unknown quality source {source!r}", hint="use 'loss' or 'contribution'")
    doubt = None if doubtful is None else _mask(doubtful, values)
    after = GraceMemory()
    if grace is not None:
        if accuracies is None:
            raise ConfigError(
                "the grace needs each client's validation accuracy",
                hint="pass accuracies=... (of global + Delta_i on the validation set), or grace=None",
            )
        learned = None if improved is None else _mask(improved, values)
        kept = None if judged is None else _mask(judged, values)
        values, after = graced(
            values, accepted, torch.as_tensor(accuracies, dtype=torch.float64), grace, memory, doubt, learned, kept
        )
    values = floored(values, accepted, floor)
    if doubt is not None:
        values = held(values, accepted, doubt, floor)
    return RoundQuality(values=tuple(values.tolist()), wad=to_wad(values), memory=after)
