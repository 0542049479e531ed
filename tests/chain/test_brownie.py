"""`brownie compile` builds the same contracts, with the same code, as fedchain.chain.compile.

Brownie lives in its own environment (.venv-brownie, `make brownie`): its exact
pins must not enter the main one. This test installs it there when missing
(from PyPI, about a minute) and runs it with a HOME of its own, where the npm
compiler bridge is installed as ~/.solcx/solc-v0.8.37.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from fedchain.chain.compile import BRIDGE, PROJECT_ROOT, SOLC_VERSION, compile_contracts

BROWNIE = PROJECT_ROOT / ".venv-brownie" / "bin" / "brownie"
BUILD = PROJECT_ROOT / "build" / "brownie" / "contracts"


def without_metadata(code: str) -> str:
    """Runtime code without solc's CBOR metadata tail (its last 2 bytes give the tail's length)."""
    code = code.removeprefix("0x")
    return code[: -(int(code[-4:], 16) + 2) * 2]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_brownie_compile_builds_the_same_contracts(tmp_path: Path) -> None:
    if not BROWNIE.exists():
        subprocess.run(["make", "-s", "brownie"], cwd=PROJECT_ROOT, check=True, timeout=600)
    home = tmp_path / "home"
    (home / ".solcx").mkdir(parents=True)
    (home / ".solcx" / f"solc-v{SOLC_VERSION}").symlink_to(BRIDGE)
    shutil.rmtree(BUILD, ignore_errors=True)
    env = {**os.environ, "HOME": str(home)}

    result = subprocess.run(
        [str(BROWNIE), "compile"], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=800
    )

    assert result.returncode == 0, result.stdout + result.stderr
    ours = compile_contracts()
    for name in ("Treasury", "TaskRegistry", "RoundLedger", "FogAuction"):
        built = json.loads((BUILD / f"{name}.json").read_text())
        assert built["compiler"]["version"].startswith(SOLC_VERSION)
        assert sorted(map(json.dumps, built["abi"])) == sorted(map(json.dumps, ours[name].abi))
        assert without_metadata(built["deployedBytecode"]) == without_metadata(ours[name].deployed_bytecode)
