"""MNIST, Fashion-MNIST and CIFAR-10 as two tensors each, read through torchvision.

A dataset is loaded once into an :class:`ImageDataset`: normalised float32
images ``[N, C, H, W]`` and int64 labels ``[N]``. Two tensors index, move to a
device and share between processes in one call each, which is what makes the
trainer fast; nothing here goes through a per-sample ``Dataset.__getitem__``.

Where the files are looked for, under the data root (``--data-root`` or the
environment variable ``FEDCHAIN_DATA_ROOT``):

* the vendored layout, the original idx files: ``<root>/mnist/*.gz`` and
  ``<root>/fashion-mnist/*.gz`` (compressed or not);
* torchvision's own layout: ``<root>/MNIST/raw/...``,
  ``<root>/FashionMNIST/raw/...``, ``<root>/cifar-10-batches-py/...``.

torchvision reads MNIST-like data only as uncompressed idx files in its own
layout, so compressed or vendored files are decompressed once into a cache
folder (``cache_dir``, else ``FEDCHAIN_CACHE_DIR``, else
``$XDG_CACHE_HOME/fedchain/datasets``); the data root itself is never written
and may be read-only. With ``download=True`` a dataset that is found nowhere
is downloaded by torchvision into the cache folder.
"""

from __future__ import annotations

import functools
import gzip
import logging
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torchvision

from fedchain.errors import DataError

log = logging.getLogger(__name__)

#: Environment variable naming the data root.
DATA_ROOT_ENV = "FEDCHAIN_DATA_ROOT"
#: Environment variable naming the cache folder for decompressed files and downloads.
CACHE_DIR_ENV = "FEDCHAIN_CACHE_DIR"


@dataclass(frozen=True)
class ImageDataset:
    """A labelled image dataset held as two tensors.

    ``images`` are normalised per channel: ``(pixel / 255 - mean) / std``.
    ``mean`` and ``std`` are kept so that pixels can be mapped back to
    ``[0, 1]`` (local privacy noise works there). Treat the tensors as
    read-only: loaders memoise datasets, and every transformation in
    :mod:`fedchain.data` returns new tensors.
    """

    name: str
    images: torch.Tensor
    labels: torch.Tensor
    num_classes: int
    mean: tuple[float, ...]
    std: tuple[float, ...]

    def __post_init__(self) -> None:
        if self.images.ndim != 4:
            raise DataError(f"{self.name}: images must be [N, C, H, W], got shape {tuple(self.images.shape)}")
        if self.labels.ndim != 1 or self.labels.shape[0] != self.images.shape[0]:
            raise DataError(
                f"{self.name}: {self.images.shape[0]} images but labels of shape {tuple(self.labels.shape)}"
            )
        if len(self.mean) != self.images.shape[1] or len(self.std) != self.images.shape[1]:
            raise DataError(f"{self.name}: mean/std need one value per channel ({self.images.shape[1]})")

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    @property
    def in_channels(self) -> int:
        """Number of image channels (1 for MNIST-like data, 3 for CIFAR-10)."""
        return int(self.images.shape[1])

    def subset(self, indices: np.ndarray | torch.Tensor | Sequence[int]) -> ImageDataset:
        """The samples at ``indices`` (a copy), e.g. one client's partition."""
        index = torch.as_tensor(np.asarray(indices, dtype=np.int64), device=self.images.device)
        return self.with_tensors(self.images.index_select(0, index), self.labels.index_select(0, index))

    def with_tensors(self, images: torch.Tensor | None = None, labels: torch.Tensor | None = None) -> ImageDataset:
        """The same dataset with ``images`` and/or ``labels`` replaced."""
        return ImageDataset(
            name=self.name,
            images=self.images if images is None else images,
            labels=self.labels if labels is None else labels,
            num_classes=self.num_classes,
            mean=self.mean,
            std=self.std,
        )

    def to(self, device: torch.device | str) -> ImageDataset:
        """The dataset on ``device`` (itself when it is there already)."""
        device = torch.device(device)
        if self.images.device == device and self.labels.device == device:
            return self
        return self.with_tensors(self.images.to(device), self.labels.to(device))

    def class_counts(self) -> torch.Tensor:
        """Samples per class, ``[num_classes]`` int64."""
        return torch.bincount(self.labels.cpu(), minlength=self.num_classes)


@dataclass(frozen=True)
class DatasetInfo:
    """What FedChain knows about one dataset: its files, shape and normalisation."""

    name: str
    #: The vendored folder name under the data root (original files), if any.
    vendored_folder: str | None
    #: torchvision's dataset class name (its folder under the root).
    torchvision_class: str
    train_files: tuple[str, ...]
    test_files: tuple[str, ...]
    num_classes: int
    mean: tuple[float, ...]
    std: tuple[float, ...]


_MNIST_TRAIN = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte")
_MNIST_TEST = ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")

#: Known datasets by canonical name. Means and standard deviations are the
#: usual per-channel statistics of each training set.
DATASETS: dict[str, DatasetInfo] = {
    "mnist": DatasetInfo("mnist", "mnist", "MNIST", _MNIST_TRAIN, _MNIST_TEST, 10, (0.1307,), (0.3081,)),
    "fashion-mnist": DatasetInfo(
        "fashion-mnist", "fashion-mnist", "FashionMNIST", _MNIST_TRAIN, _MNIST_TEST, 10, (0.2860,), (0.3530,)
    ),
    "cifar10": DatasetInfo(
        "cifar10",
        None,
        "cifar-10-batches-py",
        (*tuple(f"data_batch_{i}" for i in range(1, 6)), "batches.meta"),
        ("test_batch", "batches.meta"),
        10,
        (0.4914, 0.4822, 0.4465),
        (0.2470, 0.2435, 0.2616),
    ),
}

_ALIASES = {
    "fashion_mnist": "fashion-mnist",
    "fmnist": "fashion-mnist",
    "fashionmnist": "fashion-mnist",
    "cifar-10": "cifar10",
    "cifar_10": "cifar10",
}


def dataset_info(name: str) -> DatasetInfo:
    """The :class:`DatasetInfo` of ``name`` (case-insensitive, common aliases accepted)."""
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key not in DATASETS:
        raise DataError(f"unknown dataset {name!r}", hint=f"use one of: {', '.join(DATASETS)}")
    return DATASETS[key]


def resolve_data_root(root: str | os.PathLike[str] | None = None) -> Path:
    """The data root: ``root`` if given, else ``$FEDCHAIN_DATA_ROOT``; it must be a folder."""
    if root is None:
        env = os.environ.get(DATA_ROOT_ENV)
        if not env:
            raise DataError(
                f"no data root given and {DATA_ROOT_ENV} is not set",
                hint=f"pass --data-root DIR or export {DATA_ROOT_ENV}=DIR (a folder holding mnist/, fashion-mnist/, ...)",
            )
        root = env
    path = Path(root).expanduser()
    if not path.is_dir():
        raise DataError(f"data root {path} is not a folder")
    return path


def default_cache_dir() -> Path:
    """Where decompressed files and downloads go: ``$FEDCHAIN_CACHE_DIR`` or the user cache."""
    env = os.environ.get(CACHE_DIR_ENV)
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "fedchain" / "datasets"


def load_dataset(
    name: str,
    *,
    train: bool = True,
    root: str | os.PathLike[str] | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    download: bool = False,
) -> ImageDataset:
    """Load the training (or test) split of ``name`` as an :class:`ImageDataset`.

    Results are memoised per process (datasets are read-only), so calling it
    every round costs nothing after the first time.

    Raises:
        DataError: unknown dataset, no data root, or the files are missing
            (the message names the folders searched and the files expected).
    """
    info = dataset_info(name)
    data_root = None if (root is None and download and not os.environ.get(DATA_ROOT_ENV)) else resolve_data_root(root)
    cache = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    return _load_cached(info.name, train, data_root, cache, download)


@functools.lru_cache(maxsize=8)
def _load_cached(name: str, train: bool, root: Path | None, cache: Path, download: bool) -> ImageDataset:
    info = DATASETS[name]
    if name == "cifar10":
        images, labels = _read_cifar10(info, train, root, cache, download)
    else:
        images, labels = _read_mnist_like(info, train, root, cache, download)
    mean = torch.tensor(info.mean).view(1, -1, 1, 1)
    std = torch.tensor(info.std).view(1, -1, 1, 1)
    normalised = (images.to(torch.float32).div_(255.0) - mean).div_(std).contiguous()
    log.info("loaded %s (%s): %d samples", name, "train" if train else "test", labels.shape[0])
    return ImageDataset(name, normalised, labels.to(torch.int64), info.num_classes, info.mean, info.std)


def _missing(info: DatasetInfo, files: Sequence[str], searched: Sequence[Path]) -> DataError:
    folders = ", ".join(str(p) for p in searched) or "(none)"
    return DataError(
        f"{info.name}: files not found; searched {folders} for {', '.join(files)} (or the same with .gz)",
        hint=(
            "put the original files in <data-root>/"
            f"{info.vendored_folder or info.torchvision_class}/ (or torchvision's layout), "
            "or pass --download on a machine with internet access"
        ),
    )


def _read_mnist_like(
    info: DatasetInfo, train: bool, root: Path | None, cache: Path, download: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    # torchvision insists on both splits being present, whichever it reads.
    files = info.train_files + info.test_files
    tv_class = getattr(torchvision.datasets, info.torchvision_class)
    candidates: list[Path] = []
    if root is not None:
        if info.vendored_folder:
            candidates.append(root / info.vendored_folder)
        candidates.append(root / info.torchvision_class / "raw")
    tv_raw = cache / info.torchvision_class / "raw"
    if root is None:
        # Only without a data root do earlier downloads in the cache count as the source:
        # a data root that lacks the files is a mistake to report, not to paper over.
        candidates.append(tv_raw)
    for folder in candidates:
        if all((folder / f).is_file() for f in files) and folder.name == "raw":
            tv_root = folder.parent.parent
            return _torchvision_mnist(tv_class, tv_root, train)
        if all((folder / f).is_file() or (folder / f"{f}.gz").is_file() for f in files):
            for f in files:
                _materialise(folder, f, tv_raw)
            return _torchvision_mnist(tv_class, cache, train)
    if download:
        log.info("downloading %s into %s", info.name, cache)
        try:
            tv_class(root=str(cache), train=train, download=True)
        except Exception as err:  # torchvision raises RuntimeError/URLError/OSError
            raise DataError(f"{info.name}: download failed: {err}", hint="check the internet connection") from err
        return _torchvision_mnist(tv_class, cache, train)
    raise _missing(info, files, candidates)


def _torchvision_mnist(tv_class: type, tv_root: Path, train: bool) -> tuple[torch.Tensor, torch.Tensor]:
    dataset = tv_class(root=str(tv_root), train=train, download=False)
    return dataset.data.unsqueeze(1), dataset.targets


def _materialise(folder: Path, name: str, target: Path) -> None:
    """Put ``folder/name`` (decompressed from ``name.gz`` if needed) at ``target/name``, atomically."""
    destination = target / name
    if destination.is_file():
        return
    target.mkdir(parents=True, exist_ok=True)
    source = folder / name
    opener = open if source.is_file() else gzip.open
    if not source.is_file():
        source = folder / f"{name}.gz"
    handle, tmp = tempfile.mkstemp(dir=target, prefix=f".{name}.")
    try:
        with os.fdopen(handle, "wb") as out, opener(source, "rb") as src:
            shutil.copyfileobj(src, out, length=1 << 20)
        os.replace(tmp, destination)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    log.debug("prepared %s from %s", destination, source)


class _PresentCIFAR10(torchvision.datasets.CIFAR10):
    """torchvision's CIFAR-10 reader that checks the batch files are present, not their MD5.

    torchvision verifies MD5s when it downloads; a copy put in place by hand is
    checked for presence, and its arrays for shape when read.
    """

    def _check_integrity(self) -> bool:
        folder = Path(self.root) / self.base_folder
        return all((folder / name).is_file() for name, _ in self.train_list + self.test_list)

    def _load_meta(self) -> None:
        self.classes = [str(i) for i in range(10)]
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}


def _read_cifar10(
    info: DatasetInfo, train: bool, root: Path | None, cache: Path, download: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    all_files = tuple(n for n, _ in _PresentCIFAR10.train_list + _PresentCIFAR10.test_list)
    # As for MNIST: the cache is a source (earlier downloads) only when no data root is given.
    sources = (root,) if root is not None else (cache,)
    searched = [r / info.torchvision_class for r in sources]
    for base in sources:
        if all((base / info.torchvision_class / f).is_file() for f in all_files):
            break
    else:
        if not download:
            raise _missing(info, all_files, searched)
        log.info("downloading cifar10 into %s", cache)
        try:
            torchvision.datasets.CIFAR10(root=str(cache), train=train, download=True)
        except Exception as err:
            raise DataError(f"cifar10: download failed: {err}", hint="check the internet connection") from err
        base = cache
    try:
        dataset = _PresentCIFAR10(root=str(base), train=train, download=False)
    except (KeyError, ValueError, EOFError) as err:
        raise DataError(f"cifar10: the batch files in {base / info.torchvision_class} are malformed: {err}") from err
    images = torch.from_numpy(np.ascontiguousarray(dataset.data)).permute(0, 3, 1, 2)
    return images, torch.as_tensor(dataset.targets, dtype=torch.int64)
