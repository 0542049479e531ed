"""Shared fixtures: one real Anvil node for the whole test session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from web3 import Web3

from fedchain.chain.node import AnvilNode


@pytest.fixture(scope="session")
def anvil() -> Iterator[AnvilNode]:
    """A local Anvil on a free port, started once per session and stopped at the end.

    Tests share it, so they must not depend on block numbers or balances other
    tests change: use fresh contracts and accounts of their own.
    """
    with AnvilNode() as node:
        yield node


@pytest.fixture(scope="session")
def w3(anvil: AnvilNode) -> Web3:
    """A web3 client connected to the session's Anvil."""
    return anvil.web3()
