"""Shared fixtures: one real Anvil node and one S3-compatible server for the whole test session."""

from __future__ import annotations

import os

# The suite runs several torch processes at once on few cores (pytest-xdist's workers, each system test's agents).
# OpenMP's threads spin while they wait for work by default, and a spinning thread takes the core another process
# needs: passive waiting halves the time of three concurrent trainings on 2 cores. Set before torch is loaded;
# every process a test starts inherits it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import uuid
from collections.abc import Iterator

import pytest
from web3 import Web3

from fedchain.chain.node import AnvilNode
from tests.s3server import S3Server


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


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """An S3-compatible server (moto's) on loopback, started once per session."""
    with S3Server() as server:
        yield server


@pytest.fixture
def s3_url(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> str:
    """``s3://BUCKET/prefix`` in a fresh bucket of the session's S3 server, with this process's AWS variables
    pointing at it (as a user's would at AWS or MinIO)."""
    for name, value in s3_server.environment().items():
        monkeypatch.setenv(name, value)
    bucket = f"fedchain-{uuid.uuid4().hex[:12]}"
    s3_server.create_bucket(bucket)
    return f"s3://{bucket}/prefix"
