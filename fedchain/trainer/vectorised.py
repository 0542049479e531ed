"""The ``vmap`` engine: many clients as one batched computation (torch.func).

Clients are stacked along a leading dimension: parameters ``[n, d]``, and at
step ``s`` one batch per client ``[n, B, C, H, W]``. One call of
``vmap(grad(loss))`` computes every client's gradient; the SGD update is a few
whole-matrix operations. On a GPU this replaces ``n`` small kernel launches
per layer by one large one, which is where the speed comes from; on a CPU it
is correct but slower than the sequential loop (the issue's measurement).

Clients of different sizes: batches are padded to ``B`` samples with a zero
mask, the loss is the masked mean (equal to the mean over the real batch), and
a client that has finished its steps is left unchanged (``where(active, ...)``),
momentum included. Models with buffers (batch normalisation) are refused: their
running statistics would need in-place updates under ``vmap``.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, vmap

from fedchain.errors import TrainingError
from fedchain.fl.params import ParamSpec
from fedchain.trainer.config import TrainConfig
from fedchain.trainer.local import epoch_permutations


def check_vmappable(model: nn.Module) -> None:
    """Raise :class:`TrainingError` if ``model`` has buffers (the vmap engine cannot train it)."""
    buffers = [name for name, _ in model.named_buffers()]
    if buffers:
        raise TrainingError(
            f"the vmap engine cannot train a model with buffers ({', '.join(buffers[:3])}, ...)",
            hint="use engine='sequential' or 'process' for models with batch normalisation",
        )


def _schedule(
    sizes: list[int], offsets: list[int], generators: list[torch.Generator], config: TrainConfig
) -> tuple[torch.Tensor, torch.Tensor]:
    """Global sample indices ``[S, n, B]`` and a 0/1 mask ``[S, n, B]`` for S steps of n clients."""
    batch = config.batch_size
    per_client = []
    for size, offset, generator in zip(sizes, offsets, generators, strict=True):
        orders = epoch_permutations(size, config.local_epochs, generator) + offset
        # Pad each epoch to a whole number of batches, so batches never straddle epochs.
        steps = -(-size // batch)
        padded = torch.full((config.local_epochs, steps * batch), -1, dtype=torch.int64)
        padded[:, :size] = orders
        per_client.append(padded.reshape(-1, batch))
    total_steps = max(p.shape[0] for p in per_client)
    index = torch.full((total_steps, len(sizes), batch), -1, dtype=torch.int64)
    for client, schedule in enumerate(per_client):
        index[: schedule.shape[0], client] = schedule
    mask = index >= 0
    return index.clamp_min(0), mask


def train_vectorised(
    model: nn.Module,
    spec: ParamSpec,
    start: torch.Tensor,
    images: torch.Tensor,
    labels: torch.Tensor,
    sizes: list[int],
    generators: list[torch.Generator],
    config: TrainConfig,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Train ``n`` clients at once; returns (params ``[n, d]``, mean batch losses ``[n]``, steps ``[n]``).

    ``start`` is ``[n, d]`` (each client's starting point); ``images``/``labels``
    hold all clients' samples concatenated in order, ``sizes[c]`` of them for
    client ``c``. Everything is on ``model``'s device.
    """
    check_vmappable(model)
    device = images.device
    n = len(sizes)
    offsets = [0]
    for size in sizes[:-1]:
        offsets.append(offsets[-1] + size)
    index, mask = _schedule(sizes, offsets, generators, config)
    index, mask = index.to(device), mask.to(device=device, dtype=images.dtype)

    def loss_of(
        params: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor, m: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        logits = functional_call(model, params, (x,))
        per_sample = F.cross_entropy(logits, y, reduction="none") * m
        loss = per_sample.sum() / m.sum().clamp_min(1.0)
        return loss, loss.detach()

    step_fn = vmap(grad(loss_of, has_aux=True))
    flat = start.to(device=device, dtype=torch.float32).clone()
    velocity = torch.zeros_like(flat) if config.momentum else None
    loss_sum = torch.zeros(n, dtype=torch.float64, device=device)
    steps = torch.zeros(n, dtype=torch.int64, device=device)
    for s in range(index.shape[0]):
        params = {name: tensor.view(n, *shape) for name, tensor, shape in _columns(flat, spec)}
        rows = index[s]
        grads, losses = step_fn(params, images[rows], labels[rows], mask[s])
        update = torch.cat([grads[name].reshape(n, -1) for name in spec.names], dim=1)
        if config.weight_decay:
            update = update.add(flat, alpha=config.weight_decay)
        if velocity is not None:
            update = velocity.mul(config.momentum).add_(update)
        active = mask[s, :, 0] > 0
        flat = torch.where(active[:, None], flat - config.lr * update, flat)
        if velocity is not None:
            velocity = torch.where(active[:, None], update, velocity)
        loss_sum += torch.where(active, losses.to(torch.float64), 0.0)
        steps += active.to(torch.int64)
    return flat, loss_sum / steps.clamp_min(1), steps


def _columns(flat: torch.Tensor, spec: ParamSpec) -> Iterator[tuple[str, torch.Tensor, tuple[int, ...]]]:
    """(name, column block of ``flat``, shape) for every tensor of ``spec``; blocks are views."""
    offset = 0
    for name, shape in zip(spec.names, spec.shapes, strict=True):
        size = 1
        for dim in shape:
            size *= dim
        yield name, flat[:, offset : offset + size], shape
        offset += size

