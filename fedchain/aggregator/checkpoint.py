"""The strategy's state between rounds, saved per round as safetensors beside the agent's state file.

A strategy state is a frozen dataclass of a round counter and optional
per-client tensors (:class:`fedchain.fl.strategy.StrategyState`). Its tensors
go into a safetensors file and its other fields into the file's metadata as
JSON, so nothing is pickled. The aggregator saves the state after round ``n``
before it posts round ``n``; after a restart it reads the state after the last
posted round, whichever moment the process stopped at.
"""

from __future__ import annotations

import json
from pathlib import Path

from safetensors import safe_open
from safetensors.torch import save as save_safetensors

from fedchain.errors import AgentError
from fedchain.files import write_atomic
from fedchain.fl.strategy import S, StrategyState

#: The metadata key holding the non-tensor fields.
FIELDS_KEY = "fields"


def checkpoint_path(folder: Path, round_number: int) -> Path:
    """Where the state after ``round_number`` is kept."""
    return folder / f"strategy-round-{round_number}.safetensors"


def save_strategy_state(folder: Path, round_number: int, state: StrategyState) -> Path:
    """Save ``state`` (the strategy's state after ``round_number``) atomically; returns the file."""
    tensors, fields = state.parts()
    try:
        metadata = {FIELDS_KEY: json.dumps(fields, sort_keys=True, allow_nan=False)}
    except (TypeError, ValueError) as err:
        raise AgentError(f"the strategy state {type(state).__name__} holds a field JSON cannot keep: {err}") from err
    path = checkpoint_path(folder, round_number)
    write_atomic(path, save_safetensors(tensors, metadata=metadata))
    return path


def load_strategy_state(folder: Path, round_number: int, state_type: type[S]) -> S | None:
    """The state after ``round_number`` saved by :func:`save_strategy_state`, or None if there is none."""
    path = checkpoint_path(folder, round_number)
    if not path.is_file():
        return None
    with safe_open(str(path), framework="pt") as file:
        fields = json.loads((file.metadata() or {}).get(FIELDS_KEY, "{}"))
        tensors = {name: file.get_tensor(name) for name in file.keys()}  # noqa: SIM118 - safe_open has keys() but is not iterable
    try:
        return state_type.from_parts(tensors, fields)
    except TypeError as err:
        raise AgentError(
            f"{path} does not hold a {state_type.__name__}: {err}",
            hint="it was written for another strategy; delete it or run the aggregator with the task's strategy",
        ) from err
