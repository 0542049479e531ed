"""The data a client hands to its fog node: its partition of the task's dataset, its faults, its privacy noise."""

from __future__ import annotations

import logging

import torch

from fedchain.client.config import ClientConfig
from fedchain.data.datasets import ImageDataset, load_dataset
from fedchain.data.faults import flip_labels, noisy_labels
from fedchain.data.partition import partition
from fedchain.data.privacy import privatise
from fedchain.taskspec import TaskSpec

log = logging.getLogger(__name__)


def client_dataset(spec: TaskSpec, config: ClientConfig) -> ImageDataset:
    """The client's training data, as it leaves the client: deterministic in the spec and the config.

    Its part of the split of the dataset's training set (``config.partition``,
    part ``config.partition_index``), the first ``max_samples`` of it, then its
    label faults, then local privacy noise with ``config.epsilon`` (else the
    spec's ``privacy_epsilon``; none when both are None).
    """
    dataset = load_dataset(spec.dataset, train=True, root=config.data_root)
    indices = partition(dataset.labels, config.partition, num_classes=dataset.num_classes)[config.partition_index]
    if config.max_samples is not None:
        indices = indices[: config.max_samples]
    data = dataset.subset(indices)
    generator = torch.Generator().manual_seed(config.seed)
    if config.noisy_labels > 0:
        data = data.with_tensors(
            labels=noisy_labels(data.labels, config.noisy_labels, data.num_classes, generator=generator)
        )
    if config.flip_labels:
        data = data.with_tensors(labels=flip_labels(data.labels, data.num_classes))
    epsilon = config.epsilon if config.epsilon is not None else spec.privacy_epsilon
    if epsilon is not None:
        data = privatise(data, epsilon, mechanism=spec.privacy_mechanism, delta=spec.privacy_delta, generator=generator)
    log.info(
        "client data: %d samples of %s (part %d of %s)",
        len(data),
        spec.dataset,
        config.partition_index,
        config.partition.kind,
    )
    return data
