"""The data side of an experiment: who holds which samples, and who misbehaves.

:func:`build_federation` turns an :class:`ExperimentConfig` into a
:class:`Federation`: the aggregator's validation set (training samples no
client holds), the test set, and every client's local dataset after its
label faults and local privacy noise. Everything is drawn from the
experiment's seed, so the same config always gives the same federation.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import torch

from fedchain.data.datasets import ImageDataset, load_dataset
from fedchain.data.faults import flip_labels, noisy_labels
from fedchain.data.partition import PartitionConfig, partition
from fedchain.data.privacy import privatise
from fedchain.errors import DataError
from fedchain.experiments.config import ExperimentConfig, FaultConfig

log = logging.getLogger(__name__)

#: Fault labels, in the order faulty clients are drawn (see :class:`FaultConfig`).
NO_FAULT = "none"
NOISY = "noisy"
FLIPPED = "flipped"
FREE_RIDER = "free-rider"
SCALED = "scaled"
SIGN_FLIPPED = "sign-flipped"
NOISE = "noise"
SYBIL = "sybil"

#: The fault label of every fraction field of :class:`FaultConfig`.
FAULT_LABELS = {
    "noisy_clients": NOISY,
    "flipped_clients": FLIPPED,
    "free_riders": FREE_RIDER,
    "scaled_clients": SCALED,
    "sign_flipped_clients": SIGN_FLIPPED,
    "noise_clients": NOISE,
    "sybil_clients": SYBIL,
}

#: Offsets that derive independent generators from the experiment's seed.
_SEED_SPLIT = 1
_SEED_FAULTS = 2
_SEED_LABELS = 3
_SEED_PRIVACY = 4


@dataclass(frozen=True)
class Federation:
    """The datasets of one experiment."""

    #: Each client's local data, faults and privacy noise applied.
    clients: tuple[ImageDataset, ...]
    #: The aggregator's validation set: training samples that no client holds.
    validation: ImageDataset
    #: The test split used for every reported accuracy.
    test: ImageDataset
    #: Each client's injected fault (``none`` or a value of :data:`FAULT_LABELS`).
    faults: tuple[str, ...]

    @property
    def num_classes(self) -> int:
        return self.test.num_classes

    @property
    def data_sizes(self) -> tuple[int, ...]:
        """Local sample count of every client."""
        return tuple(len(c) for c in self.clients)


def assign_faults(n_clients: int, faults: FaultConfig, seed: int) -> tuple[str, ...]:
    """Which fault each client has: disjoint, seeded random groups of ``round(fraction * n)`` clients."""
    order = np.random.default_rng([seed, _SEED_FAULTS]).permutation(n_clients)
    labels = [NO_FAULT] * n_clients
    start = 0
    for name in FaultConfig.client_fractions:
        count = round(getattr(faults, name) * n_clients)
        for client in order[start : start + count]:
            labels[int(client)] = FAULT_LABELS[name]
        start += count
    return tuple(labels)


def imbalanced_classes(labels: np.ndarray, n_clients: int, num_classes: int, seed: int) -> list[np.ndarray]:
    """Class-number imbalance (FedAVE's and CGSV's CLA): client j holds ``k_j`` random classes.

    ``k_j = floor(1 + j (C - 1) / (n - 1))`` runs from 1 to all ``C`` classes.
    Every client asks for the same number of samples, ``len(labels) // (2 n)``,
    split evenly over its classes; samples are disjoint, so a class that runs
    out gives what it has left. Returns sorted index arrays, one per client.
    """
    if n_clients < 2:
        raise DataError("class imbalance needs at least 2 clients", hint="use more clients or set classes_per_client")
    rng = np.random.default_rng(seed)
    counts = np.floor(1 + np.arange(n_clients) * (num_classes - 1) / (n_clients - 1)).astype(int)
    pools = [list(rng.permutation(np.flatnonzero(labels == c))) for c in range(num_classes)]
    wanted = len(labels) // (2 * n_clients)
    parts = []
    for k in counts:
        classes = rng.choice(num_classes, size=k, replace=False)
        taken = []
        for share, c in zip(np.array_split(np.arange(wanted), k), classes, strict=True):
            taken.extend(pools[c][: len(share)])
            del pools[c][: len(share)]
        if not taken:
            raise DataError(
                f"a client of {k} classes got no samples", hint="use more training samples or fewer clients"
            )
        parts.append(np.sort(np.asarray(taken, dtype=np.int64)))
    return parts


def _random_subset(size: int, count: int | None, rng: np.random.Generator) -> np.ndarray:
    """``count`` sorted random indices of ``range(size)`` (all of them when ``count`` is None or too big)."""
    if count is None or count >= size:
        return np.arange(size)
    return np.sort(rng.choice(size, size=count, replace=False))


def build_federation(config: ExperimentConfig) -> Federation:
    """Load, split and corrupt the data of ``config`` (see the module docstring).

    Raises:
        DataError: unknown dataset, a data root without the files, too few
            samples, or a partition that cannot be made (more classes per
            client than the dataset has).
    """
    root = config.data_root
    train = load_dataset(config.dataset, train=True, root=root)
    test = load_dataset(config.dataset, train=False, root=root)
    rng = np.random.default_rng([config.seed, _SEED_SPLIT])
    test = test.subset(_random_subset(len(test), config.test_samples, rng))
    pool = _random_subset(len(train), config.train_samples, rng)
    if config.validation_samples >= len(pool):
        raise DataError(
            f"validation_samples={config.validation_samples} leaves no training data out of {len(pool)} samples",
            hint="lower validation_samples or raise train_samples",
        )
    shuffled = rng.permutation(pool)
    validation = train.subset(np.sort(shuffled[: config.validation_samples]))
    local_pool = np.sort(shuffled[config.validation_samples :])
    spec = PartitionConfig(
        kind=config.partition,
        n_clients=config.clients,
        seed=config.seed,
        classes_per_client=config.classes_per_client or 1,
        alpha=config.alpha,
        exponent=config.power,
    )
    local_labels = train.labels[local_pool]
    if config.partition == "cla" and config.classes_per_client is None:
        parts = imbalanced_classes(local_labels.numpy(), config.clients, train.num_classes, config.seed)
    else:
        parts = partition(local_labels, spec, num_classes=train.num_classes)
    faults = assign_faults(config.clients, config.faults, config.seed)
    label_generator = torch.Generator().manual_seed(config.seed * 1000 + _SEED_LABELS)
    privacy_generator = torch.Generator().manual_seed(config.seed * 1000 + _SEED_PRIVACY)
    clients = []
    for part, fault in zip(parts, faults, strict=True):
        local = train.subset(local_pool[part])
        if fault == NOISY:
            local = local.with_tensors(
                labels=noisy_labels(
                    local.labels, config.faults.noise_rate, local.num_classes, generator=label_generator
                )
            )
        elif fault == FLIPPED:
            local = local.with_tensors(labels=flip_labels(local.labels, local.num_classes))
        if config.epsilon is not None:
            local = privatise(local, config.epsilon, generator=privacy_generator)
        clients.append(local)
    log.info(
        "%s: %d clients (%s), %d validation and %d test samples",
        config.dataset,
        len(clients),
        config.partition,
        len(validation),
        len(test),
    )
    return Federation(tuple(clients), validation, test, faults)
