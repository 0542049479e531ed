"""The chain commands end to end: `fedchain chain start` stays up until Ctrl-C, `deploy` deploys the real contracts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from eth_account import Account
from eth_utils import keccak, to_checksum_address

from fedchain.chain.bindings import FedChainContracts
from fedchain.chain.deployment import load_deployment
from fedchain.chain.keys import PRIVATE_KEY_ENV
from fedchain.chain.node import connect
from fedchain.chain.recipe import DEPLOYMENT_ORDER
from fedchain.chain.tx import Transactor
from fedchain.cli import main

#: A committee of three made-up members and a made-up sink (nobody signs or withdraws here).
ARBITERS = tuple(to_checksum_address(keccak(text=f"arbiter {i}")[12:]) for i in range(3))
SINK = to_checksum_address(keccak(text="sink")[12:])


def test_chain_start_serves_until_interrupted_and_deploy_targets_it(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != PRIVATE_KEY_ENV}
    node = subprocess.Popen(
        [sys.executable, "-m", "fedchain.cli", "chain", "start", "--chain-id", "4321"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert node.stdout is not None and node.stderr is not None
        url = node.stdout.readline().strip()  # the first line is the URL
        key_line = next(line for line in node.stderr if PRIVATE_KEY_ENV in line)
        key = key_line.split("=", 1)[1].strip()
        out = tmp_path / "deployment.json"
        env[PRIVATE_KEY_ENV] = key

        # a chain that stays up needs its committee: three arbiters, a quorum of 2, a day to judge, a sink
        deployed = subprocess.run(
            [
                sys.executable,
                "-m",
                "fedchain.cli",
                "deploy",
                "--rpc-url",
                url,
                "--chain-id",
                "4321",
                "--out",
                str(out),
                *(arg for member in ARBITERS for arg in ("--arbiter", member)),
                "--quorum",
                "2",
                "--verdict-window",
                "1d",
                "--sink",
                SINK,
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )

        assert deployed.returncode == 0, deployed.stderr
        assert json.loads(deployed.stdout)["chain_id"] == 4321
        w3 = connect(url)
        deployment = load_deployment(out)
        deployment.verify(w3)
        contracts = FedChainContracts.bind(deployment, Transactor(w3, Account.from_key(key)))
        committee = contracts.arbiter_committee
        assert committee.members() == ARBITERS and committee.quorum() == 2 and committee.verdict_window() == 86_400
        assert contracts.treasury.sink() == SINK
    finally:
        node.send_signal(signal.SIGINT)
        node.wait(timeout=10)
    assert node.returncode == 0


def test_deploy_without_rpc_url_prints_the_deployment_and_says_the_chain_stopped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(PRIVATE_KEY_ENV, raising=False)
    out = tmp_path / "deployment.json"

    code = main(["deploy", "--out", str(out)])

    captured = capsys.readouterr()
    assert code == 0, captured.err
    printed = json.loads(captured.out)
    assert tuple(c["name"] for c in printed["contracts"]) == DEPLOYMENT_ORDER
    assert load_deployment(out).to_dict() == printed
    assert "local chain was stopped" in captured.err


def test_deploy_error_is_printed_with_its_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PRIVATE_KEY_ENV, "0x1234")

    code = main(["deploy", "--rpc-url", "http://127.0.0.1:1", "--out", str(tmp_path / "d.json")])

    err = capsys.readouterr().err
    assert code == 1
    assert "does not hold a private key" in err and "hint:" in err


def test_chain_roles_casts_anvils_test_accounts_as_shell_exports(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["chain", "roles", "--rpc-url", "http://127.0.0.1:9999"]) == 0

    # assert: sourced by bash, the exports give RPC and each role's key and the address of that key
    script = capsys.readouterr().out
    names = [
        "PUBLISHER",
        "AGGREGATOR",
        "ARBITER1",
        "ARBITER2",
        "ARBITER3",
        "FOG1",
        "FOG2",
        "CLIENT1",
        "CLIENT2",
        "CLIENT3",
    ]
    shown = subprocess.run(["bash", "-c", script + "\nenv"], capture_output=True, text=True, check=True).stdout
    values = dict(line.split("=", 1) for line in shown.splitlines() if "=" in line)
    assert values["RPC"] == "http://127.0.0.1:9999"
    for name in names:
        assert Account.from_key(values[f"{name}_KEY"]).address == values[name]
    assert len({values[name] for name in names}) == len(names)
