"""The plain PyTorch training loop that the benchmarks race FedChain's trainer against (``fedchain bench train``).

One client at a time, a DataLoader, SGD: what a federated-learning tutorial writes. Both contenders that use it
(the plain loop and Flower's simulation engine, :mod:`fedchain.trainer.flower_baseline`) train with this one
function, so they differ only in how they schedule clients.
"""

from __future__ import annotations

import torch

from fedchain.trainer.config import TrainConfig


def fit_client(
    model: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor, config: TrainConfig, seed: int
) -> None:
    """The plain PyTorch loop's local training of one client, in place on ``model``."""
    optimizer = torch.optim.SGD(model.parameters(), lr=config.lr, momentum=config.momentum)
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(images, labels),
        batch_size=config.batch_size,
        shuffle=True,
        generator=torch.Generator().manual_seed(seed),
    )
    model.train()
    for _ in range(config.local_epochs):
        for x, y in loader:
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            if config.max_grad_norm is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm)
            optimizer.step()
