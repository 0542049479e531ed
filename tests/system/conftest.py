"""The system tests run real processes on the session's shared Anvil (tests/conftest.py).

Each run deploys its own contracts, so it shares nothing with other tests but
the node. One public test account funds it; every participant signs with a key
derived from that account and the run's deployment
(:func:`fedchain.system.participant_account`). The participants read real MNIST
from the data tests' ``data_root`` (FEDCHAIN_DATA_ROOT).
"""

from __future__ import annotations

from tests.data.conftest import data_root  # noqa: F401

#: The shared Anvil's test account that deploys and funds the system runs (the last of its 20).
FUNDER = 19
