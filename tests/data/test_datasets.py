"""Datasets load from the vendored files, torchvision's layout and CIFAR-10's own format."""

from __future__ import annotations

import os
import pickle
import stat
from pathlib import Path

import numpy as np
import pytest
import torch

from fedchain.data import DATA_ROOT_ENV, ImageDataset, load_dataset
from fedchain.errors import DataError

#: Class counts of the MNIST test split (the dataset's README).
MNIST_TEST_COUNTS = [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]


def _pixels(dataset: ImageDataset) -> torch.Tensor:
    mean = torch.tensor(dataset.mean).view(1, -1, 1, 1)
    std = torch.tensor(dataset.std).view(1, -1, 1, 1)
    return (dataset.images * std + mean) * 255.0


def test_mnist_test_split_loads_as_normalised_tensors_with_the_published_class_counts(mnist_test: ImageDataset) -> None:
    assert mnist_test.images.shape == (10000, 1, 28, 28)
    assert mnist_test.images.dtype == torch.float32 and mnist_test.labels.dtype == torch.int64
    assert mnist_test.class_counts().tolist() == MNIST_TEST_COUNTS
    assert mnist_test.labels[:3].tolist() == [7, 2, 1]  # the famous first test digits
    pixels = _pixels(mnist_test)
    assert torch.allclose(pixels, pixels.round(), atol=1e-3)  # exactly the original bytes, rescaled
    assert pixels.min() >= -1e-3 and pixels.max() <= 255 + 1e-3
    assert abs(float(mnist_test.images.mean())) < 0.05 and abs(float(mnist_test.images.std()) - 1) < 0.05


def test_fashion_mnist_test_split_has_1000_images_per_class(data_root: Path, dataset_cache: Path) -> None:
    dataset = load_dataset("fashion-mnist", train=False, root=data_root, cache_dir=dataset_cache)

    assert dataset.images.shape == (10000, 1, 28, 28)
    assert dataset.class_counts().tolist() == [1000] * 10
    assert dataset.labels[0].item() == 9  # the first test image is an ankle boot


def test_loading_from_a_read_only_root_writes_only_into_the_cache(data_root: Path, tmp_path: Path) -> None:
    root = tmp_path / "readonly"
    (root / "mnist").mkdir(parents=True)
    for source in (data_root / "mnist").glob("*.gz"):
        (root / "mnist" / source.name).symlink_to(source)
    os.chmod(root / "mnist", stat.S_IRUSR | stat.S_IXUSR)
    os.chmod(root, stat.S_IRUSR | stat.S_IXUSR)
    cache = tmp_path / "cache"
    try:
        dataset = load_dataset("mnist", train=False, root=root, cache_dir=cache)
    finally:
        os.chmod(root, stat.S_IRWXU)
        os.chmod(root / "mnist", stat.S_IRWXU)

    assert len(dataset) == 10000
    assert sorted(p.name for p in root.iterdir()) == ["mnist"]
    assert (cache / "MNIST" / "raw" / "t10k-images-idx3-ubyte").is_file()


def test_torchvision_layout_under_the_root_is_read_directly(
    mnist_test: ImageDataset, dataset_cache: Path, tmp_path: Path
) -> None:
    raw = tmp_path / "root" / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for prepared in (dataset_cache / "MNIST" / "raw").iterdir():
        (raw / prepared.name).symlink_to(prepared)
    empty_cache = tmp_path / "cache"

    dataset = load_dataset("mnist", train=False, root=tmp_path / "root", cache_dir=empty_cache)

    assert torch.equal(dataset.images, mnist_test.images) and torch.equal(dataset.labels, mnist_test.labels)
    assert not empty_cache.exists()


def test_missing_files_name_the_folders_searched_and_the_files_expected(tmp_path: Path) -> None:
    with pytest.raises(DataError) as caught:
        load_dataset("fashion-mnist", root=tmp_path, cache_dir=tmp_path / "cache")

    message = str(caught.value)
    assert str(tmp_path / "fashion-mnist") in message
    assert "train-images-idx3-ubyte" in message and "hint:" in message


def test_a_data_root_without_the_files_is_refused_even_when_the_cache_holds_them(
    mnist_test: ImageDataset, dataset_cache: Path, tmp_path: Path
) -> None:
    # mnist_test prepared torchvision's layout in dataset_cache; an empty root must still be an error.
    empty_root = tmp_path / "empty-root"
    empty_root.mkdir()

    with pytest.raises(DataError, match="files not found"):
        load_dataset("mnist", train=False, root=empty_root, cache_dir=dataset_cache)


def test_no_data_root_says_how_to_set_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DATA_ROOT_ENV, raising=False)

    with pytest.raises(DataError, match=DATA_ROOT_ENV):
        load_dataset("mnist")


def test_unknown_dataset_lists_the_known_ones(data_root: Path) -> None:
    with pytest.raises(DataError, match="unknown dataset 'imagenet'") as caught:
        load_dataset("imagenet", root=data_root)
    assert "cifar10" in caught.value.hint


def _write_cifar_batch(path: Path, images: np.ndarray, labels: list[int]) -> None:
    # CIFAR-10's python format: a pickled dict whose 'data' rows are 1024 red,
    # 1024 green, 1024 blue bytes (each plane row-major) and 'labels' a list.
    # Writing the dataset's own format is the one place pickle belongs.
    with path.open("wb") as handle:
        pickle.dump({"data": images.reshape(len(labels), 3 * 32 * 32), "labels": labels}, handle)


def test_cifar10_reads_batches_in_the_real_python_format(tmp_path: Path) -> None:
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    rng = np.random.default_rng(0)
    train = rng.integers(0, 256, size=(5, 2, 3, 32, 32), dtype=np.uint8)
    train[0, 0, 0, 1, 2] = 200  # red plane, row 1, column 2 of the very first image
    train[0, 0, 2, 31, 31] = 7  # blue plane, last pixel
    for batch in range(5):
        _write_cifar_batch(folder / f"data_batch_{batch + 1}", train[batch], [batch * 2, batch * 2 + 1])
    _write_cifar_batch(folder / "test_batch", rng.integers(0, 256, size=(3, 3, 32, 32), dtype=np.uint8), [4, 4, 9])
    with (folder / "batches.meta").open("wb") as handle:
        pickle.dump({"label_names": [f"class{i}" for i in range(10)]}, handle)

    train_set = load_dataset("cifar10", root=tmp_path, cache_dir=tmp_path / "cache")
    test_set = load_dataset("cifar10", train=False, root=tmp_path, cache_dir=tmp_path / "cache")

    assert train_set.images.shape == (10, 3, 32, 32) and train_set.labels.tolist() == list(range(10))
    assert test_set.labels.tolist() == [4, 4, 9]
    pixels = _pixels(train_set)
    assert pixels[0, 0, 1, 2].item() == pytest.approx(200, abs=1e-3)
    assert pixels[0, 2, 31, 31].item() == pytest.approx(7, abs=1e-3)
    assert torch.allclose(pixels.reshape(5, 2, 3, 32, 32), torch.from_numpy(train).float(), atol=1e-3)


def test_cifar10_with_a_missing_batch_names_it(tmp_path: Path) -> None:
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    (folder / "data_batch_1").write_bytes(b"")

    with pytest.raises(DataError, match="data_batch_2"):
        load_dataset("cifar10", root=tmp_path, cache_dir=tmp_path / "cache")


def test_subset_copies_the_chosen_samples(mnist_test: ImageDataset) -> None:
    part = mnist_test.subset(np.array([2, 0]))

    assert part.labels.tolist() == [1, 7]
    assert torch.equal(part.images[1], mnist_test.images[0])
    assert part.images.data_ptr() != mnist_test.images.data_ptr()
