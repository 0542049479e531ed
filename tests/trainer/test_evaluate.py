"""Evaluation: accuracy and losses of flat models, and standalone accuracy computed by training."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from fedchain.data import ImageDataset, iid
from fedchain.models import ModelSpec
from fedchain.trainer import TrainConfig, Trainer, accuracy, evaluate, initial_params, predict, standalone_accuracies
from tests.trainer.factories import linear_two_by_two


def test_accuracy_counts_arg_max_hits() -> None:
    logits = torch.tensor([[2.0, 1.0], [0.0, 3.0], [1.0, 0.0], [0.0, 1.0]])
    assert accuracy(logits, torch.tensor([0, 1, 1, 1])) == 0.75


def test_predict_gives_per_sample_losses_of_each_model() -> None:
    dataset = ImageDataset(
        "pairs", torch.tensor([[[[1.0, 0.0]]], [[[0.0, 1.0]]]]), torch.tensor([0, 1]), 2, (0.0,), (1.0,)
    )
    zero = torch.zeros(4)
    diagonal = torch.tensor([1.0, 0.0, 0.0, 1.0])  # logits (1, 0) and (0, 1): both right

    result = predict(linear_two_by_two, torch.stack([zero, diagonal]), dataset)

    assert result.losses[0].tolist() == pytest.approx([math.log(2)] * 2)
    assert result.losses[1].tolist() == pytest.approx([math.log(1 + math.exp(-1))] * 2)
    assert result.accuracies.tolist() == [0.5, 1.0]  # ties go to class 0
    losses, accuracies = evaluate(linear_two_by_two, diagonal, dataset)
    assert losses.tolist() == pytest.approx([math.log(1 + math.exp(-1))]) and accuracies.tolist() == [1.0]


def test_standalone_accuracy_is_computed_by_training_each_client_alone(mnist_test: ImageDataset) -> None:
    # Client 0 holds only zeros, so alone it learns to answer 0 and scores the
    # share of zeros in the evaluation set; client 1 holds 1,000 IID digits.
    evaluation = mnist_test.subset(np.arange(5000, 10000))
    zeros_only = mnist_test.subset(np.flatnonzero(mnist_test.labels[:5000].numpy() == 0)[:60])
    mixed = mnist_test.subset(iid(mnist_test.labels[:5000], 5, seed=0)[0])
    trainer = Trainer(
        ModelSpec("lenet5"), TrainConfig(lr=0.05, momentum=0.9, batch_size=32), engine="sequential", device="cpu"
    )

    result = standalone_accuracies(trainer, initial_params(trainer.model, 0), [zeros_only, mixed], evaluation, epochs=4)

    share_of_zeros = float((evaluation.labels == 0).double().mean())
    assert result[0].item() == pytest.approx(share_of_zeros)
    assert result[1].item() > 0.8


def test_standalone_accuracy_is_the_best_epoch_unless_asked_for_the_last(mnist_test: ImageDataset) -> None:
    # The same seeded run scored two ways: the best epoch is never below the last one,
    # and the last-epoch figure is exactly what evaluating the trained models gives.
    evaluation = mnist_test.subset(np.arange(5000, 6000))
    clients = [mnist_test.subset(part) for part in iid(mnist_test.labels[:600], 2, seed=1)]
    trainer = Trainer(ModelSpec("lenet5"), TrainConfig(lr=0.5, batch_size=16), engine="sequential", device="cpu")
    start = initial_params(trainer.model, 0)

    best = standalone_accuracies(trainer, start, clients, evaluation, epochs=3)
    last = standalone_accuracies(trainer, start, clients, evaluation, epochs=3, best=False)

    assert (best >= last).all()
    assert best.dtype == torch.float64 and best.shape == (2,)
