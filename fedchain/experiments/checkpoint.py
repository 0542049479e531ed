"""A run's state after its last saved round, so that a stopped run goes on from there.

:func:`save_checkpoint` writes :class:`RunCheckpoint` as one safetensors file:
the models and the strategy state's tensors as tensors, everything else (the
settings, the rounds' records, the standalone accuracies) as JSON metadata,
so nothing is pickled. Every round's training seed derives from the run's seed
and the round, so a run resumed with :func:`load_checkpoint` goes on exactly
as it would have without the stop (same engine and device).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save as save_safetensors

from fedchain.errors import ConfigError
from fedchain.experiments.config import ExperimentConfig, check_same_settings
from fedchain.experiments.results import RoundRecord
from fedchain.files import write_atomic
from fedchain.fl import StrategyState

#: The file of a run's checkpoint in its output folder.
CHECKPOINT_FILE = "checkpoint.safetensors"
#: Version tag of the checkpoint's metadata; a reader refuses any other.
FORMAT = "fedchain-run-checkpoint/1"
#: The metadata key holding everything that is not a tensor.
_METADATA_KEY = "run"
#: Tensor names: the models, and the prefix of the strategy state's tensor fields.
_GLOBAL, _MODELS, _REWARDS, _STATE = "global_params", "models", "rewards", "state."
_LAST_STEP = "last_step"


@dataclass(frozen=True)
class RunCheckpoint:
    """Everything a run needs to go on after its round :attr:`round`."""

    #: Rounds finished (the next one is ``round + 1``).
    round: int
    #: The global model after that round ``[d]``.
    global_params: torch.Tensor
    #: Each client's own model ``[n, d]`` when clients keep theirs; else ``None``.
    models: torch.Tensor | None
    #: Each client's rewarded model after that round ``[n, d]`` when the strategy gives them
    #: and they are not :attr:`models` (which then are the rewards); else ``None``.
    rewards: torch.Tensor | None
    #: The strategy's state after that round; ``None`` before round 1 (a checkpoint saved
    #: right after the standalone models, so that a stop in round 1 does not lose them).
    state: StrategyState | None
    #: The records of the rounds finished.
    records: tuple[RoundRecord, ...]
    #: The first round at the target accuracy, if one was reached.
    rounds_to_target: int | None
    #: The standalone accuracies measured before round 1, one tuple per repeat; ``None`` if not measured.
    standalone_runs: tuple[tuple[float, ...], ...] | None
    #: Wall-clock seconds the run had taken up to that round.
    seconds: float
    #: That round's global model minus the one before ``[d]`` (what disguised free riders resend); ``None``
    #: before round 1.
    last_step: torch.Tensor | None = None

    def to(self, device: torch.device) -> RunCheckpoint:
        """A copy with every tensor (models, strategy state) on ``device``."""
        state = self.state
        if state is not None:
            tensors, fields = state.parts()
            state = type(state).from_parts({name: t.to(device) for name, t in tensors.items()}, fields)
        return dataclasses.replace(
            self,
            global_params=self.global_params.to(device),
            models=None if self.models is None else self.models.to(device),
            rewards=None if self.rewards is None else self.rewards.to(device),
            last_step=None if self.last_step is None else self.last_step.to(device),
            state=state,
        )


def save_checkpoint(path: Path, config: ExperimentConfig, checkpoint: RunCheckpoint) -> None:
    """Write ``checkpoint`` of a run of ``config`` to ``path`` atomically (a stop while saving keeps the previous one)."""
    state_tensors, state_fields = checkpoint.state.parts() if checkpoint.state is not None else ({}, {})
    tensors = {_GLOBAL: checkpoint.global_params.detach().to("cpu").contiguous()}
    for name, tensor in (
        (_MODELS, checkpoint.models),
        (_REWARDS, checkpoint.rewards),
        (_LAST_STEP, checkpoint.last_step),
    ):
        if tensor is not None:
            tensors[name] = tensor.detach().to("cpu").contiguous()
    tensors.update({_STATE + name: tensor for name, tensor in state_tensors.items()})
    run = {
        "format": FORMAT,
        "config": config.to_dict(),
        "round": checkpoint.round,
        "state_type": None if checkpoint.state is None else type(checkpoint.state).__name__,
        "state": state_fields,
        "records": [record.to_dict() for record in checkpoint.records],
        "rounds_to_target": checkpoint.rounds_to_target,
        "standalone_runs": None
        if checkpoint.standalone_runs is None
        else [list(r) for r in checkpoint.standalone_runs],
        "seconds": checkpoint.seconds,
    }
    # NaN in a record (a diverged loss) is kept as JSON's NaN: only this module reads the metadata.
    write_atomic(path, save_safetensors(tensors, metadata={_METADATA_KEY: json.dumps(run, sort_keys=True)}))


def load_checkpoint(
    path: Path, config: ExperimentConfig, state_type: type[StrategyState], *, hint: str
) -> RunCheckpoint | None:
    """The checkpoint at ``path`` of a run of ``config`` (its strategy's state of ``state_type``); ``None`` if none.

    Raises :class:`ConfigError` (with ``hint``) for a checkpoint of other settings,
    naming them, or a file that is not a checkpoint: neither is used or overwritten.
    """
    if not path.is_file():
        return None
    try:
        with safe_open(str(path), framework="pt") as file:
            run = json.loads((file.metadata() or {}).get(_METADATA_KEY, "null"))
            tensors = {name: file.get_tensor(name) for name in file.keys()}  # noqa: SIM118 - safe_open has keys() but is not iterable
    except (OSError, SafetensorError, ValueError) as err:
        raise ConfigError(f"{path} is not a readable run checkpoint ({err})", hint=hint) from err
    if not isinstance(run, Mapping) or run.get("format") != FORMAT:
        raise ConfigError(f"{path} is not a run checkpoint in the {FORMAT} format", hint=hint)
    check_same_settings(run["config"], config, path.parent, hint=hint)
    try:
        return _checkpoint(run, tensors, state_type)
    except (KeyError, TypeError, ValueError) as err:
        raise ConfigError(f"{path} is a damaged run checkpoint ({type(err).__name__}: {err})", hint=hint) from err


def _checkpoint(
    run: Mapping[str, Any], tensors: Mapping[str, torch.Tensor], state_type: type[StrategyState]
) -> RunCheckpoint:
    if run["state_type"] not in (None, state_type.__name__):
        raise TypeError(f"it holds a {run['state_type']}, the strategy needs a {state_type.__name__}")
    state = {name.removeprefix(_STATE): t for name, t in tensors.items() if name.startswith(_STATE)}
    standalone = run["standalone_runs"]
    return RunCheckpoint(
        round=int(run["round"]),
        global_params=tensors[_GLOBAL],
        models=tensors.get(_MODELS),
        rewards=tensors.get(_REWARDS),
        last_step=tensors.get(_LAST_STEP),
        state=None if run["state_type"] is None else state_type.from_parts(state, run["state"]),
        records=tuple(RoundRecord.from_dict(record) for record in run["records"]),
        rounds_to_target=None if run["rounds_to_target"] is None else int(run["rounds_to_target"]),
        standalone_runs=None if standalone is None else tuple(tuple(float(a) for a in r) for r in standalone),
        seconds=float(run["seconds"]),
    )
