"""The round loop of a federated experiment in one process, without a chain.

Every round: clients train locally (the trainer's fastest engine), faulty
clients tamper with their updates, the aggregator scores every updated model
on its validation set, screening drops the updates its rules call attacks
(:mod:`fedchain.fl.screening`, the config's ``screening``, as a task spec's),
the strategy aggregates (updates with NaN or infinite values, screened-out
ones included, are rejected there and never averaged in), the global model is
tested, and a :class:`RoundRecord` is emitted.

Two client protocols:

* every client trains from the global model (FedAvg's protocol; the default
  for strategies without rewards in kind);
* every client keeps its own model and receives, as its reward, a sparsified
  share of the global update (FedAVE's and CGSV's protocol; the default for
  fedfaim and fedave): a better contributor ends with a better model, which
  is what the fairness figures measure.

The fair strategy rewards in kind too, but its rewards are models apart:
its clients train from the global model unless ``own_models`` says otherwise.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar, overload

import torch
from torch import nn

from fedchain.data.datasets import ImageDataset, dataset_info
from fedchain.data.faults import flip_sign, free_ride, noise_of_norm, scale_update, sybil_update
from fedchain.errors import ConfigError
from fedchain.experiments.checkpoint import RunCheckpoint, load_checkpoint, save_checkpoint
from fedchain.experiments.config import ExperimentConfig
from fedchain.experiments.federation import FREE_RIDER, NOISE, SCALED, SIGN_FLIPPED, SYBIL, Federation, build_federation
from fedchain.experiments.results import ClientInfo, ExperimentResult, RoundRecord
from fedchain.fl import Evaluation, RoundResult, Strategy, StrategyState, Validation
from fedchain.fl.floor import DEFAULT_MIN_LOSS_REPUTATION, DEFAULT_MIN_QUALITY, round_floor
from fedchain.fl.quality import GraceRule, QualitySource, default_source, grace_rule
from fedchain.fl.registry import configured_strategy, fit_layer_sizes
from fedchain.fl.rounds import aggregate_and_score
from fedchain.fl.screening import ScreeningConfig, ScreeningResult, screen, validation_accuracy
from fedchain.fl.strategies.fair import Fair
from fedchain.fl.strategies.fedave import FedAVE
from fedchain.models.registry import ModelSpec
from fedchain.taskspec import REWARD_IN_KIND
from fedchain.trainer import TrainConfig, Trainer, WorkerPool, predict, standalone_accuracies
from fedchain.trainer.local import model_spec_of

log = logging.getLogger(__name__)

#: Any strategy class: what goes into :func:`fit_strategy` comes out with its own type.
AnyStrategy = TypeVar("AnyStrategy", bound=Strategy)

#: Called after every round with its record (progress bars, logs).
RoundCallback = Callable[[RoundRecord], None]

#: Of the strategies that reward in kind (:data:`~fedchain.taskspec.REWARD_IN_KIND`), the ones whose
#: clients keep their rewarded models and train from them by default (the seeds' protocol); the fair
#: protocol's clients train from the global model.
TRAIN_FROM_REWARD = frozenset({"fedfaim", "fedave"})

#: Mixes the experiment seed and the round number into the trainer's per-round seed.
_ROUND_SEED_STRIDE = 1_000_003
#: Offset of the generator that draws random updates (free riders', noise clients').
_SEED_RANDOM_UPDATES = 5
#: Repeat k of the standalone models trains with seed ``seed + k * _STANDALONE_SEED_STRIDE``
#: (repeat 0 with the run's own seed, from the run's initial model).
_STANDALONE_SEED_STRIDE = 1000


def model_spec(config: ExperimentConfig, federation: Federation) -> ModelSpec:
    """The model of ``config`` shaped for the federation's images and classes."""
    images = federation.test.images
    return ModelSpec(config.model, federation.num_classes, int(images.shape[1]), int(images.shape[-1]))


def build_strategy(config: ExperimentConfig) -> Strategy:
    """The strategy of ``config`` with its options, its aggregation rule and, when enabled, pruning."""
    options = dict(config.strategy_options)
    if config.pruning.enabled:
        options["pruning"] = config.pruning.to_pruning(total_rounds=config.rounds, seed=config.seed)
    return configured_strategy(config.strategy, options, config.aggregation)


def fit_strategy(strategy: AnyStrategy, spec: ModelSpec, n_clients: int) -> AnyStrategy:
    """``strategy`` fitted to the model and the federation, at set-up rather than in round 1.

    fedave and fair get the model's layer sizes when none were given (they mask rewards
    per layer), and fedave's fixed ``quota_fractions``, if any, must name every client.
    """
    if isinstance(strategy, FedAVE):
        strategy.check_client_count(n_clients)
    if not isinstance(strategy, FedAVE | Fair) or strategy.layer_sizes:
        return strategy
    return fit_layer_sizes(strategy, model_spec_of(spec.build()).sizes)


def keeps_own_models(config: ExperimentConfig, strategy: Strategy) -> bool:
    """Whether clients train from their own rewarded models rather than from the global model."""
    rewards = strategy.name in REWARD_IN_KIND
    if config.own_models and not rewards:
        raise ConfigError(
            f"own_models needs a strategy that rewards in kind; {strategy.name!r} gives clients no models",
            hint=f"use one of {', '.join(sorted(REWARD_IN_KIND))}, or leave own_models unset",
        )
    return strategy.name in TRAIN_FROM_REWARD if config.own_models is None else config.own_models


class ModelEvaluator:
    """Evaluates flat parameter vectors of one model on fixed datasets (no gradients)."""

    def __init__(self, spec: ModelSpec, device: torch.device) -> None:
        self.device = device
        self._module: nn.Module = spec.build().to(device)
        self.layer_sizes = spec.param_spec().sizes

    def evaluations(self, params: torch.Tensor, dataset: ImageDataset) -> list[Evaluation]:
        """One :class:`Evaluation` (with per-sample losses) per row of ``params`` (``[d]`` or ``[n, d]``)."""
        result = predict(self._module, params, dataset, device=self.device)
        return [
            Evaluation(loss=float(loss), accuracy=float(acc), sample_losses=result.losses[i])
            for i, (loss, acc) in enumerate(zip(result.mean_losses.tolist(), result.accuracies.tolist(), strict=True))
        ]

    def evaluate(self, params: torch.Tensor, dataset: ImageDataset) -> Evaluation:
        """The :class:`Evaluation` of one flat model."""
        return self.evaluations(params.reshape(1, -1), dataset)[0]

    def accuracies(self, params: torch.Tensor, dataset: ImageDataset) -> tuple[float, ...]:
        """Accuracy of every row of ``params`` on ``dataset``."""
        return tuple(e.accuracy for e in self.evaluations(params, dataset))


class _LocalLosses(Sequence[torch.Tensor]):
    """Per-sample losses of client i's model on client i's data, computed on first access (FedAVE needs them)."""

    def __init__(self, evaluator: ModelEvaluator, models: torch.Tensor, clients: Sequence[ImageDataset]) -> None:
        self._evaluator, self._models, self._clients = evaluator, models, clients
        self._cache: dict[int, torch.Tensor] = {}

    def __len__(self) -> int:
        return len(self._clients)

    @overload
    def __getitem__(self, i: int) -> torch.Tensor: ...

    @overload
    def __getitem__(self, i: slice) -> list[torch.Tensor]: ...

    def __getitem__(self, i: int | slice) -> torch.Tensor | list[torch.Tensor]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i not in self._cache:
            evaluation = self._evaluator.evaluate(self._models[i], self._clients[i])
            assert evaluation.sample_losses is not None
            self._cache[i] = evaluation.sample_losses
        return self._cache[i]


def tamper(
    updates: torch.Tensor,
    faults: Sequence[str],
    config: ExperimentConfig,
    round_number: int,
    last_step: torch.Tensor | None = None,
) -> torch.Tensor:
    """The updates the clients send (a new tensor): free riders' (from round ``faults.free_ride_from``) and
    noise clients' replaced, scaled clients' multiplied, sign flippers' negated, and every Sybil's the one
    update they agreed on. ``last_step``: the last round's global model minus the one before (None in round 1),
    which disguised free riders resend."""
    sent = updates.clone()
    generator = torch.Generator().manual_seed(
        (config.seed * _ROUND_SEED_STRIDE + round_number) * 10 + _SEED_RANDOM_UPDATES
    )
    for i, fault in enumerate(faults):
        if fault == FREE_RIDER and round_number >= config.faults.free_ride_from:
            sent[i] = free_ride(
                updates[i],
                config.faults.free_rider_mode,
                generator=generator,
                last_step=last_step,
                disguise_noise=config.faults.disguise_noise,
            )
        elif fault == SCALED:
            sent[i] = scale_update(updates[i], config.faults.scale)
        elif fault == SIGN_FLIPPED:
            sent[i] = flip_sign(updates[i])
        elif fault == NOISE:
            sent[i] = noise_of_norm(updates[i], generator=generator)
    sybils = [i for i, fault in enumerate(faults) if fault == SYBIL]
    if sybils:
        sent[sybils] = sybil_update(updates[sybils], config.faults.sybil_scale)
    return sent


def quality_source(strategy: Strategy) -> QualitySource:
    """Where the chain's per-round quality comes from: ``contribution`` or the Tian ``loss`` ratio."""
    return default_source(strategy.name)


def experiment_grace(config: ExperimentConfig, classes: int) -> GraceRule | None:
    """The grace of an experiment of ``config`` over a model of ``classes`` classes, as a task spec of the same
    settings has it (:meth:`fedchain.taskspec.TaskSpec.grace_rule`) with the default terms' q_min."""
    return grace_rule(
        config.quality_grace,
        min_quality=DEFAULT_MIN_QUALITY,
        classes=classes if config.grace_first_round else None,
        by_loss=config.grace_first_round_loss,
        by_screen=config.grace_first_round_screened,
        first_extra=config.grace_first_round_extra,
        two_in_a_row=config.grace_two_in_a_row,
    )


def score_round(
    strategy: Strategy,
    evaluator: ModelEvaluator,
    federation: Federation,
    global_params: torch.Tensor,
    local_models: torch.Tensor,
    updates: torch.Tensor,
    state: StrategyState | None,
    client_params: torch.Tensor | None,
    screening: ScreeningConfig,
    last_step: torch.Tensor | None,
    quality_floor: float,
    data_credit: float,
    grace: GraceRule | None = None,
) -> tuple[RoundResult, tuple[float, ...], ScreeningResult]:
    """The aggregator's side of one round: validation inputs, screening, the strategy's round, the chain's quality.

    ``local_models`` are the models the clients sent (``start + updates``); ``client_params`` the
    models they trained from when they keep their own (else ``None``); ``last_step`` the global step of the
    round before (screening's rule 5); ``quality_floor`` the least quality of an accepted update in this round; ``data_credit`` the
    most a small client's contribution quality grows (:func:`fedchain.fl.quality.data_credited`); ``grace`` the
    task's grace (:func:`fedchain.fl.quality.graced`; None: none), whose memory ``state`` carries. From screening on
    the round is the aggregator's (:func:`fedchain.fl.rounds.aggregate_and_score`), but for a model of non-finite
    loss, which is left to screening's loss check here.
    Returns the strategy's result, every client's quality q_i and what screening decided.
    """
    by_loss = quality_source(strategy) == "loss"
    client_evaluations = None
    accuracy = None
    if by_loss or screening.needs_losses or screening.needs_accuracies or grace is not None:
        client_evaluations = evaluator.evaluations(local_models, federation.validation)
        accuracy = validation_accuracy([e.accuracy for e in client_evaluations], federation.validation)
    losses = (
        None if client_evaluations is None else torch.tensor([e.loss for e in client_evaluations], dtype=torch.float64)
    )
    sizes = torch.tensor(federation.data_sizes, dtype=torch.float64)
    present = torch.ones(updates.shape[0], dtype=torch.bool)
    screened = screen(
        updates,
        present,
        losses,
        screening,
        last_step,
        data_sizes=sizes,
        layers=evaluator.layer_sizes,
        accuracy=accuracy,
    )
    validation = Validation(
        evaluate=lambda params: evaluator.evaluate(params, federation.validation),
        client_evaluations=client_evaluations,
        local_sample_losses=_LocalLosses(evaluator, local_models, federation.clients),
    )
    result, quality = aggregate_and_score(
        strategy,
        global_params,
        updates,
        screened,
        sizes,
        state,
        validation,
        client_params=client_params,
        source=quality_source(strategy),
        evaluations=client_evaluations,
        initial_loss=lambda: evaluator.evaluate(global_params, federation.validation).loss,
        floor=quality_floor,
        data_credit=data_credit,
        grace=grace,
        refuse_non_finite=False,  # left to screening's loss check, as the kept table runs were measured
    )
    return result, quality.values, screened


def measure_standalone(
    trainer: Trainer,
    config: ExperimentConfig,
    federation: Federation,
    *,
    done: Sequence[Sequence[float]] = (),
    on_repeat: Callable[[tuple[tuple[float, ...], ...]], None] | None = None,
) -> tuple[tuple[float, ...], ...]:
    """Each client's standalone accuracy, once per ``config.standalone_repeats`` (training seed and initial model differ).

    Every repeat trains each client alone for the run's total epochs
    (:func:`~fedchain.trainer.standalone_accuracies`); repeat 0 starts from the
    run's own initial model, so one repeat gives what the run always gave.
    The repeats in ``done`` (kept by a stopped run) are not trained again;
    ``on_repeat`` gets every repeat so far after each one ends.
    """
    epochs = config.rounds * config.local_epochs
    runs = [tuple(float(a) for a in run) for run in done]
    for repeat in range(len(runs), config.standalone_repeats):
        seed = config.seed + repeat * _STANDALONE_SEED_STRIDE
        initial = trainer.initial_params(seed).to(trainer.device)
        accuracies = standalone_accuracies(
            trainer, initial, federation.clients, federation.test, epochs=epochs, seed=seed
        )
        runs.append(tuple(float(a) for a in accuracies.tolist()))
        log.info("standalone models, repeat %d of %d: done", repeat + 1, config.standalone_repeats)
        if on_repeat is not None:
            on_repeat(tuple(runs))
    return tuple(runs)


def run_experiment(
    config: ExperimentConfig,
    *,
    federation: Federation | None = None,
    standalone_runs: Sequence[Sequence[float]] | None = None,
    on_start: Callable[[], None] | None = None,
    on_round: RoundCallback | None = None,
    pool: WorkerPool | None = None,
    checkpoint: Path | None = None,
) -> ExperimentResult:
    """Run the experiment of ``config`` and return everything it measured.

    Args:
        config: the experiment.
        federation: the data, when the caller built it already (several strategies on the same split).
        standalone_runs: precomputed standalone accuracies, one sequence per repeat (they depend
            on the data, not on the strategy).
        on_start: called once everything is set up (names checked, data read and split, the
            trainer ready), before the standalone models and the first round.
        on_round: called after every round with its record.
        pool: worker processes to train with, kept by the caller across runs (their start-up
            costs seconds); by default the trainer starts its own when its engine needs them.
        checkpoint: a file for the run's state, saved every ``config.checkpoint_every`` rounds.
            When it holds the state of an earlier run of the same settings that stopped, the
            run goes on after that run's last saved round (its rounds are reported to
            ``on_round`` first) and ends as that run would have. The caller removes it once
            the result is kept.
    """
    began = time.perf_counter()
    strategy = build_strategy(config)
    dataset_info(config.dataset)  # unknown names fail here, before any data is read
    ModelSpec(config.model)
    own_models = keeps_own_models(config, strategy)
    federation = federation if federation is not None else build_federation(config)
    spec = model_spec(config, federation)
    strategy = fit_strategy(strategy, spec, len(federation.clients))
    train_config = TrainConfig(
        lr=config.lr,
        momentum=config.momentum,
        batch_size=config.batch_size,
        local_epochs=config.local_epochs,
        max_grad_norm=config.max_grad_norm,
        seed=config.seed,
    )
    clients = federation.clients
    records: list[RoundRecord] = []
    rounds_to_target: int | None = None
    with Trainer(spec, train_config, engine=config.engine, device=config.device, pool=pool) as trainer:
        evaluator = ModelEvaluator(spec, trainer.device)
        global_params = trainer.initial_params(config.seed).to(trainer.device)
        models = global_params.expand(len(clients), -1).clone() if own_models else None
        state: StrategyState | None = None
        last_rewards: torch.Tensor | None = None  # the last round's rewarded models, when the strategy gives them
        last_step: torch.Tensor | None = None  # the last round's global step (disguised free riders resend it)
        earlier = 0.0  # seconds an earlier, stopped run of these settings took
        resumed = (
            None if checkpoint is None else load_checkpoint(checkpoint, config, strategy.state_type, hint=RESUME_HINT)
        )
        if resumed is not None:
            _check_own_models(resumed, own_models, checkpoint)
            resumed = resumed.to(trainer.device)
            global_params, models, state = resumed.global_params, resumed.models, resumed.state
            last_step = resumed.last_step
            last_rewards = resumed.rewards if resumed.rewards is not None else models
            records, rounds_to_target, earlier = list(resumed.records), resumed.rounds_to_target, resumed.seconds
            standalone_runs = standalone_runs if standalone_runs is not None else resumed.standalone_runs
        log.info(
            "%s on %s: %d clients, engine %s, clients train from %s",
            strategy.name,
            config.dataset,
            len(clients),
            trainer.engine,
            "their own models" if own_models else "the global model",
        )
        if on_start is not None:
            on_start()
        if resumed is not None:
            log.info("going on after round %d of an earlier run of these settings (%s)", resumed.round, checkpoint)
            for record in records:
                if on_round is not None:
                    on_round(record)
        if config.trains_standalone and len(standalone_runs or ()) < config.standalone_repeats:

            def keep_standalone(runs: tuple[tuple[float, ...], ...]) -> None:
                """Save every finished repeat: each is minutes of training that a stop would lose."""
                if checkpoint is not None and config.checkpoint_every:
                    elapsed = earlier + time.perf_counter() - began
                    save_checkpoint(
                        checkpoint, config, RunCheckpoint(0, global_params, models, None, None, (), None, runs, elapsed)
                    )

            standalone_runs = measure_standalone(
                trainer, config, federation, done=standalone_runs or (), on_repeat=keep_standalone
            )
        first = 1 if resumed is None else resumed.round + 1
        if config.stop_at_target and rounds_to_target is not None:
            first = config.rounds + 1  # the earlier run had reached its target: nothing left to run
        for round_number in range(first, config.rounds + 1):
            round_began = time.perf_counter()
            start = models if models is not None else strategy.broadcast(global_params, state)
            seed = config.seed * _ROUND_SEED_STRIDE + round_number
            trained = trainer.train(start, clients, config=dataclasses.replace(train_config, seed=seed))
            updates = tamper(trained.updates(start), federation.faults, config, round_number, last_step)
            result, quality, screened = score_round(
                strategy,
                evaluator,
                federation,
                global_params,
                start + updates,
                updates,
                state,
                models,
                config.screening,
                last_step,
                round_floor(
                    config.quality_floor,
                    round_number,
                    early=config.early_floor,
                    min_quality=DEFAULT_MIN_QUALITY,
                    min_loss_reputation=DEFAULT_MIN_LOSS_REPUTATION,
                ),
                config.data_credit,
                experiment_grace(config, federation.num_classes),
            )
            for client, reason in screened.rejected().items():
                log.info("round %d: client %d screened out (%s)", round_number, client, reason.value)
            for client in torch.nonzero(screened.doubtful).flatten().tolist():
                log.info(
                    "round %d: client %d accepted in doubt (novelty %.2f): held at the floor",
                    round_number,
                    client,
                    float(screened.novelty[client]),
                )
            last_step = result.global_params - global_params
            state, global_params, last_rewards = result.state, result.global_params, result.rewards
            if models is not None and result.rewards is not None:
                models = result.rewards
            rejected = [i for i, ok in enumerate(result.accepted.tolist()) if not ok]
            if rejected:
                log.info("round %d: updates of clients %s were not aggregated", round_number, rejected)
            test = evaluator.evaluate(global_params, federation.test)
            round_rewards = None
            if result.rewards is not None and config.fairness_every and round_number % config.fairness_every == 0:
                round_rewards = evaluator.accuracies(result.rewards, federation.test)
            record = RoundRecord(
                round=round_number,
                test_accuracy=test.accuracy,
                test_loss=test.loss,
                contribution=tuple(float(c) for c in torch.nan_to_num(result.contribution, nan=0.0).tolist()),
                quality=quality,
                accepted=tuple(bool(a) for a in result.accepted.tolist()),
                seconds=time.perf_counter() - round_began,
                reward_accuracy=round_rewards,
                novelty=tuple(None if math.isnan(x) else float(x) for x in screened.novelty.tolist()),
            )
            records.append(record)
            target = config.target_accuracy
            if target is not None and rounds_to_target is None and record.test_accuracy >= target:
                rounds_to_target = round_number
            if checkpoint is not None and config.checkpoint_every and round_number % config.checkpoint_every == 0:
                saved = RunCheckpoint(
                    round_number,
                    global_params,
                    models,
                    None if models is not None else last_rewards,
                    result.state,
                    tuple(records),
                    rounds_to_target,
                    _runs(standalone_runs),
                    earlier + time.perf_counter() - began,
                    last_step,
                )
                save_checkpoint(checkpoint, config, saved)
            if on_round is not None:  # before the log line: a round logged has been reported (and kept on Ctrl-C)
                on_round(record)
            log.info(
                "round %d: test accuracy %.4f, loss %.4f (%.1f s, training %.1f s)",
                round_number,
                record.test_accuracy,
                record.test_loss,
                record.seconds,
                trained.seconds,
            )
            if config.stop_at_target and rounds_to_target is not None:
                break
        reward_accuracy = None
        if last_rewards is not None and records:
            reward_accuracy = records[-1].reward_accuracy or evaluator.accuracies(last_rewards, federation.test)
    infos = tuple(
        ClientInfo(i, n, fault)
        for i, (n, fault) in enumerate(zip(federation.data_sizes, federation.faults, strict=True))
    )
    return ExperimentResult(
        config=config,
        clients=infos,
        rounds=tuple(records),
        standalone_runs=_runs(standalone_runs),
        reward_accuracy=reward_accuracy,
        rounds_to_target=rounds_to_target,
        seconds=earlier + time.perf_counter() - began,
    )


#: What to do about a checkpoint that cannot serve this run.
RESUME_HINT = "move it away to start this run over (fedchain simulate --fresh does), or choose another output folder"


def _runs(standalone_runs: Sequence[Sequence[float]] | None) -> tuple[tuple[float, ...], ...] | None:
    return None if standalone_runs is None else tuple(tuple(float(a) for a in run) for run in standalone_runs)


def _check_own_models(resumed: RunCheckpoint, own_models: bool, path: Path | None) -> None:
    """Refuse a checkpoint without the clients' own models for a run that keeps them, or the other way round."""
    if own_models != (resumed.models is not None):
        raise ConfigError(
            f"{path} {'lacks' if own_models else 'holds'} the clients' own models this run "
            f"{'keeps' if own_models else 'does not keep'}",
            hint=RESUME_HINT,
        )


__all__ = [
    "REWARD_IN_KIND",
    "TRAIN_FROM_REWARD",
    "ModelEvaluator",
    "RoundCallback",
    "build_strategy",
    "fit_strategy",
    "keeps_own_models",
    "measure_standalone",
    "model_spec",
    "quality_source",
    "run_experiment",
    "score_round",
    "tamper",
]
