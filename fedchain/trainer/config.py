"""The local-training configuration shared by every engine."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from fedchain.errors import ConfigError

#: ``auto`` picks ``stacked`` on CUDA (models of standard layers; else ``vmap``
#: for models without buffers), ``process`` on a CPU with several cores,
#: ``sequential`` otherwise.
Engine = Literal["auto", "sequential", "process", "vmap", "stacked"]
ENGINES: tuple[str, ...] = ("auto", "sequential", "process", "vmap", "stacked")


@dataclass(frozen=True)
class TrainConfig:
    """Local training of one round: plain SGD on cross-entropy, as every engine runs it.

    Attributes:
        lr: learning rate.
        momentum: SGD momentum (torch's convention, no dampening).
        weight_decay: L2 penalty added to the gradient.
        batch_size: samples per step; a client's last batch of an epoch may be smaller.
        local_epochs: passes over the client's data per round.
        seed: the round's seed. Client ``c`` shuffles with a generator seeded
            from ``(seed, client_id)``, so its batches do not depend on which
            engine runs it, which other clients train beside it, or their order.
    """

    lr: float = 0.01
    momentum: float = 0.0
    weight_decay: float = 0.0
    batch_size: int = 32
    local_epochs: int = 1
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.lr > 0:
            raise ConfigError(f"lr must be positive, got {self.lr}")
        if not 0 <= self.momentum < 1:
            raise ConfigError(f"momentum must be in [0, 1), got {self.momentum}")
        if self.weight_decay < 0:
            raise ConfigError(f"weight_decay must be >= 0, got {self.weight_decay}")
        if self.batch_size < 1:
            raise ConfigError(f"batch_size must be at least 1, got {self.batch_size}")
        if self.local_epochs < 1:
            raise ConfigError(f"local_epochs must be at least 1, got {self.local_epochs}")
