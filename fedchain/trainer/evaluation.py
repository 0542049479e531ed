"""Evaluating flat parameter vectors on a dataset: accuracy, losses, standalone accuracy.

The aggregator scores every client's model on its validation set (DESIGN.md:
the quality ``q_i`` uses that loss, never one the trainer reports), FedAVE
compares per-sample loss distributions, and the fairness experiments need
each client's standalone accuracy. All of it comes from :func:`predict`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn

from fedchain.data.datasets import ImageDataset
from fedchain.fl.params import ParamSpec
from fedchain.models.registry import ModelSpec
from fedchain.trainer.device import resolve_device
from fedchain.trainer.local import load_flat, model_spec_of, prepare_model
from fedchain.trainer.trainer import ClientData, Trainer, as_pair
from fedchain.updates import local_loss_count

#: Mixes the seed and the epoch number of a standalone run.
_EPOCH_SEED_STRIDE = 10_007

#: Samples per forward pass when evaluating.
EVAL_BATCH_SIZE = 1000


def accuracy(logits: torch.Tensor, labels: torch.Tensor) -> float:
    """Fraction of rows of ``logits`` whose arg-max is the label."""
    if labels.numel() == 0:
        raise ValueError("accuracy of an empty batch is undefined")
    return float((logits.argmax(dim=-1) == labels).float().mean())


@dataclass(frozen=True)
class Predictions:
    """Per-model, per-sample results: ``losses`` ``[n, N]`` float32 and ``correct`` ``[n, N]`` bool (CPU)."""

    losses: torch.Tensor
    correct: torch.Tensor

    @property
    def mean_losses(self) -> torch.Tensor:
        """Mean cross-entropy of each model, ``[n]``."""
        return self.losses.double().mean(dim=1)

    @property
    def accuracies(self) -> torch.Tensor:
        """Accuracy of each model, ``[n]``."""
        return self.correct.double().mean(dim=1)


def _module(model: ModelSpec | Callable[[], nn.Module] | nn.Module) -> nn.Module:
    if isinstance(model, nn.Module):
        return model
    return model.build() if isinstance(model, ModelSpec) else model()


@torch.no_grad()
def predict(
    model: ModelSpec | Callable[[], nn.Module] | nn.Module,
    params: torch.Tensor,
    dataset: ClientData,
    *,
    device: torch.device | str | None = None,
    batch_size: int = EVAL_BATCH_SIZE,
) -> Predictions:
    """Per-sample cross-entropy and correctness of each model ``params`` (``[d]`` or ``[n, d]``) on ``dataset``
    (an :class:`ImageDataset` or an ``(images, labels)`` pair)."""
    device = resolve_device(device) if device is not None else params.device
    module = prepare_model(_module(model), device).eval()
    spec: ParamSpec = model_spec_of(module)
    rows = params.reshape(-1, spec.numel)
    images, labels = (tensor.to(device) for tensor in as_pair(dataset))
    size = int(labels.shape[0])
    losses = torch.empty(rows.shape[0], size, dtype=torch.float32)
    correct = torch.empty(rows.shape[0], size, dtype=torch.bool)
    for r in range(rows.shape[0]):
        load_flat(module, rows[r].to(device), spec)
        for begin in range(0, size, batch_size):
            x, y = images[begin : begin + batch_size], labels[begin : begin + batch_size]
            logits = module(x)
            losses[r, begin : begin + len(y)] = F.cross_entropy(logits, y, reduction="none").cpu()
            correct[r, begin : begin + len(y)] = (logits.argmax(dim=-1) == y).cpu()
    return Predictions(losses, correct)


def local_losses(
    model: ModelSpec | Callable[[], nn.Module] | nn.Module,
    params: torch.Tensor,
    data: ClientData,
    *,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """The local losses an update carries (fedave): per-sample cross-entropy of the trained model ``params``
    ``[d]`` on the first :func:`~fedchain.updates.local_loss_count` samples of the job's ``data``, float32."""
    images, labels = as_pair(data)
    count = local_loss_count(int(labels.shape[0]))
    return predict(model, params, (images[:count], labels[:count]), device=device).losses[0]


def evaluate(
    model: ModelSpec | Callable[[], nn.Module] | nn.Module,
    params: torch.Tensor,
    dataset: ImageDataset,
    *,
    device: torch.device | str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean losses ``[n]``, accuracies ``[n]``) of the models ``params`` (``[d]`` gives n = 1) on ``dataset``."""
    result = predict(model, params, dataset, device=device)
    return result.mean_losses, result.accuracies


def standalone_accuracies(
    trainer: Trainer,
    initial: torch.Tensor,
    clients: Sequence[ImageDataset],
    test: ImageDataset,
    *,
    epochs: int,
    best: bool = True,
    seed: int | None = None,
) -> torch.Tensor:
    """Each client's accuracy on ``test`` after training alone from ``initial`` for ``epochs`` epochs, ``[n]``.

    The fairness reference of FedAVE/CFFL: what a client could reach without
    the federation. Computed with the trainer's own engine, all clients at once,
    one epoch at a time. With ``best`` (the default) a client's figure is its
    best test accuracy over the epochs, so a run that collapses late (a large
    learning rate on a small dataset) still counts what the client's data
    could reach; otherwise it is the accuracy after the last epoch. ``seed``
    (default: the trainer's) seeds the batches.
    """
    seed = trainer.config.seed if seed is None else seed
    params = initial
    top = torch.zeros(len(clients), dtype=torch.float64)
    accuracies = top
    for epoch in range(epochs):
        config = replace(trainer.config, local_epochs=1, seed=seed * _EPOCH_SEED_STRIDE + epoch)
        params = trainer.train(params, clients, config=config).params
        accuracies = evaluate(trainer.model, params, test)[1].to(torch.float64).cpu()
        top = torch.maximum(top, accuracies)
    return top if best else accuracies
