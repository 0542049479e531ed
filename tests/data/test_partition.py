"""Partitions: sizes, classes per client, determinism and impossible requests."""

from __future__ import annotations

import numpy as np
import pytest

from fedchain.data import (
    PartitionConfig,
    classes_per_client,
    dirichlet,
    iid,
    partition,
    power_law,
    power_law_sizes,
)
from fedchain.errors import ConfigError, DataError

#: 10 classes x 30 samples, in class order.
LABELS = np.repeat(np.arange(10), 30)


def _assert_disjoint_sorted(parts: list[np.ndarray], n_samples: int) -> None:
    joined = np.concatenate(parts)
    assert len(np.unique(joined)) == len(joined)
    assert joined.min() >= 0 and joined.max() < n_samples
    assert all(np.all(np.diff(p) > 0) for p in parts)


def test_iid_cuts_all_samples_into_near_equal_disjoint_parts() -> None:
    parts = iid(LABELS[:100], 3, seed=1)

    assert [len(p) for p in parts] == [34, 33, 33]
    _assert_disjoint_sorted(parts, 100)
    assert len(np.concatenate(parts)) == 100


def test_every_partition_is_reproducible_from_its_seed() -> None:
    for kind in ("iid", "pow", "cla", "dir"):
        first = partition(LABELS, PartitionConfig(kind=kind, n_clients=5, seed=7))
        again = partition(LABELS, PartitionConfig(kind=kind, n_clients=5, seed=7))
        other = partition(LABELS, PartitionConfig(kind=kind, n_clients=5, seed=8))

        assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True)), kind
        assert not all(np.array_equal(a, b) for a, b in zip(first, other, strict=True)), kind


def test_power_law_sizes_match_the_hand_computed_split() -> None:
    # weights 1, 1/2, 1/3, 1/4 (sum 25/12) share the 96 samples left after one
    # each: 46.08, 23.04, 15.36, 11.52 -> floors 46, 23, 15, 11 and the one
    # leftover to the largest remainder (11.52) -> 46, 23, 15, 12, plus one each.
    assert power_law_sizes(100, 4, exponent=1.0, min_size=1).tolist() == [47, 24, 16, 13]


def test_power_law_gives_every_client_its_size_in_a_seeded_order() -> None:
    parts = power_law(LABELS, 6, exponent=1.5, min_size=5, seed=3)

    sizes = sorted((len(p) for p in parts), reverse=True)
    assert sizes == power_law_sizes(300, 6, exponent=1.5, min_size=5).tolist()
    assert min(sizes) >= 5
    _assert_disjoint_sorted(parts, 300)


def test_power_law_exponent_zero_is_equal_sizes() -> None:
    assert power_law_sizes(300, 6, exponent=0.0).tolist() == [50] * 6


def test_cla_gives_each_client_exactly_k_classes_and_covers_every_class() -> None:
    parts = classes_per_client(LABELS, 5, 2, seed=4)

    held = [set(LABELS[p].tolist()) for p in parts]
    assert all(len(classes) == 2 for classes in held)
    assert set().union(*held) == set(range(10))
    assert [len(p) for p in parts] == [60] * 5  # each class has one holder here
    _assert_disjoint_sorted(parts, 300)


def test_cla_splits_a_shared_class_evenly_among_its_holders() -> None:
    parts = classes_per_client(LABELS, 10, 3, seed=0)  # 30 slots over 10 classes: 3 holders each

    assert all(len(set(LABELS[p].tolist())) == 3 for p in parts)
    assert [len(p) for p in parts] == [30] * 10


def test_cla_with_more_classes_than_exist_is_refused() -> None:
    with pytest.raises(DataError, match="11 distinct classes: the dataset has 10"):
        classes_per_client(LABELS, 5, 11)


def test_dirichlet_gives_every_client_at_least_min_size_samples() -> None:
    parts = dirichlet(LABELS, 8, 0.3, min_size=10, seed=2)

    assert min(len(p) for p in parts) >= 10
    _assert_disjoint_sorted(parts, 300)
    assert len(np.concatenate(parts)) == 300


def test_dirichlet_alpha_controls_label_skew() -> None:
    labels = np.repeat(np.arange(10), 200)
    skewed = dirichlet(labels, 10, 0.05, seed=0)
    uniform = dirichlet(labels, 10, 1000.0, seed=0)

    def mean_classes_over_5_percent(parts: list[np.ndarray]) -> float:
        shares = [np.bincount(labels[p], minlength=10) / len(p) for p in parts]
        return float(np.mean([(s > 0.05).sum() for s in shares]))

    assert mean_classes_over_5_percent(skewed) < 4
    assert mean_classes_over_5_percent(uniform) == 10


@pytest.mark.parametrize("alpha", [0.0, -1.0, float("nan")])
def test_dirichlet_alpha_must_be_positive(alpha: float) -> None:
    with pytest.raises(ConfigError, match="alpha must be a positive number"):
        dirichlet(LABELS, 3, alpha)


def test_more_clients_than_samples_is_refused_by_every_kind() -> None:
    for kind in ("iid", "pow", "cla", "dir"):
        with pytest.raises(DataError, match="cannot give 301 clients"):
            partition(LABELS, PartitionConfig(kind=kind, n_clients=301))


def test_unknown_partition_kind_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown partition kind"):
        partition(LABELS, PartitionConfig(kind="zipf", n_clients=3))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("kind", "zipf", "unknown partition kind 'zipf'"),
        ("n_clients", 0, "n_clients must be at least 1"),
        ("classes_per_client", 0, "classes_per_client must be at least 1"),
        ("min_size", -1, "min_size must be >= 0"),
        ("alpha", float("inf"), "alpha must be a positive number"),
        ("exponent", -0.5, "exponent must be a number >= 0"),
    ],
)
def test_a_partition_config_refuses_impossible_values_when_built(field: str, value: object, message: str) -> None:
    # a client (`client run --partitions 0`) is refused at start-up, not when it first splits its data
    with pytest.raises(ConfigError, match=message):
        PartitionConfig(**{field: value})  # type: ignore[arg-type]
