"""End to end on a chain with 2 s blocks: a task that pays rewards in kind, which clients prove, fog nodes train from
and the audit checks. Both tests read one run of the task (the second tampers with a copy of its store)."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from fedchain.agent.session import open_session
from fedchain.audit import CheckName, TaskHistory, audit_task
from fedchain.audit.chain import read_chain
from fedchain.audit.rewards import check_rewards, reward_events
from fedchain.chain.keys import PRIVATE_KEY_ENV
from fedchain.chain.node import AnvilNode, AnvilSettings
from fedchain.client.handoff import ExpectedJobData, fetch_job_data
from fedchain.fl.params import flatten
from fedchain.rewards import load_reward, load_reward_list
from fedchain.store import open_store
from fedchain.store.digest import keccak256
from fedchain.taskspec import load_model, load_spec, load_update
from tests.fog.test_fog_rewards import trained_from
from tests.system.test_demo import DEMO_TIMEOUT_S

#: A small demo: 2 fog nodes (fog 0 a free rider), 2 rounds, few samples.
DEMO_ARGS = (
    "--fogs", "2", "--rounds", "2", "--samples-per-client", "24",
    "--auction-duration", "10", "--round-duration", "60", "--no-verify-scores",
)  # fmt: skip


def fedchain(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fedchain.cli", *args], env=env, capture_output=True, text=True, timeout=DEMO_TIMEOUT_S
    )


@pytest.fixture(scope="module")
def l2_chain() -> Iterator[AnvilNode]:
    """An Anvil of this module's own that mines a block every 2 s, as an L2 (it outlives the demo, for the commands)."""
    with AnvilNode(AnvilSettings(block_time=2)) as node:
        yield node


@dataclasses.dataclass(frozen=True)
class RewardsRun:
    """The one task both tests read: a small fedfaim task with five clients, each training from its reward."""

    run_dir: Path
    #: The commands' chain options (deployment file and store).
    chain: tuple[str, ...]
    #: ``fedchain audit --verify-scores`` on the task, run once the demo ended.
    audit: subprocess.CompletedProcess[str]
    report: dict[str, Any]

    def survivors(self) -> list[dict[str, Any]]:
        """The clients still in the task whose round-2 entry stood on a commit: a voided entry was the free rider's
        update, and one posted uncommitted had the free rider's commit withdrawn by the fraud verdict (its job then
        starts again in round 3; contracts/README.md, "One commit per job and round")."""
        second = self.report["rounds"][1]
        fates, measurements = second["fates"], second["measurements"]
        return [
            c
            for c in self.report["clients"]
            if c["status"] == "active" and fates[c["index"]] != "void" and measurements[c["index"]]["committed"]
        ]


@pytest.fixture(scope="module")
def rewards_run(l2_chain: AnvilNode, data_root: Path, tmp_path_factory: pytest.TempPathFactory) -> RewardsRun:
    """Run the task once for the module: the demo as separate processes on the 2 s chain, then the audit with the
    scores and rewards reproduced (each client scored from its reward).

    fedfaim with five clients: some are removed in round 1 (the free rider's, and noisy ones); those that stay get
    shares of the update by reputation, so all but the best get a reward that is not the global model. (On so
    little data fedave gave quotas at or near the whole update: its rewards equalled the global model within 1e-4,
    so training from them could not be told apart from training from the global model.)"""
    run_dir = tmp_path_factory.mktemp("rewards") / "demo"
    chain = small_demo(l2_chain, data_root, run_dir, "--train-from", "reward", strategy="fedfaim", clients=5)
    audit = fedchain("audit", "--task", "1", "--json", "--verify-scores", "--data-root", str(data_root), *chain)
    return RewardsRun(run_dir, chain, audit, json.loads((run_dir / "audit.json").read_text()))


def small_demo(
    chain: AnvilNode, data_root: Path, run_dir: Path, *options: str, strategy: str, clients: int
) -> tuple[str, ...]:
    """Run the small demo of ``strategy`` and ``clients`` on ``chain`` into ``run_dir``, asserting it passed;
    the commands' chain options."""
    env = {**os.environ, PRIVATE_KEY_ENV: "0x" + chain.dev_account(0).key.hex()}
    demo = fedchain(
        "demo",
        "--rpc-url",
        chain.rpc_url,
        "--run-dir",
        str(run_dir),
        "--data-root",
        str(data_root),
        *DEMO_ARGS,
        "--strategy",
        strategy,
        "--clients",
        str(clients),
        *options,
        env=env,
    )
    assert demo.returncode == 0, f"demo failed:\n{demo.stdout[-4000:]}\n{demo.stderr[-4000:]}"
    return ("--deployment", str(run_dir / "deployment.json"), "--store", str(run_dir / "store"))


@pytest.mark.slow
def test_a_task_that_trains_from_rewards_trains_round_two_from_each_clients_proven_round_one_reward(
    rewards_run: RewardsRun,
) -> None:
    # prepare: the module's task (each client training from its reward) and its audit with every score and reward
    # reproduced
    run_dir, audit, report = rewards_run.run_dir, rewards_run.audit, rewards_run.report

    # assert: each survivor's fog node says it trained round 2 from the reward its client proved for round 1,
    # and its committed update is the training from that reward, recomputed here
    survivors = rewards_run.survivors()
    saved = [json.loads(path.read_text())["data"] for path in (run_dir / "state").glob("client-*.json")]
    states = {state["client_index"]: state for state in saved}
    fog_lines = [line for path in (run_dir / "logs").glob("fog-*.log") for line in path.read_text().splitlines()]
    session = open_session(run_dir / "deployment.json", store_url=str(run_dir / "store"), read_only=True)
    spec = load_spec(session.store, session.contracts.task_registry.params(1).dataset_id)
    global_1 = load_model(session.store, spec, report["rounds"][0]["model_hash"], task_id=1, round_number=1)
    unlike_global = 0
    assert len(survivors) >= 2
    for client in survivors:
        index, state = client["index"], states[client["index"]]
        reward_hash = state["rewards"]["1"]
        said = [
            line for line in fog_lines if "training from the client's reward" in line and f" job=1:{index} " in line
        ]
        assert said and all(" round=2 " in line and line.endswith(f"reward={reward_hash}") for line in said)
        job = session.contracts.fog_auction.job(1, index)
        assert job.paid_up_to == 2
        update = load_update(
            session.store,
            spec,
            job.update_hash,
            task_id=1,
            round_number=2,
            client_index=index,
            client=client["account"],
            data_size=job.data_size,
        )
        data = fetch_job_data(
            session.store,
            state["data_hash"],
            ExpectedJobData(1, index, job.data_size, spec.num_classes, spec.in_channels),
        )
        reward = load_reward(
            session.store, spec, reward_hash, task_id=1, round_number=1, client_index=index, client=client["account"]
        )
        committed = flatten(update.params, spec.param_spec())[0]
        torch.testing.assert_close(committed, trained_from(spec, reward, data, index), rtol=1e-4, atol=1e-5)
        # a reward that differs from the global model only in a few tiny entries trains to the same update
        # within the tolerance: count the clients whose two starts give updates that can be told apart
        if not torch.allclose(committed, trained_from(spec, global_1, data, index), rtol=1e-4, atol=1e-5):
            unlike_global += 1
    assert unlike_global >= 1  # some client's round 2 is the training from its reward, not from the global model
    # and the audit reproduced every score and reward from those starts
    assert audit.returncode == 0, f"audit failed:\n{audit.stdout[-4000:]}\n{audit.stderr[-4000:]}"
    checks = {check["name"]: check["status"] for check in json.loads(audit.stdout)["checks"]}
    assert checks == {name.value: "pass" for name in CheckName}

    # execute: the rewards check on the same history, where round 1 opened without client 0 (as if its removal
    # had been final), and where every client stayed in the task (so each must be listed in every round)
    events = read_chain(session.w3, session.deployment, 1).events
    history = audit_task(1, events).history
    commitments = reward_events(1, events)
    in_task = [c.index for c in history.clients]
    without_0 = dataclasses.replace(
        history,
        posted=tuple(
            dataclasses.replace(p, in_task_at_start=tuple(in_task[1:])) if p.round == 1 else p for p in history.posted
        ),
    )
    never_removed = dataclasses.replace(
        history, clients=tuple(dataclasses.replace(c, removed_round=None) for c in history.clients)
    )

    # assert: the history as posted passes; each altered one fails, naming the round
    def findings(altered: TaskHistory) -> list[str]:
        tally = check_rewards(altered, commitments, session.store)
        return [f.message for f in tally.findings.get(CheckName.STORE_REWARDS, [])]

    assert findings(history) == []
    assert [m.split(":")[0] for m in findings(without_0)] == ["round 1"]
    removed = [c for c in history.clients if c.removed_round is not None]
    listed_2 = [
        i for i, _ in load_reward_list(session.store, commitments[2].reward_list, task_id=1, round_number=2).rewards
    ]
    if any(c.index not in listed_2 for c in removed):  # a removal final before round 2 opened
        assert "round 2" in " ".join(findings(never_removed))


@pytest.mark.slow
def test_rewards_in_kind_are_committed_verified_by_the_client_and_checked_by_the_audit_which_catches_tampering(
    rewards_run: RewardsRun, data_root: Path, tmp_path: Path
) -> None:
    # prepare: the module's task, run end to end as separate processes on a chain that mines every 2 s; a copy of
    # its store to tamper with (the other test reads the original)
    run_dir, audit = rewards_run.run_dir, rewards_run.audit
    survivor = rewards_run.survivors()[0]
    store = tmp_path / "store"
    shutil.copytree(run_dir / "store", store)
    chain = ("--deployment", str(run_dir / "deployment.json"), "--store", str(store))
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
    path = Path(open_store(str(store)).path_of(final))
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
