"""Dynamic-topology pruning (seed ``pruned-federated-training-framework.zh.txt``).

Each round the server prunes the ``alpha+`` smallest-magnitude weights of the
dense global model, then regrows pruned weights at random until the sparsity
is back to ``alpha``; the regrown weights take their dense values again. The
sparse model is what the clients train; after aggregation the dense model is
restored: ``theta^{t+1} = theta^t - theta_hat^t + theta_hat^{t+1/2}``.

The seed names the schedule's inputs (initial adjustment ``lambda^0``, round
``t``, total rounds ``T``) but not its formula; we read it as the cosine decay of
dynamic sparse training (RigL): ``lambda^t = lambda^0 / 2 * (1 + cos(pi (t-1) / T))``
and ``alpha+ = alpha + (1 - alpha) * lambda^t``, so the topology moves most at
the start and settles at the end. The random regrowth is seeded by ``(seed, t)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from fedchain.errors import ConfigError

#: Multiplier that mixes the pruning seed and the round into one generator seed.
_ROUND_STRIDE = 1_000_003


@dataclass(frozen=True, kw_only=True)
class Pruning:
    """Dynamic-topology pruning, an option of every strategy."""

    #: Target sparsity alpha: the fraction of weights that are zero in the model sent.
    sparsity: float = 0.5
    #: lambda^0: how far beyond alpha the first round prunes before regrowing (fraction of the kept weights).
    initial_adjustment: float = 0.3
    #: T: the number of rounds over which the adjustment decays to 0.
    total_rounds: int = 100
    #: Seed of the random regrowth.
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0.0 <= self.sparsity < 1.0:
            raise ConfigError(f"pruning sparsity must be in [0, 1), got {self.sparsity}", hint="e.g. sparsity: 0.5")
        if not 0.0 <= self.initial_adjustment <= 1.0:
            raise ConfigError(
                f"pruning initial_adjustment must be in [0, 1], got {self.initial_adjustment}",
                hint="e.g. initial_adjustment: 0.3",
            )
        if self.total_rounds < 1:
            raise ConfigError(f"pruning total_rounds must be at least 1, got {self.total_rounds}")

    def over_pruning(self, round_number: int) -> float:
        """alpha+ of round ``round_number`` (1-based): the fraction pruned before regrowth."""
        if round_number > self.total_rounds:
            return self.sparsity
        adjustment = self.initial_adjustment / 2 * (1 + math.cos(math.pi * (round_number - 1) / self.total_rounds))
        return self.sparsity + (1 - self.sparsity) * adjustment


def topology_mask(params: torch.Tensor, round_number: int, pruning: Pruning) -> torch.Tensor:
    """Boolean ``[d]`` mask of the weights kept in round ``round_number`` (True = kept).

    Prunes the ``floor(alpha+ d)`` smallest magnitudes (ties by position), then
    regrows ``floor(alpha+ d) - floor(alpha d)`` of them chosen uniformly at random.
    """
    size = params.numel()
    n_over = math.floor(pruning.over_pruning(round_number) * size)
    n_pruned = math.floor(pruning.sparsity * size)
    order = torch.argsort(params.detach().abs().cpu(), stable=True)
    over_pruned = order[:n_over]
    generator = torch.Generator().manual_seed(pruning.seed * _ROUND_STRIDE + round_number)
    regrown = over_pruned[torch.randperm(n_over, generator=generator)[: n_over - n_pruned]]
    mask = torch.ones(size, dtype=torch.bool)
    mask[over_pruned] = False
    mask[regrown] = True
    return mask.to(params.device)


def restore_dense(dense: torch.Tensor, sparse: torch.Tensor, sparse_after: torch.Tensor) -> torch.Tensor:
    """The dense model after aggregation: ``dense - sparse + sparse_after``."""
    return dense - sparse + sparse_after
