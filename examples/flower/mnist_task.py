"""What both apps share: the model, each client's MNIST partition, and local training (plain PyTorch)."""

from __future__ import annotations

import torch

from fedchain.data.datasets import load_dataset
from fedchain.models.registry import build_model

#: The model's name in FedChain's registry: the task spec names the same one, so the aggregator can evaluate it.
MODEL = "cnn"


def make_model() -> torch.nn.Module:
    return build_model(MODEL)


def load_partition(partition_id: int, samples: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Client ``partition_id``'s ``samples`` training images: a disjoint slice of a seeded shuffle (IID)."""
    train = load_dataset("mnist", train=True)
    order = torch.randperm(len(train.labels), generator=torch.Generator().manual_seed(seed))
    rows = order[partition_id * samples : (partition_id + 1) * samples]
    return train.images[rows], train.labels[rows]


def train(
    model: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor, *, epochs: int, lr: float, seed: int
) -> float:
    """Local SGD on this client's data, in place; returns the last epoch's mean loss."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(images, labels),
        batch_size=32,
        shuffle=True,
        generator=torch.Generator().manual_seed(seed),
    )
    model.train()
    total, count = 0.0, 0
    for _ in range(epochs):
        total, count = 0.0, 0
        for x, y in loader:
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            total, count = total + loss.item() * len(y), count + len(y)
    return total / max(count, 1)
