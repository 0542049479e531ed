"""Fixtures of the chain layer's tests: the Probe test contract, compiled once."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedchain.chain.compile import PROJECT_ROOT, Artifact, compile_contracts

PROBE_SOURCES = Path(__file__).with_name("contracts")


@pytest.fixture(scope="session")
def probe_artifact() -> Artifact:
    """The Probe contract (custom errors, events, a struct), compiled and cached under build/."""
    return compile_contracts(PROBE_SOURCES, PROJECT_ROOT / "build" / "test-contracts")["Probe"]
