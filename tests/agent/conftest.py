"""Fixtures of the agent tests: an Anvil of their own, whose block numbers no other test moves."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from web3 import Web3

from fedchain.chain.node import AnvilNode


@pytest.fixture(scope="package")
def node() -> Iterator[AnvilNode]:
    with AnvilNode() as anvil:
        yield anvil


@pytest.fixture(scope="package")
def chain(node: AnvilNode) -> Web3:
    return node.web3()
