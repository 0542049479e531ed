"""Splitting a dataset among clients: IID, POW, CLA and DIR.

Every partition is a pure function of the labels, the number of clients and
a seed, and returns one sorted int64 index array per client; the arrays are
disjoint. The same arguments always give the same partition.

* ``iid``: a random permutation cut into near-equal parts.
* ``pow``: power-law sizes. Client ``j`` (in a seeded random order) gets a
  share proportional to ``(j + 1) ** -exponent`` of the samples, drawn at
  random; every client gets at least ``min_size`` samples.
* ``cla``: ``k`` distinct classes per client. Classes are dealt round-robin
  from a seeded permutation of the classes, so every class is held when
  ``n_clients * k >= num_classes``; each class's samples are split evenly
  among the clients that hold it.
* ``dir``: for every class, client shares drawn from ``Dirichlet(alpha)``
  (small alpha: few classes per client). Redrawn until every client has at
  least ``min_size`` samples (at most ``max_draws`` times).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from fedchain.errors import ConfigError, DataError

PartitionKind = Literal["iid", "pow", "cla", "dir"]
PARTITION_KINDS: tuple[str, ...] = ("iid", "pow", "cla", "dir")


@dataclass(frozen=True)
class PartitionConfig:
    """How to split a dataset among clients.

    Attributes:
        kind: ``iid``, ``pow`` (power-law sizes), ``cla`` (k classes per client)
            or ``dir`` (Dirichlet label skew).
        n_clients: number of clients.
        seed: seed of the split.
        classes_per_client: ``k`` for ``cla``.
        alpha: Dirichlet concentration for ``dir``; must be > 0.
        exponent: power-law exponent for ``pow``; 0 gives equal sizes.
        min_size: the fewest samples any client may get (``pow``, ``dir``).
        max_draws: how many Dirichlet draws ``dir`` tries before giving up.
    """

    kind: PartitionKind = "iid"
    n_clients: int = 10
    seed: int = 0
    classes_per_client: int = 2
    alpha: float = 0.5
    exponent: float = 1.0
    min_size: int = 1
    max_draws: int = 1000

    def __post_init__(self) -> None:
        if self.kind not in PARTITION_KINDS:
            raise ConfigError(f"unknown partition kind {self.kind!r}", hint=f"use one of: {', '.join(PARTITION_KINDS)}")
        for name in ("n_clients", "classes_per_client", "max_draws"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.min_size < 0:
            raise ConfigError(f"min_size must be >= 0, got {self.min_size}")
        _check_alpha(self.alpha)
        _check_exponent(self.exponent)


def partition(
    labels: torch.Tensor | np.ndarray, config: PartitionConfig, num_classes: int | None = None
) -> list[np.ndarray]:
    """Split sample indices among ``config.n_clients`` clients as ``config.kind`` says."""
    if config.kind == "iid":
        return iid(labels, config.n_clients, seed=config.seed)
    if config.kind == "pow":
        return power_law(labels, config.n_clients, exponent=config.exponent, min_size=config.min_size, seed=config.seed)
    if config.kind == "cla":
        return classes_per_client(
            labels, config.n_clients, config.classes_per_client, num_classes=num_classes, seed=config.seed
        )
    # "dir": PartitionConfig admits no other kind
    return dirichlet(
        labels,
        config.n_clients,
        config.alpha,
        num_classes=num_classes,
        min_size=config.min_size,
        max_draws=config.max_draws,
        seed=config.seed,
    )


def _labels_array(labels: torch.Tensor | np.ndarray) -> np.ndarray:
    array = labels.cpu().numpy() if isinstance(labels, torch.Tensor) else np.asarray(labels)
    if array.ndim != 1:
        raise DataError(f"labels must be one-dimensional, got shape {array.shape}")
    return array.astype(np.int64, copy=False)


def _check_alpha(alpha: float) -> None:
    if not (alpha > 0 and math.isfinite(alpha)):
        raise ConfigError(
            f"Dirichlet alpha must be a positive number, got {alpha}", hint="use e.g. alpha: 0.5 (smaller: more skew)"
        )


def _check_exponent(exponent: float) -> None:
    if not (exponent >= 0 and math.isfinite(exponent)):
        raise ConfigError(f"power-law exponent must be a number >= 0, got {exponent}", hint="0 gives equal sizes")


def _check_clients(n_samples: int, n_clients: int, min_size: int = 1) -> None:
    if n_clients < 1:
        raise ConfigError(f"n_clients must be at least 1, got {n_clients}")
    if min_size < 0:
        raise ConfigError(f"min_size must be >= 0, got {min_size}")
    if n_clients * max(min_size, 1) > n_samples:
        raise DataError(
            f"cannot give {n_clients} clients at least {max(min_size, 1)} sample(s) each from {n_samples} samples",
            hint="use fewer clients, a smaller min_size, or more data",
        )


def _finish(parts: list[np.ndarray]) -> list[np.ndarray]:
    return [np.sort(p.astype(np.int64, copy=False)) for p in parts]


def iid(labels: torch.Tensor | np.ndarray, n_clients: int, *, seed: int = 0) -> list[np.ndarray]:
    """A random permutation of all samples cut into ``n_clients`` near-equal parts."""
    n = len(_labels_array(labels))
    _check_clients(n, n_clients)
    rng = np.random.default_rng(seed)
    return _finish(np.array_split(rng.permutation(n), n_clients))


def power_law_sizes(n_samples: int, n_clients: int, *, exponent: float = 1.0, min_size: int = 1) -> np.ndarray:
    """Client sizes proportional to ``(j + 1) ** -exponent``, at least ``min_size``, summing to ``n_samples``.

    Sizes are in decreasing order; callers shuffle which client gets which.
    """
    _check_clients(n_samples, n_clients, min_size)
    _check_exponent(exponent)
    weights = np.arange(1, n_clients + 1, dtype=np.float64) ** -exponent
    spare = n_samples - n_clients * min_size
    raw = weights / weights.sum() * spare
    sizes = np.floor(raw).astype(np.int64)
    # Largest remainders get the leftover samples, so the sizes sum exactly.
    leftover = spare - int(sizes.sum())
    order = np.argsort(-(raw - sizes), kind="stable")
    sizes[order[:leftover]] += 1
    return sizes + min_size


def power_law(
    labels: torch.Tensor | np.ndarray, n_clients: int, *, exponent: float = 1.0, min_size: int = 1, seed: int = 0
) -> list[np.ndarray]:
    """Power-law client sizes, each client's samples drawn at random from all of them."""
    n = len(_labels_array(labels))
    sizes = power_law_sizes(n, n_clients, exponent=exponent, min_size=min_size)
    rng = np.random.default_rng(seed)
    sizes = sizes[rng.permutation(n_clients)]
    cuts = np.cumsum(sizes)[:-1]
    return _finish(np.split(rng.permutation(n), cuts))


def classes_per_client(
    labels: torch.Tensor | np.ndarray, n_clients: int, k: int, *, num_classes: int | None = None, seed: int = 0
) -> list[np.ndarray]:
    """Each client holds ``k`` distinct classes; a class's samples are split evenly among its holders."""
    array = _labels_array(labels)
    num_classes = int(num_classes if num_classes is not None else array.max() + 1)
    _check_clients(len(array), n_clients)
    if not 1 <= k <= num_classes:
        raise DataError(
            f"cannot give each client {k} distinct classes: the dataset has {num_classes} classes",
            hint=f"choose classes_per_client between 1 and {num_classes}",
        )
    rng = np.random.default_rng(seed)
    order = rng.permutation(num_classes)
    holders: list[list[int]] = [[] for _ in range(num_classes)]
    for client in range(n_clients):
        for j in range(k):
            holders[order[(client * k + j) % num_classes]].append(client)
    parts: list[list[np.ndarray]] = [[] for _ in range(n_clients)]
    for cls, owners in enumerate(holders):
        if not owners:
            continue
        members = rng.permutation(np.flatnonzero(array == cls))
        if len(members) < len(owners):
            raise DataError(
                f"class {cls} has {len(members)} samples for {len(owners)} clients that hold it",
                hint="use fewer clients or fewer classes per client",
            )
        for owner, chunk in zip(owners, np.array_split(members, len(owners)), strict=True):
            parts[owner].append(chunk)
    return _finish([np.concatenate(p) for p in parts])


def dirichlet(
    labels: torch.Tensor | np.ndarray,
    n_clients: int,
    alpha: float,
    *,
    num_classes: int | None = None,
    min_size: int = 1,
    max_draws: int = 1000,
    seed: int = 0,
) -> list[np.ndarray]:
    """Label skew: each class split among clients by shares drawn from ``Dirichlet(alpha, ..., alpha)``."""
    array = _labels_array(labels)
    _check_alpha(alpha)
    _check_clients(len(array), n_clients, min_size)
    num_classes = int(num_classes if num_classes is not None else array.max() + 1)
    rng = np.random.default_rng(seed)
    by_class = [np.flatnonzero(array == cls) for cls in range(num_classes)]
    for _ in range(max_draws):
        parts: list[list[np.ndarray]] = [[] for _ in range(n_clients)]
        for members in by_class:
            if len(members) == 0:
                continue
            shares = rng.dirichlet(np.full(n_clients, alpha))
            cuts = (np.cumsum(shares)[:-1] * len(members)).astype(np.int64)
            for client, chunk in enumerate(np.split(rng.permutation(members), cuts)):
                parts[client].append(chunk)
        result = [np.concatenate(p) for p in parts]
        if min(len(p) for p in result) >= min_size:
            return _finish(result)
    raise DataError(
        f"no Dirichlet(alpha={alpha}) split in {max_draws} draws gave all {n_clients} clients {min_size} samples",
        hint="raise alpha, lower min_size, or use fewer clients",
    )
