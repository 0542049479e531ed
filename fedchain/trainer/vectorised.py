"""Many clients as one batched computation: the SGD loop the ``vmap`` and ``stacked`` engines share.

Clients are stacked along a leading dimension: parameters ``[n, d]``, and at
step ``s`` one batch per client, ``B`` sample indices each (``[n, B]``). A
gradient function gives every client's gradient ``[n, d]`` at once; the SGD
update is a few whole-matrix operations. The engines differ only in that
function:

* ``vmap`` (here): ``vmap(grad(loss))`` over ``functional_call`` of the model
  (torch.func). It trains any model without buffers.
* ``stacked`` (:mod:`fedchain.trainer.stacked`): the model rewritten as one
  model whose layers hold every client's weights, differentiated by plain
  autograd. Fewer operations per step, for models built from standard layers.

On a GPU either replaces ``n`` clients' small kernel launches by one larger
launch per operation, which is where the speed comes from; on a CPU both are
correct but slower than the sequential loop (the issue's measurement).

Clients of different sizes: batches are padded to ``B`` samples with a zero
mask, the loss is the masked mean (equal to the mean over the real batch), and
a client that has finished its steps is left unchanged (``where(active, ...)``),
momentum included. The gradient clip (``TrainConfig.max_grad_norm``) is each
client's own: a row is scaled by its own norm. Models with buffers (batch
normalisation) are refused when the trainer is built: their running
statistics would need per-client in-place updates.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, vmap

from fedchain.fl.params import ParamSpec
from fedchain.trainer.config import TrainConfig
from fedchain.trainer.local import Checkpoints, epoch_permutations, is_checkpoint

#: ``(params [n, d], sample rows [n, B], mask [n, B]) -> (gradients [n, d], masked mean losses [n])``:
#: every client's gradient of its mean loss over the real samples of its batch.
Gradients = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


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


def masked_mean_losses(logits: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Each client's mean cross-entropy over the real samples of its batch: ``[..., B, K]`` -> ``[...]``."""
    per_sample = F.cross_entropy(logits.flatten(0, -2), labels.flatten(), reduction="none").view(mask.shape) * mask
    return per_sample.sum(-1) / mask.sum(-1).clamp_min(1.0)


def clipped(gradients: torch.Tensor, max_norm: float) -> torch.Tensor:
    """Each client's gradient (a row of ``[n, d]``) scaled to an L2 norm of at most ``max_norm``, with
    ``torch.nn.utils.clip_grad_norm_``'s arithmetic (its 1e-6 included), so every engine steps alike."""
    norms = gradients.norm(dim=1, keepdim=True)
    return gradients * (max_norm / (norms + 1e-6)).clamp_max(1.0)


def train_batched(
    gradients: Gradients,
    start: torch.Tensor,
    sizes: list[int],
    generators: list[torch.Generator],
    config: TrainConfig,
    checkpoint_every: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, tuple[Checkpoints, ...] | None]:
    """Train ``n`` clients at once with ``gradients``; returns (params ``[n, d]``, mean batch losses ``[n]``, steps
    ``[n]``, each client's checkpoints every ``checkpoint_every`` steps or None).

    ``start`` is ``[n, d]`` (each client's starting point); client ``c``'s
    samples are rows ``offset_c .. offset_c + sizes[c]`` of the data the
    gradient function indexes (all clients' samples concatenated in order).
    A client's step ``s`` is the loop's step ``s``: its batches are padded
    within each epoch, so it is active from the first step to its last.
    """
    device = start.device
    n = len(sizes)
    offsets = [0]
    for size in sizes[:-1]:
        offsets.append(offsets[-1] + size)
    index, mask = _schedule(sizes, offsets, generators, config)
    index, mask = index.to(device), mask.to(device=device, dtype=torch.float32)
    flat = start.to(dtype=torch.float32).clone()
    velocity = torch.zeros_like(flat) if config.momentum else None
    loss_sum = torch.zeros(n, dtype=torch.float64, device=device)
    steps = torch.zeros(n, dtype=torch.int64, device=device)
    totals = [config.local_epochs * -(-size // config.batch_size) for size in sizes]
    kept: list[list[tuple[torch.Tensor, torch.Tensor | None]]] = [[] for _ in range(n)]

    def keep(clients: list[int]) -> None:
        rows = flat[clients].cpu()
        moments = velocity[clients].cpu() if velocity is not None else None
        for k, c in enumerate(clients):
            kept[c].append((rows[k], moments[k] if moments is not None else None))

    if checkpoint_every is not None:
        keep(list(range(n)))
    for s in range(index.shape[0]):
        update, losses = gradients(flat, index[s], mask[s])
        if config.max_grad_norm is not None:
            update = clipped(update, config.max_grad_norm)
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
        if checkpoint_every is not None:
            due = [c for c in range(n) if s < totals[c] and is_checkpoint(s + 1, totals[c], checkpoint_every)]
            if due:
                keep(due)
    if checkpoint_every is None:
        return flat, loss_sum / steps.clamp_min(1), steps, None
    checkpoints = tuple(
        Checkpoints(
            checkpoint_every,
            totals[c],
            torch.stack([row for row, _ in kept[c]]),
            torch.stack([v for _, v in kept[c] if v is not None]) if velocity is not None else None,
        )
        for c in range(n)
    )
    return flat, loss_sum / steps.clamp_min(1), steps, checkpoints


def vmap_gradients(model: nn.Module, spec: ParamSpec, images: torch.Tensor, labels: torch.Tensor) -> Gradients:
    """The ``vmap`` engine's gradient function: ``vmap(grad(loss))`` over ``functional_call(model)``."""

    def loss_of(
        params: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor, m: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        loss = masked_mean_losses(functional_call(model, params, (x,)), y, m)
        return loss, loss.detach()

    step = vmap(grad(loss_of, has_aux=True))

    def gradients(flat: torch.Tensor, rows: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        n = flat.shape[0]
        grads, losses = step(dict(columns(flat, spec)), images[rows], labels[rows], mask)
        return torch.cat([grads[name].reshape(n, -1) for name in spec.names], dim=1), losses

    return gradients


def columns(flat: torch.Tensor, spec: ParamSpec) -> Iterator[tuple[str, torch.Tensor]]:
    """(name, every client's tensor ``[n, *shape]``) for every tensor of ``spec``: views of ``flat``'s column blocks."""
    n = flat.shape[0]
    offset = 0
    for name, shape, size in zip(spec.names, spec.shapes, spec.sizes, strict=True):
        yield name, flat[:, offset : offset + size].view(n, *shape)
        offset += size
