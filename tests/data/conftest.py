"""Real datasets for the tests: read from FEDCHAIN_DATA_ROOT, prepared once per session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fedchain.data import DATA_ROOT_ENV, ImageDataset, load_dataset


@pytest.fixture(scope="session")
def data_root() -> Path:
    """The data root holding mnist/ and fashion-mnist/; the tests fail, clearly, without it."""
    value = os.environ.get(DATA_ROOT_ENV)
    if not value:
        pytest.fail(
            f"{DATA_ROOT_ENV} is not set: export {DATA_ROOT_ENV}=<folder holding mnist/ and fashion-mnist/> "
            "(`make test` sets it to the project's vendored shared/data)"
        )
    return Path(value)


@pytest.fixture(scope="session")
def dataset_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache folder of the test session (torchvision's layout is prepared there, not in the user's cache)."""
    return tmp_path_factory.mktemp("dataset-cache")


@pytest.fixture(scope="session")
def mnist_test(data_root: Path, dataset_cache: Path) -> ImageDataset:
    """Real MNIST, test split (10,000 images)."""
    return load_dataset("mnist", train=False, root=data_root, cache_dir=dataset_cache)
