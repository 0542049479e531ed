"""The system tests run real processes on the session's shared Anvil (tests/conftest.py).

Each run deploys its own contracts, so it shares nothing with other tests but
the node. One public test account funds it; every participant signs with a key
derived from that account and the run's deployment
(:func:`fedchain.system.participant_account`).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fedchain.data import DATA_ROOT_ENV

#: The shared Anvil's test account that deploys and funds the system runs (the last of its 20).
FUNDER = 19


@pytest.fixture(scope="session")
def system_data_root() -> Path:
    """The data root (real MNIST) the participants read; the tests fail, clearly, without it."""
    value = os.environ.get(DATA_ROOT_ENV)
    if not value:
        pytest.fail(
            f"{DATA_ROOT_ENV} is not set: export {DATA_ROOT_ENV}=<folder holding mnist/> "
            "(`make test` sets it to the project's vendored shared/data)"
        )
    return Path(value)
