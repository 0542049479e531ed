"""The client's configuration: a frozen dataclass, from a YAML file and flags (flags win)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fedchain.config import load_config
from fedchain.data.partition import PartitionConfig
from fedchain.errors import ConfigError

#: How a client watches its own entries (ClientConfig.watch).
WATCH_MODES = ("reexecute", "committee", "off")


@dataclass(frozen=True)
class ClientConfig:
    """One client of one task: which data it holds, what it does to it, where it keeps its state.

    Attributes:
        task_id: the task to join.
        name: the agent's name in logs and in its state file.
        state_path: where its state (join, auction, hand-off, settlement) is saved.
        partition: how the dataset is split among the clients (kind, number of clients, seed, ...).
        partition_index: which part of the split this client holds (0-based).
        max_samples: keep at most this many of its samples (None: all); small demos and tests.
        noisy_labels: fraction of its labels replaced by a wrong class (a low-quality client).
        flip_labels: flip every label y -> C-1-y (an adversarial client).
        epsilon: per-pixel local privacy budget applied before the hand-off; None: the task spec's.
        data_root: folder holding the datasets (None: FEDCHAIN_DATA_ROOT).
        seed: seed of its label noise and privacy noise.
        poll_interval_s: seconds between polls of the chain when nothing happens.
        confirmations: blocks on top of a block before its events are acted on (0 on a local chain).
        watch: how it watches its own entries (:mod:`fedchain.disputes.watch`): ``reexecute`` re-scores every
            posted round and, when its update was screened out, re-executes its job to see whether its fog node
            trained it; ``committee`` re-scores but leaves the re-execution to the arbiters (it challenges its fog
            node whenever its entry harms it, and loses the bond when the fog node was honest); ``off`` never
            challenges.
        device: torch device for re-scoring and re-execution (``cpu``: what the arbiters' tolerances were set on).
    """

    task_id: int
    name: str = "client"
    state_path: Path = Path(".fedchain/client.json")
    partition: PartitionConfig = field(default_factory=PartitionConfig)
    partition_index: int = 0
    max_samples: int | None = None
    noisy_labels: float = 0.0
    flip_labels: bool = False
    epsilon: float | None = None
    data_root: Path | None = None
    seed: int = 0
    poll_interval_s: float = 0.5
    confirmations: int = 0
    watch: str = "reexecute"
    device: str = "cpu"

    def __post_init__(self) -> None:
        if self.watch not in WATCH_MODES:
            raise ConfigError(f"unknown watch mode {self.watch!r}", hint=f"use one of: {', '.join(WATCH_MODES)}")
        if self.task_id < 1:
            raise ConfigError(f"task_id must be at least 1, got {self.task_id}")
        if not 0 <= self.partition_index < self.partition.n_clients:
            raise ConfigError(
                f"partition_index {self.partition_index} is outside 0..{self.partition.n_clients - 1}",
                hint="pass --partition-index below --partitions",
            )
        if self.max_samples is not None and self.max_samples < 1:
            raise ConfigError(f"max_samples must be at least 1, got {self.max_samples}")
        if not 0.0 <= self.noisy_labels <= 1.0:
            raise ConfigError(f"noisy_labels must be a fraction in [0, 1], got {self.noisy_labels}")
        if self.epsilon is not None and not (self.epsilon > 0 and math.isfinite(self.epsilon)):
            raise ConfigError(f"epsilon must be a positive number, got {self.epsilon}")


def load_client_config(path: Path | None = None, overrides: Mapping[str, Any] | None = None) -> ClientConfig:
    """A :class:`ClientConfig` from an optional YAML file, then the non-None ``overrides`` (flags)."""
    return load_config(ClientConfig, path, overrides)
