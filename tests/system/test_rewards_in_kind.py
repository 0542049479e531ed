"""End to end: a fedave task on a chain with 2 s blocks pays rewards in kind that clients prove and the audit checks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fedchain.audit import CheckName
from fedchain.chain.keys import PRIVATE_KEY_ENV
from fedchain.chain.node import AnvilNode, AnvilSettings
from fedchain.store import open_store
from fedchain.store.digest import keccak256
from tests.system.test_demo import DEMO_TIMEOUT_S

#: A small fedave demo: 2 clients, 2 fog nodes (fog 0 a free rider), 2 rounds, few samples.
DEMO_ARGS = (
    "--strategy", "fedave", "--clients", "2", "--fogs", "2", "--rounds", "2", "--samples-per-client", "24",
    "--auction-duration", "10", "--round-duration", "60", "--no-verify-scores",
)  # fmt: skip


def fedchain(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fedchain.cli", *args], env=env, capture_output=True, text=True, timeout=DEMO_TIMEOUT_S
    )


@pytest.fixture
def l2_chain() -> Iterator[AnvilNode]:
    """An Anvil of this test's own that mines a block every 2 s, as an L2 (it outlives the demo, for the commands)."""
    with AnvilNode(AnvilSettings(block_time=2)) as node:
        yield node


@pytest.mark.slow
def test_a_fedave_task_commits_rewards_that_the_client_verifies_and_the_audit_checks(
    l2_chain: AnvilNode, data_root: Path, tmp_path: Path
) -> None:
    # prepare: a fedave task run end to end as separate processes on a chain that mines every 2 s
    run_dir = tmp_path / "demo"
    env = {**os.environ, PRIVATE_KEY_ENV: "0x" + l2_chain.dev_account(0).key.hex()}
    demo = fedchain(
        "demo", "--rpc-url", l2_chain.rpc_url, "--run-dir", str(run_dir), "--data-root", str(data_root), *DEMO_ARGS,
        env=env,
    )
    assert demo.returncode == 0, f"demo failed:\n{demo.stdout[-4000:]}\n{demo.stderr[-4000:]}"
    chain = ("--deployment", str(run_dir / "deployment.json"), "--store", str(run_dir / "store"))
    report = json.loads((run_dir / "audit.json").read_text())
    survivor = next(c for c in report["clients"] if c["status"] == "active")
    # the client processes are named in start order, not by their index in the task
    states = {path: json.loads(path.read_text()) for path in (run_dir / "state").glob("client-*.json")}
    path, state = next((p, s) for p, s in states.items() if s["data"]["client_index"] == survivor["index"])

    # execute: the client's reward command, then the audit with the scores and rewards reproduced
    shown = fedchain(
        "client",
        "reward",
        "--task",
        "1",
        "--client",
        survivor["account"],
        "--accuracy",
        "--data-root",
        str(data_root),
        "--save",
        str(tmp_path / "mine.safetensors"),
        *chain,
    )
    audit = fedchain("audit", "--task", "1", "--json", "--verify-scores", "--data-root", str(data_root), *chain)

    # assert: the client agent proved both rounds' rewards and kept the last; the command shows and saves it
    assert sorted(state["data"]["rewards"]) == ["1", "2"]
    final = state["data"]["final_reward"]
    assert state["data"]["rewards"]["2"] == final
    kept = path.with_name(path.stem + "-reward.safetensors")
    assert "0x" + keccak256(kept.read_bytes()).hex() == final
    assert shown.returncode == 0, f"client reward failed:\n{shown.stdout}\n{shown.stderr}"
    lines = shown.stdout.splitlines()
    assert lines[0].startswith("round 1 ") and lines[1].startswith(f"round 2  reward {final}")
    assert all("verified on chain: yes" in line and "accuracy" in line for line in lines[:2])
    assert keccak256((tmp_path / "mine.safetensors").read_bytes()) == bytes.fromhex(final[2:])
    # and the audit passes every check, the rewards rebuilt from the store and reproduced from the updates
    assert audit.returncode == 0, f"audit failed:\n{audit.stdout[-4000:]}\n{audit.stderr[-4000:]}"
    checks = {check["name"]: check for check in json.loads(audit.stdout)["checks"]}
    assert {name: check["status"] for name, check in checks.items()} == {name.value: "pass" for name in CheckName}

    # execute: someone alters the kept reward in the store
    path = Path(open_store(str(run_dir / "store")).path_of(final))
    path.chmod(0o644)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    tampered = fedchain("audit", "--task", "1", "--json", *chain)
    refused = fedchain(
        "client",
        "reward",
        "--task",
        "1",
        "--round",
        "2",
        "--client",
        survivor["account"],
        "--accuracy",
        "--data-root",
        str(data_root),
        *chain,
    )

    # assert: the audit fails on the rewards check, naming the round and client; the client command refuses it
    assert tampered.returncode != 0
    checks = {check["name"]: check for check in json.loads(tampered.stdout)["checks"]}
    assert checks[CheckName.STORE_REWARDS.value]["status"] == "fail"
    assert any(
        f"round 2 client {survivor['index']}" in f["message"] for f in checks[CheckName.STORE_REWARDS.value]["findings"]
    )
    assert refused.returncode != 0 and "hint:" in refused.stderr + refused.stdout
