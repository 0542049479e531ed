"""The reference local-training loop of one client, and what every engine shares with it.

Every engine must give the results of :func:`train_one_client` (within float
tolerance): same batches in the same order (:func:`epoch_permutations`), same
loss (mean cross-entropy over the batch), same SGD update.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from fedchain.fl.params import ParamSpec, flatten, unflatten
from fedchain.trainer.config import TrainConfig


def client_generator(seed: int, client_id: int) -> torch.Generator:
    """The CPU generator client ``client_id`` shuffles with in the round seeded ``seed``."""
    words = np.random.SeedSequence([seed & 0xFFFFFFFFFFFFFFFF, client_id & 0xFFFFFFFFFFFFFFFF]).generate_state(2)
    return torch.Generator().manual_seed(int(words[0]) | int(words[1]) << 32)


def epoch_permutations(n_samples: int, epochs: int, generator: torch.Generator) -> torch.Tensor:
    """Sample order for each epoch, ``[epochs, n_samples]`` int64 (CPU)."""
    return torch.stack([torch.randperm(n_samples, generator=generator) for _ in range(epochs)])


def steps_per_client(n_samples: int, config: TrainConfig) -> int:
    """Optimiser steps one client takes: ``local_epochs * ceil(n / batch_size)``."""
    return config.local_epochs * math.ceil(n_samples / config.batch_size)


def prepare_model(model: nn.Module, device: torch.device) -> nn.Module:
    """``model`` on ``device``, laid out for fast training and evaluation there.

    On a CPU, convolution weights go channels-last: activations follow, and
    oneDNN's convolutions and max pooling then vectorise over channels. On the
    2-core development machine, one thread: about 13% less CPU time per LeNet-5
    training step (batch 32), and 1.7x the evaluation throughput (batches of
    1,000: 14,200 against 8,300 samples/s, where the default layout's
    activations outgrow the cache). The arithmetic is the same; results differ
    from the default layout only by float rounding.
    """
    model = model.to(device)
    if device.type == "cpu":
        model = model.to(memory_format=torch.channels_last)
    return model


def load_flat(model: nn.Module, vector: torch.Tensor, spec: ParamSpec) -> None:
    """Copy a flat parameter vector into ``model``'s state (parameters and buffers)."""
    model.load_state_dict(unflatten(vector, spec))


def train_one_client(
    model: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    config: TrainConfig,
    generator: torch.Generator,
) -> tuple[float, int]:
    """Train ``model`` in place on one client's data; returns (mean batch loss, steps).

    The model, images and labels must be on the same device; the generator is
    a CPU generator (see :func:`client_generator`).
    """
    model.train()
    optimizer = torch.optim.SGD(
        model.parameters(), lr=config.lr, momentum=config.momentum, weight_decay=config.weight_decay
    )
    orders = epoch_permutations(labels.shape[0], config.local_epochs, generator).to(images.device)
    total = torch.zeros((), dtype=torch.float64, device=images.device)
    steps = 0
    for order in orders:
        for batch in order.split(config.batch_size):
            loss = F.cross_entropy(model(images.index_select(0, batch)), labels.index_select(0, batch))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if config.max_grad_norm is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm)
            optimizer.step()
            total += loss.detach()
            steps += 1
    return float(total) / steps, steps


def model_spec_of(model: nn.Module) -> ParamSpec:
    """The :class:`ParamSpec` of ``model``'s state dict (parameters and buffers)."""
    return ParamSpec.of(model.state_dict())


def flat_state(model: nn.Module, spec: ParamSpec) -> torch.Tensor:
    """``model``'s state as one float32 vector in ``spec``'s order."""
    return flatten(model.state_dict(), spec)[0]
