"""End to end: `fedchain demo` runs a whole task as separate processes on a real chain, then the audit passes."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fedchain.agent.session import read_session
from fedchain.audit import CheckName
from fedchain.chain.keys import PRIVATE_KEY_ENV
from fedchain.chain.node import AnvilNode, AnvilSettings
from tests.system.conftest import FUNDER

#: A small demo: 2 clients (12 and 36 samples), 2 fog nodes (one a free rider), 2 rounds.
DEMO_ARGS = (
    "--clients",
    "2",
    "--fogs",
    "2",
    "--rounds",
    "2",
    "--samples-per-client",
    "24",
    "--auction-duration",
    "10",
    "--round-duration",
    "60",
    "--no-verify-scores",
)
#: The most a small demo may take on a busy 2-core machine (process start-up dominates).
DEMO_TIMEOUT_S = 480


def fedchain(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fedchain.cli", *args], env=env, capture_output=True, text=True, timeout=DEMO_TIMEOUT_S
    )


def demo_on_chain(anvil: AnvilNode, run_dir: Path, data_root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``fedchain demo`` on the session's chain, funded by one test key (as with --rpc-url on any chain)."""
    env = {**os.environ, PRIVATE_KEY_ENV: "0x" + anvil.dev_account(FUNDER).key.hex()}
    return fedchain(
        "demo", "--rpc-url", anvil.rpc_url, "--run-dir", str(run_dir), "--data-root", str(data_root), *args, env=env
    )


@pytest.mark.slow
def test_demo_on_a_2_s_chain_with_an_s3_store_in_a_stablecoin_awards_and_trains_every_job_and_the_audit_passes(
    data_root: Path, tmp_path: Path, s3_url: str
) -> None:
    # prepare: an existing chain that mines every 2 s, as an L2 does (the demo measures it and sizes its windows);
    # every participant keeps its objects in a bucket of an S3-compatible server, reached through the AWS variables
    # (s3_url sets them); the task's money is the demo's 6-decimal stablecoin (--token), gas alone in ether
    run_dir = tmp_path / "demo-2s"
    store = ("--store", s3_url)

    with AnvilNode(AnvilSettings(block_time=2)) as chain:
        # execute: the demo, then the audit command on its own, reading every object back from the bucket
        demo = demo_on_chain(chain, run_dir, data_root, *store, "--token", *DEMO_ARGS)
        audit = fedchain("audit", "--task", "1", "--deployment", str(run_dir / "deployment.json"), *store, "--json")
        treasury = read_session(run_dir / "deployment.json", chain.rpc_url, "memory://").contracts
        ether_totals = treasury.treasury.totals()
        token = treasury.treasury.token_of(1)
        token_totals = treasury.treasury.totals_in(token)

    # assert: the audit passed; every job got a bid and was awarded; the free rider's client challenged its fog node,
    # the committee upheld, fog 0 was slashed and the client stayed in; both clients were trained in both rounds
    assert demo.returncode == 0, f"demo failed:\n{demo.stdout[-4000:]}\n{demo.stderr[-4000:]}"
    assert "a block every 2 s" in demo.stdout and "PASSED" in demo.stdout
    # every payment was in fcUSD: 100 fcUSD of budget (6 decimals), not a wei of ether through the Treasury, and
    # every unit that came in went out again (the audit's per-asset checks passed as well)
    assert "demo stablecoin fcUSD" in demo.stdout and "clients (fcUSD" in demo.stdout
    assert ether_totals.deposited == 0 and int(token, 16) != 0
    assert token_totals.deposited == token_totals.withdrawn + token_totals.held + token_totals.claimable > 0
    # the clients joined in one transaction each, with an EIP-2612 permit instead of an approval
    assert all("joining with a permit" in path.read_text() for path in (run_dir / "logs").glob("client-*.log"))
    report = json.loads((run_dir / "audit.json").read_text())
    assert int(report["task"]["budget"]) == 100 * 10**6
    assert report["passed"] is True and report["task"]["status"] == "Settled"
    assert [a["closed"] and a["winner"] is not None for a in report["auctions"]] == [True, True]
    assert [c["status"] for c in report["clients"]] == ["active", "active"]
    assert {(c["round"], c["client_index"]) for c in report["commits"]} == {(1, 0), (1, 1), (2, 0), (2, 1)}
    assert [(s["kind"]) for s in report["slashes"]] == ["fraud"]
    assert {(c["kind"], c["status"]) for c in report["challenges"]} == {("fog", "upheld")}
    # the objects went to the bucket, not the run folder, and the audit read each of them back intact
    assert not (run_dir / "store").exists()
    assert audit.returncode == 0, f"audit failed:\n{audit.stdout[-4000:]}\n{audit.stderr[-4000:]}"
    checks = {check["name"]: check for check in json.loads(audit.stdout)["checks"]}
    assert all(checks[name.value]["status"] == "pass" for name in (CheckName.STORE_UPDATES, CheckName.STORE_MODELS))


@pytest.mark.slow
def test_the_default_demo_catches_the_free_rider_and_the_dishonest_aggregator_and_pays_noisy_clients_less(
    anvil: AnvilNode, data_root: Path, tmp_path: Path
) -> None:
    # prepare: the default cast (5 clients of 500-1500 samples, the odd ones with 50% noisy labels; fog 0 a free
    # rider serving the smallest) with the dishonest aggregator, on the session's chain (as with --rpc-url anywhere)
    run_dir = tmp_path / "demo"

    # execute: the demo, then the audit command on the task it ran, with every check asked for
    demo = demo_on_chain(anvil, run_dir, data_root, "--dishonest-aggregator", "--no-verify-scores")
    audit = fedchain(
        "audit",
        "--task",
        "1",
        "--deployment",
        str(run_dir / "deployment.json"),
        "--store",
        str(run_dir / "store"),
        "--json",
        "--verify-scores",
        "--data-root",
        str(data_root),
    )

    # assert: the demo finished with its verdict; every participant ran as its own process with its own log
    assert demo.returncode == 0, f"demo failed:\n{demo.stdout[-4000:]}\n{demo.stderr[-4000:]}"
    assert "task 1: clients" in demo.stdout and "fog nodes" in demo.stdout and "challenges and verdicts" in demo.stdout
    assert "audit of task 1" in demo.stdout and "PASSED" in demo.stdout
    logs = sorted(path.name for path in (run_dir / "logs").iterdir())
    assert logs == [
        "aggregator.log",
        *(f"client-{i}.log" for i in range(5)),
        *(f"fog-{i}.log" for i in range(3)),
        *(f"verifier-{i}.log" for i in range(3)),
    ]
    # the independent audit passes every check, scores reproduced included (the zeroed entry as corrected)
    assert audit.returncode == 0, f"audit failed:\n{audit.stdout[-4000:]}\n{audit.stderr[-4000:]}"
    report = json.loads(audit.stdout)
    assert report["passed"] is True
    assert {check["name"]: check["status"] for check in report["checks"]} == {name.value: "pass" for name in CheckName}
    assert report["task"]["status"] == "Settled" and [r["round"] for r in report["rounds"]] == [1, 2, 3]
    clients = {c["data_size"]: c for c in report["clients"]}
    paid = {size: int(c["earned"]) + int(c["bonus"] or 0) for size, c in clients.items()}
    # the free rider: caught by its client's re-execution, slashed; its client keeps its deposit, its job moves on
    small = clients[500]
    assert small["status"] == "active" and int(small["deposit_returned"]) == 10**16
    fraud = [s for s in report["slashes"] if s["kind"] == "fraud"]
    assert len(fraud) == 1 and fraud[0]["client_index"] == small["index"]
    # a commit is final: the job moves on from the round after the free rider's last commit, which depends on how
    # far it got before the verdict landed; when that was the last round, nothing is left to re-award
    successor = [
        c["round"] for c in report["commits"] if c["client_index"] == small["index"] and c["fog"] != fraud[0]["fog"]
    ]
    rider = [
        c["round"] for c in report["commits"] if c["client_index"] == small["index"] and c["fog"] == fraud[0]["fog"]
    ]
    assert fraud[0]["from_round"] == max(rider) + 1
    assert successor == list(range(fraud[0]["from_round"], 4))
    # the dishonest aggregator zeroed the clean client of 1500 samples in round 1: it challenged, was upheld, and is
    # paid as if scored honestly (more than either noisy client), deposit back; the aggregator's bond lost one entry
    # slash (topped up again if the aggregator posted after the verdict)
    zeroed = clients[1500]
    entry = [c for c in report["challenges"] if c["kind"] == "entry" and c["client_index"] == zeroed["index"]]
    assert entry and {(c["status"], c["fate"]) for c in entry} == {("upheld", "corrected")}
    assert zeroed["status"] == "active" and int(zeroed["deposit_returned"]) == 10**16
    task = report["task"]
    slash = int(task["bond"]) // task["params"]["max_clients"]
    assert int(task["bond_returned"]) == int(task["bond"]) - slash + int(task["bond_topped_up"])
    # the incentive the demo is there to show: noisy clients are paid less than clean ones; no forfeit to the publisher
    noisy, clean = (paid[750], paid[1250]), (paid[1000], paid[1500])
    assert max(noisy) < min(clean)
    accounts = {a["account"]: a for a in report["accounts"]}
    assert set(accounts[report["task"]["publisher"]]["credited"]) == {"BUDGET_REFUND"}
    assert {"FOG_SLASH", "BOND_SLASH"} <= set(report["sink"]["credited"])


def processes_mentioning(text: str) -> list[str]:
    """Command lines of the running processes that contain ``text``."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            line = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # the process ended meanwhile
            continue
        if text in line:
            found.append(line)
    return found


@pytest.mark.slow
def test_sigterm_stops_the_demo_its_local_chain_and_every_process_it_started(data_root: Path, tmp_path: Path) -> None:
    # prepare: the default path, a local Anvil of the demo's own; wait until its fog node runs
    run_dir = tmp_path / "demo"
    command = [
        sys.executable,
        "-m",
        "fedchain.cli",
        "demo",
        "--run-dir",
        str(run_dir),
        "--data-root",
        str(data_root),
        "--clients",
        "1",
        "--fogs",
        "1",
        "--samples-per-client",
        "8",
    ]
    demo = subprocess.Popen(
        command, env={**os.environ, "PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + DEMO_TIMEOUT_S
    while not (run_dir / "state" / "fog-0.json").exists():
        assert demo.poll() is None, f"the demo ended early:\n{demo.communicate()[1][-4000:]}"
        assert time.monotonic() < deadline, "the demo's fog node never started"
        time.sleep(0.2)

    # execute
    demo.send_signal(signal.SIGTERM)
    out, err = demo.communicate(timeout=DEMO_TIMEOUT_S)

    # assert: the demo unwound as on Ctrl-C; the fog node stopped cleanly; no process of the run and no chain is left
    assert demo.returncode == 130, err[-4000:]  # the status of an interrupted command
    assert "stopped agent=fog-0" in (run_dir / "logs" / "fog-0.log").read_text()
    assert processes_mentioning(str(run_dir)) == []
    port = re.search(r"Anvil at http://127\.0\.0\.1:(\d+)", out)
    assert port is not None, out
    with pytest.raises(ConnectionRefusedError):  # nothing listens where the demo's Anvil did
        socket.create_connection(("127.0.0.1", int(port.group(1))), timeout=5).close()
