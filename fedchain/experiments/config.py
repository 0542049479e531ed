"""The configuration of one federated experiment without a chain.

An experiment is described once, by a frozen :class:`ExperimentConfig`, read
from a YAML file and overridden by command-line flags. Nested sections
(``faults``, ``pruning``, ``strategy_options``) are merged key by key, so a flag such as
``--noisy-clients 0.3`` changes one fault and keeps the others of the file.

Example (``configs/mnist-fedavg-iid.yaml``)::

    dataset: mnist
    model: lenet5
    partition: iid
    clients: 10
    rounds: 5
    strategy: fedavg
    faults:
      noisy_clients: 0.3
      noise_rate: 0.5
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from fedchain.config import from_mapping, load_yaml
from fedchain.data.partition import PartitionKind
from fedchain.errors import ConfigError
from fedchain.fl.aggregation import MEAN, AggregationConfig
from fedchain.fl.floor import (
    DEFAULT_DATA_CREDIT,
    DEFAULT_QUALITY_FLOOR,
    DEFAULT_QUALITY_GRACE,
    check_data_credit,
    check_floor,
    check_grace,
    check_switch,
)
from fedchain.fl.pruning import Pruning
from fedchain.fl.screening import ScreeningConfig
from fedchain.taskspec import changed_defaults
from fedchain.trainer.config import Engine, TrainConfig, check_max_grad_norm
from fedchain.trainer.device import resolve_device

#: Where ``simulate`` writes when neither the file nor a flag names a folder: a
#: folder below it named by the run's settings (:func:`settings_digest`).
DEFAULT_OUTPUT_DIR = Path("runs") / "simulate"


@dataclass(frozen=True)
class FaultConfig:
    """Misbehaving clients, each kind given as a fraction of all clients.

    Faulty clients are drawn with the experiment's seed, disjointly, in the
    order the fields are listed: noisy labels, label flipping, free riders,
    scaled updates, sign flips, noise, Sybils (the later kinds came later, so
    a run without them keeps the clients it always drew).
    """

    #: Fraction of clients whose local labels are partly replaced by random labels.
    noisy_clients: float = 0.0
    #: Fraction of labels replaced on each noisy client.
    noise_rate: float = 0.5
    #: Fraction of clients whose labels are all mapped c -> (classes - 1 - c).
    flipped_clients: float = 0.0
    #: Fraction of clients that do not train and send a zero or random update.
    free_riders: float = 0.0
    #: What a free rider sends: ``zero`` (nothing changes), ``random`` (Gaussian noise), or ``disguised`` (the
    #: last global step plus noise, Fraboni et al. 2021: :func:`fedchain.data.faults.disguised_free_ride`).
    free_rider_mode: Literal["zero", "random", "disguised"] = "zero"
    #: A disguised free rider's noise, in root-mean-squares of the global step it resends.
    disguise_noise: float = 0.5
    #: The first round in which free riders free-ride; before it they train honestly (building a reputation).
    free_ride_from: int = 1
    #: Fraction of clients whose update is multiplied by ``scale`` before it is sent.
    scaled_clients: float = 0.0
    #: Factor applied to a scaled client's update.
    scale: float = 10.0
    #: Fraction of clients that send minus their honest update (sign flip).
    sign_flipped_clients: float = 0.0
    #: Fraction of clients that send Gaussian noise of their honest update's norm.
    noise_clients: float = 0.0
    #: Fraction of clients that collude as Sybils: all send one identical update,
    #: ``-sybil_scale`` times the mean of their honest updates (:func:`fedchain.data.sybil_update`).
    sybil_clients: float = 0.0
    #: Factor of the Sybils' shared update (1: the norm of an honest update at most).
    sybil_scale: float = 1.0

    #: The fields that are fractions of all clients, in the order faulty clients are drawn.
    client_fractions: ClassVar[tuple[str, ...]] = (
        "noisy_clients",
        "flipped_clients",
        "free_riders",
        "scaled_clients",
        "sign_flipped_clients",
        "noise_clients",
        "sybil_clients",
    )

    def __post_init__(self) -> None:
        for name in (*self.client_fractions, "noise_rate"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"faults.{name}={value} must lie in [0, 1]")
        if not (self.disguise_noise >= 0 and math.isfinite(self.disguise_noise)):
            raise ValueError(f"faults.disguise_noise={self.disguise_noise} must be a finite number >= 0")
        if self.free_ride_from < 1:
            raise ValueError(f"faults.free_ride_from={self.free_ride_from} must be a round, 1 or later")
        if not (self.sybil_scale > 0 and math.isfinite(self.sybil_scale)):
            raise ValueError(f"faults.sybil_scale={self.sybil_scale} must be a positive finite number")
        total = sum(getattr(self, name) for name in self.client_fractions)
        if total > 1.0 + 1e-9:
            raise ValueError(f"the fault fractions add up to {total:g}; at most 1 (every client has at most one fault)")


@dataclass(frozen=True)
class PruningConfig:
    """Dynamic-topology pruning (the pruning seed), an option of any strategy.

    The schedule runs over the experiment's rounds and its regrowth is seeded
    by the experiment's seed; see :class:`fedchain.fl.Pruning`.
    """

    #: Target sparsity alpha of the model sent to clients, in [0, 1); 0 trains the dense model.
    sparsity: float = 0.0
    #: lambda^0: how far beyond alpha the first round prunes before regrowing.
    initial_adjustment: float = Pruning.initial_adjustment

    def __post_init__(self) -> None:
        self.to_pruning(total_rounds=1, seed=0)  # raises ConfigError for values Pruning refuses

    @property
    def enabled(self) -> bool:
        """Whether the model is pruned at all."""
        return self.sparsity > 0.0

    def to_pruning(self, *, total_rounds: int, seed: int) -> Pruning:
        """The strategy option for an experiment of ``total_rounds`` rounds."""
        return Pruning(
            sparsity=self.sparsity, initial_adjustment=self.initial_adjustment, total_rounds=total_rounds, seed=seed
        )


@dataclass(frozen=True)
class ExperimentConfig:
    """Everything that defines one federated experiment run in a single process."""

    #: Dataset name (``mnist``, ``fashion-mnist``, ``cifar10``).
    dataset: str = "mnist"
    #: Folder holding the dataset files; ``None`` reads ``FEDCHAIN_DATA_ROOT``.
    data_root: Path | None = None
    #: Model name (``lenet5``, ``cnn``, ``resnet18``).
    model: str = "lenet5"
    #: Partition of the training data over clients: ``iid``, ``pow``, ``cla`` or ``dir``.
    partition: PartitionKind = "iid"
    #: Dirichlet concentration of the ``dir`` partition (smaller is more skewed).
    alpha: float = 0.5
    #: Classes held by each client under ``cla``; ``None``: class imbalance, client j
    #: of n holds ``floor(1 + j (C - 1) / (n - 1))`` classes, from 1 to all C (FedAVE's CLA).
    classes_per_client: int | None = 2
    #: Exponent of the ``pow`` partition's power-law client sizes.
    power: float = 1.0
    #: Number of clients (all take part in every round).
    clients: int = 10
    #: Number of communication rounds (an upper bound when ``target_accuracy`` is set).
    rounds: int = 10
    #: Test accuracy (in (0, 1]) whose first round is reported as ``rounds_to_target``.
    target_accuracy: float | None = None
    #: Stop as soon as ``target_accuracy`` is reached.
    stop_at_target: bool = True
    #: Local epochs per round. The local-training defaults are the trainer's (:class:`TrainConfig`,
    #: which says what they reach on MNIST), so that simulate and a task learn alike.
    local_epochs: int = TrainConfig.local_epochs
    #: Local mini-batch size.
    batch_size: int = TrainConfig.batch_size
    #: Local SGD learning rate.
    lr: float = TrainConfig.lr
    #: Local SGD momentum (0: plain SGD).
    momentum: float = TrainConfig.momentum
    #: The largest L2 norm of a local step's gradient (None: no clip, the papers' plain SGD).
    max_grad_norm: float | None = TrainConfig.max_grad_norm
    #: Aggregation and contribution strategy (``fedavg``, ``quality``, ``cgsv``, ``fedfaim``, ``fedave``).
    strategy: str = "fedavg"
    #: Options of the strategy, passed to its constructor by name.
    strategy_options: Mapping[str, Any] = field(default_factory=dict)
    #: Dynamic-topology pruning (off by default: sparsity 0).
    pruning: PruningConfig = field(default_factory=PruningConfig)
    #: Clients keep their own models and train from them, receiving rewards in kind
    #: (``None``: yes for fedfaim and fedave, no for the others).
    own_models: bool | None = None
    #: Misbehaving clients.
    faults: FaultConfig = field(default_factory=FaultConfig)
    #: The screening rules run before the strategy sees a round's updates, as a task spec's
    #: (``enabled: false`` measures a strategy undefended).
    screening: ScreeningConfig = field(default_factory=ScreeningConfig)
    #: How the strategy combines the updates it accepted, as a task spec's: the weighted mean or a
    #: robust rule (:mod:`fedchain.fl.aggregation`).
    aggregation: AggregationConfig = MEAN
    #: The least quality of an accepted update, as a task spec's ``quality_floor``
    #: (:func:`fedchain.fl.quality.floored`); 0 is the seed's measure as it is.
    quality_floor: float = DEFAULT_QUALITY_FLOOR
    #: Raise the floor of the early rounds, as a task spec's ``early_floor`` (:func:`fedchain.fl.floor.round_floor`),
    #: for the default terms' q_min and r_a_min (the mechanism ``reproduce robustness`` pays with).
    early_floor: bool = True
    #: The most a small client's contribution quality grows, as a task spec's ``data_credit``
    #: (:func:`fedchain.fl.quality.data_credited`); 1 is the contribution as it is.
    data_credit: float = DEFAULT_DATA_CREDIT
    #: Poor rounds per client scored at q_min, each after a round that reached it, as a task spec's
    #: ``quality_grace`` (:func:`fedchain.fl.quality.graced`, with the default terms' q_min); 0 is the seed's rule.
    quality_grace: int = DEFAULT_QUALITY_GRACE
    #: With a grace, grace the first round too for a model that beats chance, as a task spec's ``grace_first_round``.
    grace_first_round: bool = True
    #: In that first round, grace a model that lowered the initial model's validation loss too, as a task spec's
    #: ``grace_first_round_loss``.
    grace_first_round_loss: bool = True
    #: In that first round, grace a model that screening's chance test judged and kept too, as a task spec's
    #: ``grace_first_round_screened``.
    grace_first_round_screened: bool = True
    #: Do not count a first round's grace against ``quality_grace``, as a task spec's ``grace_first_round_extra``.
    grace_first_round_extra: bool = True
    #: Grace a second poor round in a row after a grace that a good round came before, as a task spec's
    #: ``grace_two_in_a_row``.
    grace_two_in_a_row: bool = True
    #: Privacy budget of the local noise added to client data; ``None`` adds none.
    epsilon: float | None = None
    #: Training samples held out of every client as the aggregator's validation set.
    validation_samples: int = 1000
    #: Cap on the training samples kept (before partitioning); ``None`` keeps them all.
    train_samples: int | None = None
    #: Cap on the test samples used for accuracy; ``None`` uses the whole test split.
    test_samples: int | None = None
    #: Train every client alone too (standalone accuracy); needed for the fairness figures.
    standalone: bool = False
    #: Train every client alone this many times, with different training seeds and
    #: initial models: the standalone accuracy is then the mean of the runs, and the
    #: runs' agreement (Pearson between them) says how far the reference itself is
    #: reproducible, which bounds every fairness Pearson measured against it.
    #: More than 1 trains the standalone models even without ``standalone``.
    standalone_repeats: int = 1
    #: Also test every client's rewarded model every this many rounds (reward-in-kind
    #: strategies), for the fairness figures per round; 0: after the last round only.
    #: Costs one pass over the test set per client each time.
    fairness_every: int = 0
    #: Seed of everything random in the run: partition, faults, initial model, batches.
    seed: int = 0
    #: Training engine (``auto`` picks the fastest correct one for the device).
    engine: Engine = "auto"
    #: Torch device (``auto``: CUDA when present, else CPU).
    device: str = "auto"
    #: Torch threads of the main process (evaluation, sequential engine); ``None`` keeps
    #: torch's default. On a CPU shared with other jobs, 1 avoids oversubscription.
    threads: int | None = None
    #: Folder for metrics, plots and the checkpoint; ``simulate`` puts a run left at this
    #: default into a folder below it named by its settings.
    output_dir: Path = DEFAULT_OUTPUT_DIR
    #: Write the PNG plots (matplotlib) beside the metrics.
    plots: bool = True
    #: Save the run's state (models, strategy state, rounds so far) to the output folder
    #: every this many rounds, so that a stopped run goes on from there; 0: never.
    checkpoint_every: int = 1

    def __post_init__(self) -> None:
        positive = ("clients", "rounds", "local_epochs", "batch_size", "classes_per_client", "standalone_repeats")
        for name in positive:
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)} must be at least 1")
        for name in ("lr", "alpha", "power"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name}={getattr(self, name)} must be positive")
        if not 0.0 <= self.momentum < 1.0:
            raise ValueError(f"momentum={self.momentum} must lie in [0, 1)")
        if self.validation_samples < 1:
            raise ValueError(f"validation_samples={self.validation_samples} must be at least 1")
        check_floor(self.quality_floor)  # the task spec's checks, so that both refuse the same settings
        check_data_credit(self.data_credit)
        check_grace(self.quality_grace)
        check_switch("grace_first_round", self.grace_first_round)
        check_switch("grace_first_round_loss", self.grace_first_round_loss)
        check_switch("grace_first_round_screened", self.grace_first_round_screened)
        check_switch("grace_first_round_extra", self.grace_first_round_extra)
        check_switch("grace_two_in_a_row", self.grace_two_in_a_row)
        check_max_grad_norm(self.max_grad_norm)
        for name in ("train_samples", "test_samples", "threads"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name}={value} must be at least 1 (or unset for all)")
        if self.checkpoint_every < 0:
            raise ValueError(f"checkpoint_every={self.checkpoint_every} must be 0 (never) or a number of rounds")
        if self.fairness_every < 0:
            raise ValueError(f"fairness_every={self.fairness_every} must be 0 (last round only) or a number of rounds")
        if self.target_accuracy is not None and not 0.0 < self.target_accuracy <= 1.0:
            raise ValueError(f"target_accuracy={self.target_accuracy} must lie in (0, 1]")
        if not isinstance(self.strategy_options, Mapping):
            raise ValueError(
                f"strategy_options must be a mapping of option names to values, got {self.strategy_options!r}"
            )
        if self.epsilon is not None and not self.epsilon > 0:
            raise ValueError(f"epsilon={self.epsilon} must be positive (or unset for no local noise)")
        resolve_device(self.device)  # a device this machine lacks is refused before any data is loaded

    @property
    def trains_standalone(self) -> bool:
        """Whether the run trains every client alone (``standalone``, or more than one repeat asked for)."""
        return self.standalone or self.standalone_repeats > 1

    def with_changes(self, **changes: Any) -> ExperimentConfig:
        """A copy with ``changes`` applied (validated like the original)."""
        try:
            return dataclasses.replace(self, **changes)
        except (TypeError, ValueError) as err:
            raise ConfigError(f"invalid experiment change {changes}: {err}") from err

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready mapping of every setting (paths as strings), and under ``strategy_defaults`` today's values
        of the strategy options left to a default that has changed (:func:`fedchain.taskspec.changed_defaults`):
        a run kept on disk without them, or with others, was made by other code and is not taken for this one."""
        data = _jsonable(dataclasses.asdict(self))
        stated = changed_defaults(self.strategy, self.strategy_options)
        if stated:
            data[STRATEGY_DEFAULTS] = stated
        return data


#: The key of :meth:`ExperimentConfig.to_dict` that states the strategy's changed defaults.
STRATEGY_DEFAULTS = "strategy_defaults"

#: Settings that change how a run is computed but not what it measures: a run kept
#: on disk (finished, or a checkpoint) serves a configuration that differs only in these.
HOW_NOT_WHAT = ("data_root", "engine", "device", "threads", "output_dir", "plots", "checkpoint_every")


def settings_digest(config: ExperimentConfig, also: Mapping[str, Any] | None = None) -> str:
    """8 hex digits naming ``config``'s settings, but for how it runs (:data:`HOW_NOT_WHAT`), and ``also`` (JSON
    values: what else decides the runs, such as a series' strategy defaults) when given.

    Default folders carry it, so that the same command finds its earlier run
    and goes on from it, and other settings get a folder of their own.
    """
    named = _what(config.to_dict())
    if also:
        named = {**named, "also": also}
    return hashlib.sha256(json.dumps(named, sort_keys=True).encode()).hexdigest()[:8]


def check_same_settings(kept: Mapping[str, Any], config: ExperimentConfig, where: Path, *, hint: str) -> None:
    """Refuse, naming them, the settings in which ``kept`` (a :meth:`ExperimentConfig.to_dict`)
    differs from ``config``, but for those in :data:`HOW_NOT_WHAT`; ``where`` holds the kept run."""
    kept, wanted = _what(kept), _what(config.to_dict())
    differ = sorted(key for key in wanted.keys() | kept.keys() if kept.get(key) != wanted.get(key))
    if differ:
        changes = ", ".join(f"{key} {kept.get(key)!r} there, {wanted.get(key)!r} now" for key in differ)
        raise ConfigError(f"{where} holds a run of other settings ({changes})", hint=hint)


def _what(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` (an :meth:`ExperimentConfig.to_dict`) without those in :data:`HOW_NOT_WHAT`."""
    return {key: value for key, value in settings.items() if key not in HOW_NOT_WHAT}


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def _nest(flat: Mapping[str, Any]) -> dict[str, Any]:
    """Turn dotted keys (``faults.noise_rate``) into nested mappings; ``None`` values are dropped."""
    nested: dict[str, Any] = {}
    for key, value in flat.items():
        if value is None:
            continue
        *parents, leaf = key.split(".")
        node = nested
        for parent in parents:
            node = node.setdefault(parent, {})
        node[leaf] = value
    return nested


def merge_settings(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` updated by ``overrides``, recursing into mappings present in both."""
    merged = dict(base)
    for key, value in overrides.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = merge_settings(merged[key], value)
        else:
            merged[key] = value
    return merged


def load_experiment(
    path: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    *,
    defaults: Mapping[str, Any] | None = None,
) -> ExperimentConfig:
    """Read an :class:`ExperimentConfig`: ``defaults``, then the YAML file at ``path``, then ``overrides``.

    ``overrides`` maps setting names to values; dotted names reach into
    sections (``{"faults.noisy_clients": 0.3}``) and ``None`` values are
    ignored, so unset flags keep the file's values. ``defaults`` (a command's
    own starting point, e.g. a paper's setting) are taken as they are.
    """
    data = merge_settings(defaults or {}, load_yaml(path) if path is not None else {})
    data.pop(STRATEGY_DEFAULTS, None)  # a kept run's config read back: today's defaults are stated again
    return from_mapping(ExperimentConfig, merge_settings(data, _nest(overrides or {})))
