"""The strategy API: one pure round function per aggregation/contribution/reward rule.

A strategy is a frozen dataclass (its fields are its configuration) with one
pure method, :meth:`Strategy.round`::

    strategy = get_strategy("cgsv", gamma0=0.5)    # fedchain.fl.registry
    state = None                                   # the first round builds it
    for t in range(rounds):
        sent = strategy.broadcast(global_params, state)   # pruned when pruning is on
        updates = torch.stack([train(sent, i) - sent for i in clients])   # [n, d]
        result = strategy.round(global_params, updates, data_sizes, state, validation)
        global_params, state = result.global_params, result.state

Conventions: models and updates are flat float vectors (see
:mod:`fedchain.fl.params`), ``global_params`` ``[d]`` and ``updates``
``[n, d]`` on any device; per-client vectors (data sizes, weights,
contribution, accepted mask, losses) are ``[n]`` CPU tensors, float64 or bool.
Rows with NaN or infinite values are never aggregated: they are marked in
``accepted`` and replaced by zeros before any arithmetic. The validation
numbers a strategy needs come from a :class:`Validation`: precomputed by the
caller, or an :data:`Evaluator` the kernel calls, so the kernels do no I/O.
"""

from __future__ import annotations

import dataclasses
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

import torch

from fedchain.errors import (
    ConfigError,
    RejectReason,
    UpdateMetadataMismatch,
    UpdateNonFinite,
    UpdateRejected,
    UpdateSpecMismatch,
)
from fedchain.fl.aggregate import finite_rows
from fedchain.fl.aggregation import MEAN, AggregationConfig
from fedchain.fl.pruning import Pruning, restore_dense, topology_mask


@dataclass(frozen=True)
class Evaluation:
    """A model's performance on the aggregator's validation set."""

    #: Mean loss over the validation samples.
    loss: float
    #: Accuracy in [0, 1].
    accuracy: float
    #: Per-sample losses ``[n_samples]`` (needed by fedave's loss histograms), or None.
    sample_losses: torch.Tensor | None = None


#: Maps a flat parameter vector ``[d]`` to its :class:`Evaluation` on the validation set.
Evaluator = Callable[[torch.Tensor], Evaluation]
#: Maps stacked flat models ``[m, d]`` to their ``m`` :class:`Evaluation` s (one batched pass).
BatchEvaluator = Callable[[torch.Tensor], Sequence[Evaluation]]


@dataclass(frozen=True)
class Validation:
    """Validation inputs of one round; which ones a strategy needs is in its docstring."""

    #: Evaluates any flat model on the validation set (fedfaim needs it for l and l_{-i}).
    evaluate: Evaluator | None = None
    #: Evaluates many models at once; used instead of :attr:`evaluate` when given (faster).
    evaluate_many: BatchEvaluator | None = None
    #: Precomputed evaluations of every client's updated model (the model it
    #: trained from plus ``Delta_i``); when None they are computed with :attr:`evaluate`.
    client_evaluations: Sequence[Evaluation] | None = None
    #: fedave: per-sample losses of client i's updated model on client i's own data
    #: (None, or anything, for a client without a usable update: only finite clients' are read).
    local_sample_losses: Sequence[torch.Tensor | None] | None = None


@dataclass(frozen=True)
class StrategyState:
    """What a strategy carries from one round to the next; subclasses add fields."""

    #: Rounds completed so far (the next round is ``round + 1``).
    round: int = 0
    #: The chain quality's grace memory (:class:`fedchain.fl.quality.GraceMemory`), kept by the scorers, not the
    #: strategy: whether each client's last scored round was poor, and the graces it used. Empty: none yet.
    quality_poor: tuple[bool, ...] = ()
    graces_used: tuple[int, ...] = ()
    #: Whether each client's last round was graced after a good one (a spell that a second grace may close).
    graces_opened: tuple[bool, ...] = ()

    def parts(self) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        """The state as (tensor fields, contiguous on the CPU; every other field), for saving apart.

        Tensors go to a safetensors file and the rest to its JSON metadata, so a
        checkpoint is never pickled; :meth:`from_parts` builds the state back.
        """
        tensors: dict[str, torch.Tensor] = {}
        fields: dict[str, Any] = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if isinstance(value, torch.Tensor):
                tensors[field.name] = value.detach().to("cpu").contiguous()
            else:
                fields[field.name] = value
        return tensors, fields

    @classmethod
    def from_parts(cls: type[S], tensors: Mapping[str, torch.Tensor], fields: Mapping[str, Any]) -> S:
        """The state :meth:`parts` split; ``TypeError`` when they are not this class's fields."""
        values: dict[str, Any] = {**fields, **tensors}
        for name in ("quality_poor", "graces_used", "graces_opened"):  # JSON gives lists back
            if name in values:
                values[name] = tuple(values[name])
        return cls(**values)


S = TypeVar("S", bound=StrategyState)


@dataclass(frozen=True)
class RoundResult(Generic[S]):
    """Everything one round produces."""

    #: The new global model ``[d]``.
    global_params: torch.Tensor
    #: Per-client contribution of this round ``[n]`` float64 (each strategy documents its meaning).
    contribution: torch.Tensor
    #: Per-client rewarded model ``[n, d]`` (fedfaim, fedave): the model the client
    #: trained from (``client_params``, else the dense global model before this round)
    #: plus :attr:`reward_updates`; None for the others.
    rewards: torch.Tensor | None
    #: Which clients were aggregated ``[n]`` bool.
    accepted: torch.Tensor
    #: The state to pass to the next round.
    state: S
    #: The aggregation weights used ``[n]`` float64 (0 for rejected clients).
    weights: torch.Tensor
    #: Each client's sparsified share of the global update ``[n, d]`` (fedfaim, fedave); or None.
    reward_updates: torch.Tensor | None = None
    #: Validation loss of every client's updated model ``[n]`` when the strategy
    #: measured it (NaN for rejected clients), else None: the input of the Tian quality.
    client_losses: torch.Tensor | None = None


@dataclass(frozen=True)
class RoundInputs:
    """Checked inputs of one round, as the kernels receive them."""

    #: The model the clients trained from ``[d]`` (the sparse one when pruning is on).
    global_params: torch.Tensor
    #: Client updates ``[n, d]`` with non-finite rows replaced by zeros.
    updates: torch.Tensor
    #: Client data sizes ``[n]`` float64 on the CPU.
    data_sizes: torch.Tensor
    #: Rows that were finite ``[n]`` bool on the CPU.
    finite: torch.Tensor
    #: Validation inputs, possibly empty.
    validation: Validation
    #: The model each client trained from ``[n, d]``; None when all trained from :attr:`global_params`.
    client_params: torch.Tensor | None = None

    @property
    def n_clients(self) -> int:
        """The number of updates n."""
        return self.updates.shape[0]

    def evaluate_models(self, strategy: str, models: torch.Tensor) -> list[Evaluation]:
        """Validation evaluations of the stacked models ``[m, d]``, batched when the caller allows it.

        A :class:`ConfigError` naming ``strategy`` when the validation has no evaluator.
        """
        if self.validation.evaluate_many is not None:
            evaluations = list(self.validation.evaluate_many(models))
            if len(evaluations) != models.shape[0]:
                raise ConfigError(
                    f"evaluate_many returned {len(evaluations)} evaluations for {models.shape[0]} models",
                    hint="return one Evaluation per row of the stacked models",
                )
            return evaluations
        if self.validation.evaluate is None:
            raise ConfigError(
                f"strategy {strategy!r} needs a validation evaluator",
                hint="pass validation=Validation(evaluate=...) mapping a flat model to its validation Evaluation",
            )
        return [self.validation.evaluate(model) for model in models]

    def client_models(self, rows: torch.Tensor) -> torch.Tensor:
        """The updated models ``start_i + Delta_i`` of the clients ``rows``, stacked ``[len(rows), d]``."""
        start = self.global_params if self.client_params is None else self.client_params[rows]
        return start + self.updates[rows]

    def client_evaluations(self, strategy: str) -> list[Evaluation | None]:
        """Validation evaluation of every finite client's updated model; None where rejected.

        Uses :attr:`Validation.client_evaluations` when given, else calls the evaluator.
        """
        given = self.validation.client_evaluations
        if given is not None:
            if len(given) != self.n_clients:
                raise ConfigError(
                    f"strategy {strategy!r} got {len(given)} client evaluations for {self.n_clients} updates",
                    hint="pass one Evaluation per client, in the order of the updates",
                )
            return [evaluation if ok else None for evaluation, ok in zip(given, self.finite.tolist(), strict=True)]
        rows = torch.nonzero(self.finite).flatten().to(self.updates.device)
        evaluated = iter(self.evaluate_models(strategy, self.client_models(rows)) if rows.numel() else [])
        return [next(evaluated) if ok else None for ok in self.finite.tolist()]


def evaluation_losses(evaluations: Sequence[Evaluation | None]) -> torch.Tensor:
    """The validation loss of every evaluation, float64 ``[n]`` on the CPU; NaN where there is none (a rejected
    client, :meth:`RoundInputs.client_evaluations`)."""
    return torch.tensor([math.nan if e is None else float(e.loss) for e in evaluations], dtype=torch.float64)


def _check_round_inputs(global_params: torch.Tensor, updates: torch.Tensor, data_sizes: Any) -> torch.Tensor:
    """Raise :class:`UpdateRejected` for malformed shapes; return the data sizes as float64 ``[n]``."""
    is_vector = isinstance(global_params, torch.Tensor) and global_params.ndim == 1
    if not is_vector or not global_params.is_floating_point():
        raise UpdateSpecMismatch(
            f"global params must be a flat float vector [d], got {_describe(global_params)}",
            hint="flatten the model with fedchain.fl.params.flatten",
        )
    if not torch.isfinite(global_params).all():
        raise UpdateNonFinite(
            "the global params hold NaN or infinite values", hint="restart from the last finite global model"
        )
    if not isinstance(updates, torch.Tensor) or updates.ndim != 2 or updates.shape[1] != global_params.shape[0]:
        raise UpdateSpecMismatch(
            f"updates must be a [n_clients, {global_params.shape[0]}] tensor, got {_describe(updates)}",
            hint="stack each client's local - global flat vector with torch.stack",
        )
    if updates.shape[0] == 0:
        raise UpdateRejected(
            "a round needs at least one client update", reason=RejectReason.MISSING, hint="wait for at least one update"
        )
    if updates.dtype != global_params.dtype or updates.device != global_params.device:
        raise UpdateSpecMismatch(
            f"updates are {updates.dtype} on {updates.device} but the global params are "
            f"{global_params.dtype} on {global_params.device}",
            reason=RejectReason.WRONG_DTYPE,
            hint="convert the updates with .to(global_params)",
        )
    sizes = torch.as_tensor(data_sizes, dtype=torch.float64).cpu()
    if sizes.shape != (updates.shape[0],):
        raise UpdateMetadataMismatch(
            f"data sizes must be [{updates.shape[0]}] (one per update), got shape {tuple(sizes.shape)}",
            hint="pass one data size per client, in the order of the updates",
        )
    if not torch.isfinite(sizes).all() or (sizes < 0).any():
        raise UpdateMetadataMismatch(
            f"data sizes must be finite and non-negative, got {sizes.tolist()}",
            hint="pass each client's committed number of training samples",
        )
    return sizes


def _check_client_params(client_params: Any, updates: torch.Tensor) -> None:
    """Raise :class:`UpdateRejected` unless ``client_params`` matches ``updates`` and is finite."""
    if (
        not isinstance(client_params, torch.Tensor)
        or client_params.shape != updates.shape
        or client_params.dtype != updates.dtype
        or client_params.device != updates.device
    ):
        raise UpdateSpecMismatch(
            f"client params must be a {updates.dtype} tensor of shape {tuple(updates.shape)} on {updates.device}, "
            f"got {_describe(client_params)}",
            hint="stack the model each client trained from, in the order of the updates",
        )
    if not torch.isfinite(client_params).all():
        raise UpdateNonFinite(
            "the client params hold NaN or infinite values", hint="restart those clients from the global model"
        )


def _describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a {value.dtype} tensor of shape {tuple(value.shape)}"
    return type(value).__name__


def check_state_size(strategy: str, vector: torch.Tensor | None, n_clients: int) -> None:
    """A :class:`ConfigError` when a per-client state vector was built for another number of clients."""
    if vector is not None and vector.shape != (n_clients,):
        raise ConfigError(
            f"strategy {strategy!r} has state for {vector.numel()} clients but got {n_clients} updates",
            hint="keep the client set fixed within a task, or start from state=None",
        )


@dataclass(frozen=True, kw_only=True)
class Strategy(ABC, Generic[S]):
    """Base of every strategy: input checks, NaN rejection and the pruning option."""

    #: Registry name (``fedchain.fl.registry.get_strategy(name)``).
    name: ClassVar[str]
    #: The state class this strategy carries.
    state_type: ClassVar[type[StrategyState]] = StrategyState
    #: Whether it needs :attr:`Validation.local_sample_losses` (losses only the trainer of a client's data can compute).
    needs_local_losses: ClassVar[bool] = False

    #: Whether the strategy normalises every update to a length of its own and weighs the results by its
    #: own scores (cgsv, fedave): then only the plain mean applies (:mod:`fedchain.fl.aggregation`).
    normalises_updates: ClassVar[bool] = False

    #: Dynamic-topology pruning of the model sent to clients; None = dense.
    pruning: Pruning | None = None
    #: How the accepted updates are combined: the weighted mean or a robust rule (the task spec's ``aggregation``).
    aggregation: AggregationConfig = MEAN

    def __post_init__(self) -> None:
        if self.normalises_updates and not self.aggregation.is_mean:
            robust = ", ".join(sorted(cls.name for cls in _concrete(Strategy) if not cls.normalises_updates))
            raise ConfigError(
                f"strategy {self.name!r} normalises every update itself and weighs them by its own scores, "
                f"so it takes only the plain mean, not aggregation rule {self.aggregation.rule!r}"
                + (f" with clip_norm {self.aggregation.clip_norm}" if self.aggregation.clip_norm is not None else ""),
                hint=f"use aggregation rule mean without clip_norm with {self.name}, or a robust rule with {robust}",
            )

    def init_state(self, data_sizes: torch.Tensor) -> S:
        """The state before round 1 (``data_sizes`` is float64 ``[n]``)."""
        return self.state_type()  # type: ignore[return-value]

    def broadcast(self, global_params: torch.Tensor, state: S | None = None) -> torch.Tensor:
        """The model to send to clients this round: ``global_params``, pruned when pruning is on.

        Clients train from it and report ``Delta_i = local_i - broadcast(...)``.
        """
        if self.pruning is None:
            return global_params
        round_number = (state.round if state is not None else 0) + 1
        return global_params * topology_mask(global_params, round_number, self.pruning)

    def round(
        self,
        global_params: torch.Tensor,
        updates: torch.Tensor,
        data_sizes: torch.Tensor | Sequence[float],
        state: S | None = None,
        validation: Validation | None = None,
        *,
        client_params: torch.Tensor | None = None,
    ) -> RoundResult[S]:
        """Aggregate one round. Pure: the inputs are not modified.

        Args:
            global_params: the dense global model ``[d]``.
            updates: ``Delta_i = local_i - start_i`` stacked ``[n, d]``, where ``start_i``
                is ``broadcast(global_params, state)`` or, for clients that keep their own
                (rewarded) models, ``client_params[i]``. With pruning, entries outside the
                broadcast topology are dropped.
            data_sizes: ``|D_i|`` of every client ``[n]``.
            state: the previous round's ``result.state``; None starts from :meth:`init_state`.
            validation: the validation inputs the strategy needs (see its docstring).
            client_params: ``start_i`` stacked ``[n, d]`` when clients train from their own
                models; their updated models ``start_i + Delta_i`` are what gets evaluated
                and ``start_i + reward_updates_i`` is their reward.
        """
        sizes = _check_round_inputs(global_params, updates, data_sizes)
        if client_params is not None:
            _check_client_params(client_params, updates)
        if state is None:
            state = self.init_state(sizes)
        if not isinstance(state, self.state_type):
            raise ConfigError(
                f"strategy {self.name!r} needs a {self.state_type.__name__}, got {type(state).__name__}",
                hint="pass the state returned by this strategy's previous round (or None for the first round)",
            )
        finite = finite_rows(updates).cpu()
        clean = updates
        if not finite.all():
            clean = torch.where(finite.to(updates.device)[:, None], updates, torch.zeros_like(updates))
        sent = global_params
        if self.pruning is not None:
            mask = topology_mask(global_params, state.round + 1, self.pruning)
            sent = global_params * mask
            clean = clean * mask
        inputs = RoundInputs(sent, clean, sizes, finite, validation or Validation(), client_params)
        result = self.aggregate(inputs, state)
        start = global_params if client_params is None else client_params
        return dataclasses.replace(
            result,
            global_params=restore_dense(global_params, sent, result.global_params),
            rewards=None if result.reward_updates is None else start + result.reward_updates,
            state=dataclasses.replace(result.state, round=state.round + 1),
        )

    @abstractmethod
    def aggregate(self, inputs: RoundInputs, state: S) -> RoundResult[S]:
        """The strategy's pure kernel over checked inputs; ``state.round + 1`` is this round.

        Kernels return ``global_params`` as ``inputs.global_params`` plus the
        aggregated update, and ``reward_updates`` (not ``rewards``: :meth:`round`
        adds them to the models the clients trained from).
        """


def _concrete(base: type) -> list[type[Strategy]]:
    """Every strategy class defined below ``base`` that has a name (the registry's, without importing it: the
    registry imports the strategies, which import this module)."""
    found: list[type[Strategy]] = []
    subclass: type[Strategy]
    for subclass in base.__subclasses__():
        if "name" in vars(subclass):
            found.append(subclass)
        found.extend(_concrete(subclass))
    return found
