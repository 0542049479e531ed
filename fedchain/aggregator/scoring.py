"""One round's arithmetic: evaluate, aggregate, score; no chain and no store.

:func:`score_round` takes the current global model and every client's update
(``None`` where the client sent nothing usable: missing, malformed, removed),
evaluates each client's updated model on the publisher's validation set
(``loss_i``: never a loss the trainer reports), screens the updates with the
task spec's rules (:mod:`fedchain.fl.screening`: a screened-out update reaches
the strategy as a rejected one), aggregates with the strategy, and returns the
new global model with the chain's measurement of every client: quality ``q_i``
(Tian's loss ratio or the strategy's rescaled contribution,
:mod:`fedchain.fl.quality`), round time and acceptance. The aggregator, the
auditor's ``--verify-scores`` and the benchmarks all score here, so they
screen alike.

fedave also needs each client's per-sample losses on its own data, which only
its fog node has: they come inside the update's payload
(:func:`fedchain.taskspec.load_update`), so the on-chain hash covers them. They
are the one input the trainer reports itself; a fog node that forges them can
raise its client's reputation ``Acc_i / KL_i`` at most to ``Acc_i / kl_floor``.
fedfaim and fedave reward in kind: the outcome carries every client's
rewarded model (:attr:`RoundOutcome.rewards`), which the aggregator stores and
commits on chain (:mod:`fedchain.rewards`). When the task's clients train from
their own rewards (``TaskSpec.train_from == "reward"``), ``client_params`` holds
the model each client trained from, and its updated model is that plus its update.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch

from fedchain.chain.bindings import Measurement, TaskParams
from fedchain.data.datasets import ImageDataset
from fedchain.errors import ConfigError
from fedchain.fl.quality import (
    GraceRule,
    QualitySource,
    default_source,
    to_wad,
)
from fedchain.fl.registry import fit_layer_sizes
from fedchain.fl.rounds import aggregate_and_score
from fedchain.fl.screening import ScreeningConfig, ScreeningResult, screen, validation_accuracy
from fedchain.fl.strategy import Evaluation, Strategy, StrategyState, Validation
from fedchain.models.registry import ModelSpec
from fedchain.taskspec import TaskSpec, gives_rewards
from fedchain.trainer.evaluation import EVAL_BATCH_SIZE, predict
from fedchain.units import WAD

#: Largest value of the contract's ``uint64`` quality (about 18.4 in 1e18 fixed point); the contract caps lower.
MAX_QUALITY_WAD = 2**64 - 1

QualityChoice = Literal["auto", "loss", "contribution"]


def quality_source(strategy: str, choice: QualityChoice = "auto") -> QualitySource:
    """The quality the chain gets for ``strategy``: ``auto`` is :func:`~fedchain.fl.quality.default_source`, the
    contribution for contribution strategies, else the loss ratio."""
    if choice == "auto":
        return default_source(strategy)
    if choice not in ("loss", "contribution"):
        raise ConfigError(f"unknown quality source {choice!r}", hint="use auto, loss or contribution")
    return choice


def task_floor(spec: TaskSpec, params: TaskParams, round_number: int) -> float:
    """The floor of round ``round_number`` of the task of ``spec`` and on-chain ``params``: what every agent that
    scores the round passes to :func:`score_round` as ``quality_floor`` (:meth:`TaskSpec.floor_at`)."""
    return spec.floor_at(
        round_number, min_quality=params.min_quality / WAD, min_loss_reputation=params.min_loss_reputation / WAD
    )


def task_grace(spec: TaskSpec, params: TaskParams) -> GraceRule | None:
    """The grace of the task of ``spec`` and on-chain ``params`` (:meth:`TaskSpec.grace_rule`, q_min from the
    terms): what every agent that scores the task's rounds passes to :func:`score_round` as ``grace``."""
    return spec.grace_rule(min_quality=params.min_quality / WAD)


def check_supported(strategy: Strategy, spec: TaskSpec) -> None:
    """A :class:`ConfigError` when the task's updates lack what ``strategy`` needs.

    Fog nodes ship local losses only for a task whose spec's strategy needs them
    (:attr:`TaskSpec.ships_local_losses`), so a strategy that needs them cannot be
    chosen for a task created with another one.
    """
    if strategy.needs_local_losses and not spec.ships_local_losses:
        raise ConfigError(
            f"strategy {strategy.name!r} needs each client's local losses, but the fog nodes of this task "
            f"(strategy {spec.strategy!r}) do not ship them",
            hint=f"create the task with strategy {strategy.name!r}, or run the task spec's strategy",
        )


def task_strategy(name: str, options: Mapping[str, Any] | None, spec: TaskSpec) -> Strategy:
    """The strategy ``name`` as it scores rounds of the task of ``spec``.

    The aggregator and the auditor both build it here, so they compute the same thing:
    with ``options`` (None: the spec's own options when ``name`` is the spec's strategy)
    and the spec's aggregation rule (:meth:`TaskSpec.strategy_named`), checked against
    what the task's updates carry (:func:`check_supported`) and fitted to the model's
    layers (rewards in kind are masked per layer, as in ``simulate``).
    """
    strategy = spec.strategy_named(name, options)
    check_supported(strategy, spec)
    return fit_layer_sizes(strategy, spec.param_spec().sizes)


@dataclass(frozen=True)
class Evaluator:
    """Evaluates flat models of one architecture on the validation set."""

    model: ModelSpec
    dataset: ImageDataset
    device: torch.device | str = "cpu"
    #: Validation samples per forward pass (a speed setting: the result moves only by float drift).
    batch_size: int = EVAL_BATCH_SIZE

    def evaluations(self, params: torch.Tensor) -> list[Evaluation]:
        """One :class:`Evaluation` per row of ``params`` (``[d]`` or ``[n, d]``), with per-sample losses."""
        result = predict(
            self.model,
            params.reshape(-1, params.shape[-1]),
            self.dataset,
            device=self.device,
            batch_size=self.batch_size,
        )
        return [
            Evaluation(loss=float(loss), accuracy=float(acc), sample_losses=result.losses[r])
            for r, (loss, acc) in enumerate(zip(result.mean_losses.tolist(), result.accuracies.tolist(), strict=True))
        ]

    def __call__(self, params: torch.Tensor) -> Evaluation:
        return self.evaluations(params)[0]


@dataclass(frozen=True)
class ClientInput:
    """One client's part of a round.

    Attributes:
        update: the decoded update ``[d]`` (flat), or None when there is none usable.
        data_size: D_i, samples (from its auction).
        round_time: seconds from the round's start to its fog commit's block; None when nothing was committed.
        active: whether the client is still in the task (entries of removed clients are ignored on chain).
        local_losses: per-sample losses of the client's trained model on its own data (what fedave needs), or None.
    """

    update: torch.Tensor | None
    data_size: int
    round_time: int | None
    active: bool = True
    local_losses: torch.Tensor | None = None


@dataclass(frozen=True)
class RoundOutcome:
    """What a round produced: the new global model, its accuracy and the chain's measurements."""

    global_params: torch.Tensor
    accuracy: float
    measurements: tuple[Measurement, ...]
    qualities: tuple[float, ...]
    client_losses: tuple[float, ...]
    state: StrategyState | None
    #: What screening decided, per client (None when no update was usable).
    screening: ScreeningResult | None = None
    #: Every client's rewarded model ``[n, d]`` for a strategy that rewards in kind (the model it trained
    #: from when no update was usable), else None.
    rewards: torch.Tensor | None = None

    @property
    def accuracy_wad(self) -> int:
        """The accuracy in the chain's 1e18 fixed point."""
        return to_wad([self.accuracy])[0]


def score_round(
    strategy: Strategy,
    global_params: torch.Tensor,
    clients: Sequence[ClientInput],
    evaluator: Evaluator,
    state: StrategyState | None,
    *,
    quality: QualitySource = "loss",
    screening: ScreeningConfig = ScreeningConfig(),  # noqa: B008 (frozen: one shared default is safe)
    client_params: torch.Tensor | None = None,
    last_step: torch.Tensor | None = None,
    quality_floor: float,
    data_credit: float,
    grace: GraceRule | None,
) -> RoundOutcome:
    """Evaluate every usable update, screen, aggregate, and measure every client for the chain (module docstring).

    ``screening`` must be the task spec's (:attr:`TaskSpec.screening`), so that every agent that scores
    the round rejects the same updates. With no usable update the global model and the strategy's state
    stay as they were and every quality is 0. For a strategy that needs local losses, an update without
    them is not usable. ``client_params`` ``[n, d]``: the model each client trained from when the
    clients train from their own rewards (None: all trained from ``global_params``). ``last_step``: the global
    model ``global_params`` minus the one before it (None in round 1), for screening's rule 5.
    ``quality_floor``: the least quality of an accepted update in this round (:func:`task_floor`: the task spec's
    floor, raised in the early rounds); required, so that no caller scores with another floor than the auditor
    reproduces by forgetting it.
    ``data_credit``: the task spec's (:attr:`TaskSpec.data_credit`), required for the same reason.
    ``grace``: :func:`task_grace` (None: no grace), also required; its memory travels in the strategy's state
    (``state`` in, :attr:`RoundOutcome.state` out), so the rounds must be scored in order from the state before.
    """
    n = len(clients)
    needs_losses = strategy.needs_local_losses
    usable = [c.update is not None and c.active and (c.local_losses is not None or not needs_losses) for c in clients]
    losses = [math.nan] * n
    qualities = [0.0] * n
    new_global, new_state = global_params, state
    screened = None
    starts = global_params.expand(n, -1) if client_params is None else client_params.to(global_params.dtype)
    rewards = starts.clone() if gives_rewards(strategy.name) else None
    if any(usable):
        rows = [i for i in range(n) if usable[i]]
        updates = torch.full((n, global_params.numel()), math.nan, dtype=global_params.dtype)
        for i in rows:
            updates[i] = clients[i].update.to(global_params.dtype)  # type: ignore[union-attr]
        evaluated = evaluator.evaluations(starts[rows] + updates[rows])
        placeholder = Evaluation(loss=math.nan, accuracy=0.0)
        evaluations = [placeholder] * n
        for i, evaluation in zip(rows, evaluated, strict=True):
            evaluations[i] = evaluation
            losses[i] = evaluation.loss
        sizes = [float(c.data_size) for c in clients]
        validation = Validation(
            evaluate=evaluator,
            client_evaluations=evaluations,
            local_sample_losses=[c.local_losses for c in clients] if needs_losses else None,
        )
        screened = screen(
            updates,
            torch.tensor(usable),
            torch.tensor(losses, dtype=torch.float64),
            screening,
            last_step,
            data_sizes=torch.tensor(sizes, dtype=torch.float64),
            layers=evaluator.model.param_spec().sizes,
            accuracy=validation_accuracy([e.accuracy for e in evaluations], evaluator.dataset),
        )
        result, scored = aggregate_and_score(
            strategy,
            global_params,
            updates,
            screened,
            sizes,
            state,
            validation,
            client_params=client_params,
            source=quality,
            evaluations=evaluations,
            initial_loss=lambda: evaluator(global_params).loss,
            floor=quality_floor,
            data_credit=data_credit,
            grace=grace,
            refuse_non_finite=True,  # an update that blows the model up fails the quality check too
        )
        qualities = list(scored.values)
        new_global, new_state = result.global_params, result.state
        rewards = result.rewards if rewards is not None else None
        usable = result.accepted.tolist()
    wads = to_wad(qualities)
    measurements = tuple(
        Measurement(
            quality=min(wads[i], MAX_QUALITY_WAD) if usable[i] else 0,
            round_time=(clients[i].round_time or 0) if clients[i].active else 0,
            accepted=bool(usable[i]),
            # A commit on chain (with an update or not) is what the round time is measured from.
            committed=clients[i].active and clients[i].round_time is not None,
        )
        for i in range(n)
    )
    accuracy = evaluator(new_global).accuracy
    return RoundOutcome(
        new_global, accuracy, measurements, tuple(qualities), tuple(losses), new_state, screened, rewards
    )
