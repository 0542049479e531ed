"""Which solc compiles the contracts: py-solc-x's native binary of the pinned version, else the Node bridge."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedchain.chain.compile import BRIDGE, SOLC_VERSION, _solc_binary


def test_a_native_solc_of_the_pinned_version_is_preferred(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    native = tmp_path / f"solc-v{SOLC_VERSION}"
    native.symlink_to(BRIDGE)
    monkeypatch.setenv("SOLCX_BINARY_PATH", str(tmp_path))

    assert _solc_binary() == native


def test_without_a_native_solc_the_node_bridge_compiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "solc-v0.8.0").symlink_to(BRIDGE)  # another version does not count
    monkeypatch.setenv("SOLCX_BINARY_PATH", str(tmp_path))

    assert _solc_binary() == BRIDGE
