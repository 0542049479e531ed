"""Datasets, partitions, client faults and local privacy noise.

Datasets are two tensors (:class:`ImageDataset`); partitions are index arrays;
faults and noise are pure functions returning new tensors.
"""

from fedchain.data.datasets import (
    CACHE_DIR_ENV,
    DATA_ROOT_ENV,
    DATASETS,
    DatasetInfo,
    ImageDataset,
    dataset_info,
    default_cache_dir,
    load_dataset,
    resolve_data_root,
)
from fedchain.data.faults import (
    flip_labels,
    flip_sign,
    free_ride,
    noise_of_norm,
    noisy_labels,
    scale_update,
    sybil_update,
)
from fedchain.data.partition import (
    PartitionConfig,
    classes_per_client,
    dirichlet,
    iid,
    partition,
    power_law,
    power_law_sizes,
)
from fedchain.data.privacy import noise_scale, privatise

__all__ = [
    "CACHE_DIR_ENV",
    "DATASETS",
    "DATA_ROOT_ENV",
    "DatasetInfo",
    "ImageDataset",
    "PartitionConfig",
    "classes_per_client",
    "dataset_info",
    "default_cache_dir",
    "dirichlet",
    "flip_labels",
    "flip_sign",
    "free_ride",
    "iid",
    "load_dataset",
    "noise_of_norm",
    "noise_scale",
    "noisy_labels",
    "partition",
    "power_law",
    "power_law_sizes",
    "privatise",
    "resolve_data_root",
    "scale_update",
    "sybil_update",
]
