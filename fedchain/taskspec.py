"""The task spec: what every agent of one task must agree on, stored in the blob store.

A task's on-chain parameters (``ITaskRegistry.TaskParams``) hold money, time and
thresholds. Everything else the processes of a task share (the dataset, the
model architecture, local-training hyper-parameters, the aggregation strategy,
the client's privacy budget and the publisher's validation set) is a
:class:`TaskSpec`, written to the blob store as canonical JSON bytes:

* the task's on-chain ``datasetId`` is ``keccak256(spec.to_bytes())``, the
  store key of the spec (:func:`put_spec` returns it, :func:`load_spec` reads it);
* the task's on-chain ``modelId`` is the keccak256 of the initial global
  model's safetensors bytes (:func:`put_initial_model`, :func:`load_model`);
* the global model after round ``n`` is the store object named by
  ``RoundPosted(n).modelHash`` (:func:`model_meta` is its metadata);
* a fog node's update for client ``i`` in round ``n`` is the parameters' delta
  (trained minus the global model it started from), written with
  :func:`fedchain.updates.store_update` and :func:`update_meta` (job id = client index);
  when the spec's strategy needs local losses (fedave), the payload also carries
  the per-sample losses of the trained model on the job's data
  (:meth:`TaskSpec.local_loss_count`; read back with :func:`load_update`).

So any agent that knows a task id reads the task's params on chain, then the
spec and the current global model from the store, and verifies both by hash.

>>> spec = TaskSpec(dataset="mnist", model="cnn")
>>> TaskSpec.from_bytes(spec.to_bytes()) == spec
True
"""

from __future__ import annotations

import dataclasses
import json
import math
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

from fedchain.errors import ConfigError, TaskSpecError
from fedchain.fl.aggregation import MEAN, AggregationConfig
from fedchain.fl.floor import (
    DEFAULT_DATA_CREDIT,
    DEFAULT_QUALITY_FLOOR,
    DEFAULT_QUALITY_GRACE,
    check_data_credit,
    check_floor,
    check_grace,
    check_switch,
    round_floor,
)
from fedchain.fl.screening import ADDED_LATER, ScreeningConfig
from fedchain.store.blobs import BlobStore
from fedchain.store.digest import keccak256, to_hex
from fedchain.trainer.config import TrainConfig

# torch and what needs it are imported where they are used: the task commands build their
# flags from TaskSpec, and their --help (and `fedchain withdraw`) should not wait for torch.
if TYPE_CHECKING:
    import torch

    from fedchain.data.datasets import ImageDataset
    from fedchain.fl.params import Params, ParamSpec
    from fedchain.fl.quality import GraceRule
    from fedchain.fl.strategy import Strategy
    from fedchain.models.registry import ModelSpec
    from fedchain.updates import DecodedUpdate, UpdateMeta

#: Strategies whose rounds give every client its own rewarded model.
REWARD_IN_KIND = frozenset({"fedfaim", "fedave", "fair"})

#: Which model a client's next round is trained from: the global model, or its own last reward.
TrainFrom = Literal["global", "reward"]
TRAIN_FROM: tuple[TrainFrom, ...] = ("global", "reward")


def gives_rewards(strategy: str) -> bool:
    """Whether the strategy named ``strategy`` rewards in kind."""
    return strategy in REWARD_IN_KIND


#: Version tag written into every spec; a reader rejects any other.
FORMAT = "fedchain-taskspec/1"

#: The initial model exists before its task has an id; its metadata names task 0 (ids start at 1).
INITIAL_MODEL_TASK_ID = 0

#: Slack over ``4 * numel`` bytes for a payload's safetensors header (names, shapes, metadata).
PAYLOAD_HEADER_SLACK_BYTES = 64 * 1024

#: Local privacy mechanisms a client may apply: :data:`fedchain.data.privacy.Mechanism`, spelled
#: again here because importing fedchain.data loads torch; a test keeps the two equal.
PrivacyMechanism = Literal["laplace", "gaussian"]

#: Which split of the dataset the publisher's validation samples come from.
ValidationSplit = Literal["test", "train"]


@dataclass(frozen=True)
class ValidationSpec:
    """The publisher's held-out validation set: ``size`` samples of a split, chosen by a seeded permutation.

    Attributes:
        split: the dataset split the samples come from (``test``: never seen by any client).
        size: number of samples (1 or more; capped by the split's size when loaded).
        seed: seed of the permutation that picks them.
    """

    split: ValidationSplit = "test"
    size: int = 1000
    seed: int = 0

    def __post_init__(self) -> None:
        if self.split not in ("test", "train"):
            raise ConfigError(f"validation.split must be 'test' or 'train', got {self.split!r}")
        if self.size < 1:
            raise ConfigError(f"validation.size must be at least 1, got {self.size}")

    def indices(self, n_samples: int) -> torch.Tensor:
        """The chosen sample indices ``[min(size, n_samples)]`` int64, in permutation order."""
        import torch

        generator = torch.Generator().manual_seed(self.seed)
        return torch.randperm(n_samples, generator=generator)[: min(self.size, n_samples)]


#: Steps between two checkpoints of a fog node's training transcript: short enough that honest runs on other
#: engines, thread counts and devices cannot drift apart within one segment as far as a cheat lands, at the price
#: of one stored checkpoint (a model's size) per segment (the measurements: docs/accountability.md, "Segment drift").
DEFAULT_TRANSCRIPT_EVERY = 5


def check_transcript_every(every: object) -> None:
    """A ConfigError unless ``every`` is None or a whole number of steps, at least 1."""
    if every is None:
        return
    if isinstance(every, bool) or not isinstance(every, int) or every < 1:
        raise ConfigError(
            f"transcript_every must be a whole number of steps (at least 1) or null, got {every!r}",
            hint=f"{DEFAULT_TRANSCRIPT_EVERY} is the default; null makes the whole job one segment",
        )


#: Top-level fields a spec gained after specs were first stored, with the value a spec without them means
#: (the aggregation rule: the plain mean; the start of training: the global model; no quality floor, the
#: seed's measure, and no data credit, until 2026-11-26; no grace until 2026-11-27). At that value a field stays
#: out of the spec's bytes, so an older spec read and written again keeps its datasetId; a spec without the field
#: reads as that value.
_FIELDS_ADDED_LATER: dict[str, object] = {
    "aggregation": MEAN,
    "train_from": "global",
    "quality_floor": 0.0,
    "early_floor": False,
    "data_credit": 1.0,
    "quality_grace": 0,
    "grace_first_round": False,
    "grace_first_round_loss": False,
    "grace_first_round_screened": False,
    "grace_first_round_extra": False,
    "grace_two_in_a_row": False,
    "max_grad_norm": None,
    "transcript_every": None,
}

#: Strategy options whose default changed after specs were first stored, with the value a spec without the
#: option meant: fedfaim's quality check was the seed's plain comparison (significance 0, a fixed threshold)
#: until 2026-11-25, rejected a client that failed it until 2026-11-26, and took its standard errors below
#: the robust bound too (``tolerances_add``) until 2026-11-28; cgsv and fedave scaled every
#: update to the seeds' fixed lengths (1.0, 0.5) until 2026-11-26; fedave's and fair's contribution was the
#: reputation and the ranking signal until 2026-11-27, and the divergence discount that replaced them was the
#: square root (0.5) at first; cgsv's contribution was the seed's cosine alone until 2026-11-28.
#: A spec built today states today's default in its bytes; an older spec read back keeps its meaning and bytes.
_OPTIONS_CHANGED_LATER: dict[str, dict[str, Any]] = {
    "fedfaim": {"significance": 0.0, "outlier_spread": None, "reject_failed": True, "tolerances_add": True},
    "cgsv": {"tau": 1.0, "contribution_measure": "cosine"},
    "fedave": {"tau": 0.5, "contribution_measure": "reputation", "divergence_exponent": 0.5},
    "fair": {"contribution_measure": "signal", "divergence_exponent": 0.5},
}


def changed_defaults(strategy: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """Today's values of ``strategy``'s options whose default changed after runs and specs were first kept
    (:data:`_OPTIONS_CHANGED_LATER`) and that ``options`` leaves to the default; empty for a strategy without such
    options (or an unknown name). Stated beside the options, they tell a run or spec made with other defaults from
    one made today."""
    changed = [name for name in _OPTIONS_CHANGED_LATER.get(strategy, {}) if name not in options]
    if not changed:
        return {}
    from fedchain.fl.registry import get_strategy

    defaults = get_strategy(strategy)
    return {name: json.loads(json.dumps(getattr(defaults, name))) for name in changed}


def todays_defaults() -> dict[str, dict[str, Any]]:
    """:func:`changed_defaults` of every strategy that has them, left to the defaults: what this code runs when a
    series names no option (a series' default folder is named by them too)."""
    return {strategy: changed_defaults(strategy, {}) for strategy in sorted(_OPTIONS_CHANGED_LATER)}


@dataclass(frozen=True)
class TaskSpec:
    """Everything the agents of one task share off chain (see the module docstring).

    Attributes:
        dataset: dataset name (``mnist``, ``fashion-mnist``, ``cifar10``).
        model: model name (``lenet5``, ``cnn``, ``resnet18``).
        num_classes: number of classes of the classifier.
        in_channels: image channels (1 for MNIST-like data, 3 for CIFAR-10).
        lr: local SGD learning rate.
        momentum: local SGD momentum.
        batch_size: local mini-batch size, samples.
        local_epochs: local passes over a client's data per round.
        max_grad_norm: the largest L2 norm of a local step's gradient (:class:`~fedchain.trainer.TrainConfig`,
            which says why); None is plain SGD (and what a spec stored before the setting means).
        seed: the task's seed: the initial model's weights and each round's training seed derive from it.
        strategy: aggregation strategy: ``fedavg``, ``quality``, ``cgsv``, ``fedfaim``, ``fedave`` or ``fair`` (``fedchain.fl.get_strategy``).
        strategy_options: the strategy's options (its dataclass fields), JSON values.
        privacy_epsilon: per-pixel local privacy budget a client applies before handing its data over; None: none.
        privacy_mechanism: ``laplace`` or ``gaussian`` (with ``privacy_delta``).
        privacy_delta: delta of the Gaussian mechanism.
        validation: the publisher's validation set.
        screening: the rules that drop a round's attacks before the strategy sees them
            (:mod:`fedchain.fl.screening`); in the spec so that the auditor re-runs the aggregator's.
        train_from: the model a fog node trains a client's next round from: ``global`` (the global model,
            the fair protocol's choice) or ``reward`` (the client's last committed reward in kind, as in the
            fedfaim and fedave seeds; only for a strategy that rewards in kind).
        aggregation: how the strategy combines the updates it accepted: the weighted mean (the default,
            left out of the spec's bytes so that a spec written before the setting keeps its datasetId)
            or a robust rule (:mod:`fedchain.fl.aggregation`).
        quality_floor: the least quality q_i of an accepted update (:func:`fedchain.fl.quality.floored`):
            from round 3 on, one poor round of an honest client on skewed data then cannot remove it by itself.
            0 is the seed's measure as it is (and what a spec stored before the setting means).
        early_floor: raise the floor of each round to the least quality that keeps a client whose earlier
            rounds were all at q_min or better (:func:`fedchain.fl.floor.round_floor`, from the task's q_min and
            r_a_min): in rounds 1 and 2 a floor of 0.2 would still remove it. False (what a spec stored before
            the setting means) keeps ``quality_floor`` in every round; with ``quality_floor`` 0 nothing is raised.
        data_credit: for a contribution strategy (cgsv, fedfaim, fedave, fair), the most an accepted client's
            quality is multiplied by when it holds less data than the round's mean (by mean / its data:
            :func:`fedchain.fl.quality.data_credited`), so that a small honest client is judged per sample.
            1 is the contribution as it is (and what a spec stored before the setting means).
        quality_grace: poor rounds per client scored at q_min instead of below it (a first round's grace apart,
            with ``grace_first_round_extra``), each only after a round that reached q_min
            (:func:`fedchain.fl.quality.graced`): an honest client's odd poor round on skewed data costs it neither
            reputation nor pay, a client poor round after round is scored as before. 0 (what a spec stored before
            the setting means) is the seed's rule.
        grace_first_round: with a grace, the task's first round may be graced too, for a model whose accuracy
            beats chance (``1 / num_classes``) by the grace's share of the median's margin over it. False (what a
            spec stored before the setting means) graces no first round.
        grace_first_round_loss: with ``grace_first_round``, a first-round model whose validation loss is below the
            initial model's is graced too (:attr:`fedchain.fl.quality.GraceRule.by_loss`): a client with little data
            trains a few steps in round 1 and its model may still sit at chance. False (what a spec stored before
            the setting means) asks for the accuracy alone.
        grace_first_round_screened: with ``grace_first_round``, a first-round model that screening's chance test
            (``screening.min_chance_share``) judged and kept is graced too
            (:attr:`fedchain.fl.quality.GraceRule.by_screen`): the test rejects a model below half of chance, as a
            label flipper's is, while an honest client of one or two classes may sit at chance with its loss risen.
            Nothing changes where the test is off or its limit is lowered for a small validation set (on 10 balanced
            classes, under 576 samples). False (what a spec stored before the setting means) asks for the accuracy or
            the loss.
        grace_first_round_extra: with ``grace_first_round``, a first round's grace does not count against
            ``quality_grace`` (:attr:`fedchain.fl.quality.GraceRule.first_extra`): it forgives a young model, and the
            small and skewed clients it graces are the ones that later need their graces for odd poor rounds. False
            (what a spec stored before the setting means) counts it.
        grace_two_in_a_row: a client graced after a round that reached q_min may be graced in the next round too
            (:attr:`fedchain.fl.quality.GraceRule.two_in_a_row`), within ``quality_grace``: an honest client on
            skewed data is sometimes poor in two rounds in a row after good ones (docs/robustness.md, "Two poor
            rounds in a row"); never a third, and never after a first round's grace, so a client poor from the
            start (a label flipper) is scored as before. False (what a spec stored before the setting means)
            graces no round that follows a poor one.
        transcript_every: a fog node keeps its job's training state every this many steps, and commits the
            Merkle root over those checkpoints with its update (:mod:`fedchain.transcripts`); a fog challenge
            re-executes one such segment. None (what a spec stored before the setting means) makes the whole job
            one segment.
    """

    dataset: str = "mnist"
    model: str = "cnn"
    num_classes: int = 10
    in_channels: int = 1
    lr: float = TrainConfig.lr  # the trainer's defaults, which learn on MNIST-sized data (TrainConfig says how well)
    momentum: float = TrainConfig.momentum
    batch_size: int = TrainConfig.batch_size
    local_epochs: int = TrainConfig.local_epochs
    max_grad_norm: float | None = TrainConfig.max_grad_norm
    seed: int = 0
    strategy: str = "fedavg"
    strategy_options: Mapping[str, Any] = field(default_factory=dict)
    privacy_epsilon: float | None = None
    privacy_mechanism: PrivacyMechanism = "laplace"
    privacy_delta: float = 1e-5
    validation: ValidationSpec = field(default_factory=ValidationSpec)
    screening: ScreeningConfig = field(default_factory=ScreeningConfig)
    train_from: TrainFrom = "global"
    aggregation: AggregationConfig = MEAN
    quality_floor: float = DEFAULT_QUALITY_FLOOR
    early_floor: bool = True
    data_credit: float = DEFAULT_DATA_CREDIT
    quality_grace: int = DEFAULT_QUALITY_GRACE
    grace_first_round: bool = True
    grace_first_round_loss: bool = True
    grace_first_round_screened: bool = True
    grace_first_round_extra: bool = True
    grace_two_in_a_row: bool = True
    transcript_every: int | None = DEFAULT_TRANSCRIPT_EVERY

    def __post_init__(self) -> None:
        # Canonical names, so that equal tasks give equal bytes and the same datasetId.
        from fedchain.data.datasets import dataset_info
        from fedchain.models.registry import ModelSpec

        object.__setattr__(self, "dataset", dataset_info(self.dataset).name)
        object.__setattr__(self, "model", ModelSpec(self.model, self.num_classes, self.in_channels).name)
        if isinstance(self.validation, Mapping):  # TaskSpec(validation={"size": 500}) from Python
            object.__setattr__(self, "validation", ValidationSpec(**self.validation))
        if isinstance(self.screening, Mapping):  # TaskSpec(screening={"min_cosine": 0.0}) from Python
            object.__setattr__(self, "screening", ScreeningConfig(**self.screening))
        if isinstance(self.aggregation, Mapping):  # TaskSpec(aggregation={"rule": "median"}) from Python
            object.__setattr__(self, "aggregation", AggregationConfig(**self.aggregation))
        options = json.loads(json.dumps(dict(self.strategy_options), sort_keys=True))  # JSON values only
        options.update(changed_defaults(self.strategy, options))  # stated: the bytes tell them from the old ones
        object.__setattr__(self, "strategy_options", MappingProxyType(options))
        self.strategy_instance()  # an unknown strategy or option fails here, before a task escrows its budget
        self.train_config(0)  # validates lr, momentum, batch_size, local_epochs, max_grad_norm
        if self.privacy_epsilon is not None and not (self.privacy_epsilon > 0 and math.isfinite(self.privacy_epsilon)):
            raise ConfigError(f"privacy_epsilon must be a positive number or None, got {self.privacy_epsilon}")
        if self.privacy_mechanism not in typing.get_args(PrivacyMechanism):
            raise ConfigError(
                f"privacy_mechanism must be one of {typing.get_args(PrivacyMechanism)}, got {self.privacy_mechanism!r}",
                hint="set privacy_mechanism to laplace or gaussian (with privacy_delta)",
            )
        if not 0 < self.privacy_delta < 1:
            raise ConfigError(f"privacy_delta must be in (0, 1), got {self.privacy_delta}")
        if self.seed < 0:
            raise ConfigError(f"seed must be non-negative, got {self.seed}")
        self._check_train_from()
        check_floor(self.quality_floor)
        check_switch("early_floor", self.early_floor)
        check_data_credit(self.data_credit)
        check_grace(self.quality_grace)
        check_switch("grace_first_round", self.grace_first_round)
        check_switch("grace_first_round_loss", self.grace_first_round_loss)
        check_switch("grace_first_round_screened", self.grace_first_round_screened)
        check_switch("grace_first_round_extra", self.grace_first_round_extra)
        check_switch("grace_two_in_a_row", self.grace_two_in_a_row)
        check_transcript_every(self.transcript_every)

    def _check_train_from(self) -> None:
        if self.train_from not in TRAIN_FROM:
            raise ConfigError(f"train_from must be 'global' or 'reward', got {self.train_from!r}")
        if self.train_from == "reward" and not gives_rewards(self.strategy):
            raise ConfigError(
                f"train_from 'reward' needs a strategy that rewards in kind; {self.strategy!r} gives clients no models",
                hint=f"use one of {', '.join(sorted(REWARD_IN_KIND))}, or train_from 'global'",
            )
        if self.train_from == "reward" and self.strategy == "fair":
            raise ConfigError(
                "train_from 'reward' contradicts strategy 'fair': the fair protocol trains every client from the "
                "global model and calibrates the rewards apart from training",
                hint="train_from 'global' with fair, or fedave/fedfaim for the seeds' train-from-your-reward protocol",
            )
        if self.train_from == "reward" and self.strategy_instance().pruning is not None:
            raise ConfigError(
                "train_from 'reward' cannot be combined with pruning: the pruned broadcast is the global model's",
                hint="leave the strategy's pruning unset, or train_from 'global'",
            )

    # -- serialisation -------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The spec as plain JSON values (with the format tag)."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        meant = _OPTIONS_CHANGED_LATER.get(self.strategy, {})
        data["strategy_options"] = {k: v for k, v in self.strategy_options.items() if k not in meant or v != meant[k]}
        data["validation"] = dataclasses.asdict(self.validation)
        # Settings added later, at the value an older spec without them means, stay out: its bytes, and datasetId, stay.
        screening = dataclasses.asdict(self.screening)
        data["screening"] = {k: v for k, v in screening.items() if k not in ADDED_LATER or v != ADDED_LATER[k]}
        for name, before in _FIELDS_ADDED_LATER.items():
            if data[name] == before:
                del data[name]
        if "aggregation" in data:
            data["aggregation"] = dataclasses.asdict(self.aggregation)
        return {"format": FORMAT, **data}

    def to_bytes(self) -> bytes:
        """Canonical JSON (sorted keys, no spaces, UTF-8): the bytes whose keccak256 is the task's datasetId."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"), allow_nan=False).encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes) -> TaskSpec:
        """Parse :meth:`to_bytes`'s output; anything else raises :class:`~fedchain.errors.TaskSpecError`."""
        from fedchain.config import from_mapping

        try:
            fields = json.loads(bytes(data).decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as err:
            raise TaskSpecError(f"the task spec is not UTF-8 JSON: {err}") from err
        if not isinstance(fields, dict) or fields.pop("format", None) != FORMAT:
            raise TaskSpecError(f"the task spec is not in the {FORMAT} format")
        if isinstance(fields.get("screening"), dict):  # a setting it lacks is one its aggregator did not have
            fields["screening"] = {**ADDED_LATER, **fields["screening"]}
        for name, before in _FIELDS_ADDED_LATER.items():  # a field it lacks had the meaning of its day
            if name not in fields and (before is None or isinstance(before, int | float | str)):
                fields[name] = before
        if isinstance(fields.get("strategy_options"), dict):  # an option it lacks had the default of its day
            meant = _OPTIONS_CHANGED_LATER.get(str(fields.get("strategy")), {})
            fields["strategy_options"] = {**meant, **fields["strategy_options"]}
        try:
            return from_mapping(cls, fields)
        except ConfigError as err:
            raise TaskSpecError(f"the task spec is invalid: {err}") from err

    @property
    def dataset_id(self) -> bytes:
        """keccak256 of :meth:`to_bytes`: the task's on-chain ``datasetId`` and the spec's store key."""
        return keccak256(self.to_bytes())

    # -- what agents build from it -------------------------------------------------------------

    def model_spec(self) -> ModelSpec:
        """The model architecture (buildable in worker processes)."""
        from fedchain.models.registry import ModelSpec

        return ModelSpec(self.model, self.num_classes, self.in_channels)

    def floor_at(self, round_number: int, *, min_quality: float, min_loss_reputation: float) -> float:
        """The least quality of an accepted update in round ``round_number`` of a task with these thresholds
        (its terms' q_min and r_a_min, as fractions): :func:`fedchain.fl.floor.round_floor`."""
        return round_floor(
            self.quality_floor,
            round_number,
            early=self.early_floor,
            min_quality=min_quality,
            min_loss_reputation=min_loss_reputation,
        )

    def grace_rule(self, *, min_quality: float) -> GraceRule | None:
        """The grace of a task with q_min ``min_quality`` (a fraction): :func:`fedchain.fl.quality.graced`; None
        when ``quality_grace`` is 0. Its chance is ``1 / num_classes`` when ``grace_first_round``, else None; its
        first round tests the loss too when ``grace_first_round_loss``, and takes screening's chance test's
        verdict when ``grace_first_round_screened``; its first-round grace is not counted against the allowance
        when ``grace_first_round_extra``; it may grace a second poor round in a row when ``grace_two_in_a_row``."""
        from fedchain.fl.quality import grace_rule

        classes = self.num_classes if self.grace_first_round else None
        return grace_rule(
            self.quality_grace,
            min_quality=min_quality,
            classes=classes,
            by_loss=self.grace_first_round_loss,
            by_screen=self.grace_first_round_screened,
            first_extra=self.grace_first_round_extra,
            two_in_a_row=self.grace_two_in_a_row,
        )

    def train_config(self, round_number: int) -> TrainConfig:
        """Local training of round ``round_number`` (1-based); its seed is derived from the task's seed and the round."""
        return TrainConfig(
            lr=self.lr,
            momentum=self.momentum,
            batch_size=self.batch_size,
            local_epochs=self.local_epochs,
            max_grad_norm=self.max_grad_norm,
            seed=self.seed * 1_000_003 + round_number,
        )

    def checkpoint_every(self, steps: int) -> int:
        """Steps between two checkpoints of a job of ``steps`` steps (the whole job without ``transcript_every``)."""
        return self.transcript_every if self.transcript_every is not None else max(1, steps)

    def param_spec(self) -> ParamSpec:
        """Names, shapes and dtypes of the model's parameters (what every update and global model must have)."""
        return self.model_spec().param_spec()

    def max_payload_bytes(self, local_losses: int | None = None) -> int:
        """The size limit of an update (carrying ``local_losses`` losses) or a global model of this task, bytes."""
        import torch

        from fedchain.updates import local_losses_bytes

        spec = self.param_spec()
        widest = max((torch.empty((), dtype=dtype).element_size() for dtype in spec.dtypes), default=4)
        return spec.numel * widest + local_losses_bytes(local_losses) + PAYLOAD_HEADER_SLACK_BYTES

    @property
    def ships_local_losses(self) -> bool:
        """Whether this task's updates carry local losses: when the spec's strategy needs them (fedave).

        The payload format follows the spec's strategy (not an aggregator's override), so every agent agrees on it.
        """
        return self.strategy_instance().needs_local_losses

    def strategy_instance(self) -> Strategy:
        """The spec's strategy with its options and aggregation rule (ConfigError for an unknown name or option)."""
        return self.strategy_named(self.strategy)

    def strategy_named(self, name: str, options: Mapping[str, Any] | None = None) -> Strategy:
        """Strategy ``name`` with the spec's aggregation rule: with ``options``, or the spec's own when it is
        the spec's strategy (an aggregator or auditor may run another; none otherwise)."""
        from fedchain.fl.registry import configured_strategy

        if options is None:
            options = self.strategy_options if name == self.strategy else {}
        return configured_strategy(name, options, self.aggregation)

    def local_loss_count(self, data_size: int) -> int | None:
        """How many local losses an update of a job of ``data_size`` samples carries; None when it carries none."""
        from fedchain.updates import local_loss_count

        return local_loss_count(data_size) if self.ships_local_losses else None

    def initial_params(self) -> Params:
        """The initial global model: the architecture's default initialisation under the task's seed."""
        from fedchain.fl.params import unflatten
        from fedchain.trainer.trainer import initial_params

        return unflatten(initial_params(self.model_spec(), self.seed), self.param_spec())


def load_validation(spec: TaskSpec, data_root: str | None = None) -> ImageDataset:
    """The publisher's validation set of ``spec`` from the data root (``--data-root`` or ``FEDCHAIN_DATA_ROOT``)."""
    from fedchain.data.datasets import load_dataset

    dataset = load_dataset(spec.dataset, train=spec.validation.split == "train", root=data_root)
    return dataset.subset(spec.validation.indices(len(dataset)))


def model_meta(spec: TaskSpec, task_id: int, round_number: int) -> UpdateMeta:
    """Metadata of the global model of ``task_id`` after ``round_number`` (0: the initial model, task id 0)."""
    from fedchain.updates import UpdateMeta

    task = INITIAL_MODEL_TASK_ID if round_number == 0 else task_id
    return UpdateMeta(task_id=task, round=round_number, kind="model", model=spec.model)


def update_meta(spec: TaskSpec, task_id: int, round_number: int, client_index: int, client: str) -> UpdateMeta:
    """Metadata of the update a fog node commits for client ``client_index`` (address ``client``) in a round.

    The job id is the client's index in the task (one training job per client); the aggregator
    rejects an update whose metadata differs (``wrong_metadata``).
    """
    from fedchain.updates import UpdateMeta

    return UpdateMeta(
        task_id=task_id, round=round_number, kind="update", job_id=client_index, client=client, model=spec.model
    )


def load_update(
    store: BlobStore,
    spec: TaskSpec,
    update_hash: bytes | str,
    *,
    task_id: int,
    round_number: int,
    client_index: int,
    client: str,
    data_size: int,
) -> DecodedUpdate:
    """Fetch and check the update committed for client ``client_index`` (address ``client``) in a round.

    What the aggregator and the auditor both decode: the metadata of :func:`update_meta`, the
    model's tensors and, when the spec's strategy needs them, ``spec.local_loss_count(data_size)``
    local losses. Raises an :class:`~fedchain.errors.UpdateRejected` subclass for a malformed update.
    """
    from fedchain.updates import fetch_update

    losses = spec.local_loss_count(data_size)
    return fetch_update(
        store,
        update_hash,
        spec.param_spec(),
        spec.max_payload_bytes(losses),
        expected_meta=update_meta(spec, task_id, round_number, client_index, client),
        expected_local_losses=losses,
    )


def put_spec(store: BlobStore, spec: TaskSpec) -> bytes:
    """Write ``spec`` to ``store``; returns its key, the task's on-chain ``datasetId``."""
    return store.put(spec.to_bytes())


def load_spec(store: BlobStore, dataset_id: bytes | str) -> TaskSpec:
    """Read and parse the spec named by a task's on-chain ``datasetId`` (the store verifies the hash)."""
    data = store.get(dataset_id, max_bytes=PAYLOAD_HEADER_SLACK_BYTES)
    spec = TaskSpec.from_bytes(data)
    if spec.dataset_id != keccak256(data):
        raise TaskSpecError(
            f"the task spec {to_hex(keccak256(data))} is not in canonical form",
            hint="write specs with fedchain.taskspec.put_spec, which stores the canonical bytes",
        )
    return spec


def put_initial_model(store: BlobStore, spec: TaskSpec) -> bytes:
    """Write the initial global model of ``spec`` to ``store``; returns its hash, the task's on-chain ``modelId``."""
    from fedchain.updates import store_update

    return store_update(store, spec.initial_params(), model_meta(spec, INITIAL_MODEL_TASK_ID, 0))


def put_model(store: BlobStore, spec: TaskSpec, task_id: int, round_number: int, params: Params) -> bytes:
    """Write the global model of ``task_id`` after ``round_number`` to ``store``; returns the hash to post on chain."""
    from fedchain.updates import store_update

    return store_update(store, params, model_meta(spec, task_id, round_number))


def load_model(
    store: BlobStore,
    spec: TaskSpec,
    model_hash: bytes | str,
    *,
    task_id: int | None = None,
    round_number: int | None = None,
) -> Params:
    """Fetch and check a global model by its on-chain hash (``modelId`` or ``RoundPosted.modelHash``).

    With ``task_id`` and ``round_number`` the model's metadata must name them
    (round 0 is the initial model). Raises an
    :class:`~fedchain.errors.UpdateRejected` subclass when the object is missing or malformed.
    """
    from fedchain.updates import fetch_update

    expected = None if round_number is None else model_meta(spec, task_id or INITIAL_MODEL_TASK_ID, round_number)
    decoded = fetch_update(store, model_hash, spec.param_spec(), spec.max_payload_bytes(), expected_meta=expected)
    return decoded.params


__all__ = [
    "FORMAT",
    "INITIAL_MODEL_TASK_ID",
    "TaskSpec",
    "ValidationSpec",
    "load_model",
    "load_spec",
    "load_update",
    "load_validation",
    "model_meta",
    "put_initial_model",
    "put_model",
    "put_spec",
    "update_meta",
]
