"""`fedchain aggregator run` as a real process: it posts, stops cleanly on SIGTERM, and a restart from its state finishes the task;
told to crash after a round, it dies by SIGKILL right after posting it.

One process per test (starting one costs seconds of imports); the restart runs in this process from the same state file.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from fedchain.aggregator import Aggregator, AggregatorSettings
from fedchain.chain.bindings import TaskStatus
from fedchain.data.datasets import load_dataset
from tests.aggregator.conftest import AGGREGATOR, FOGS, World

#: Seconds a process may take to get somewhere (it imports torch and loads MNIST on a busy 2-core machine).
PROCESS_TIMEOUT_S = 120


def spawn_aggregator(world: World, task_id: int, state_path: Path, *options: str) -> subprocess.Popen:
    env = {**os.environ, "FEDCHAIN_PRIVATE_KEY": "0x" + world.node.dev_account(AGGREGATOR).key.hex()}
    command = [
        sys.executable,
        "-m",
        "fedchain.cli",
        "-v",
        "aggregator",
        "run",
        "--task",
        str(task_id),
        "--deployment",
        str(world.deployment_file),
        "--store",
        world.store_url,
        "--state",
        str(state_path),
        "--poll-interval",
        "0.1",
        *options,
    ]
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(condition: Callable[[], bool], process: subprocess.Popen) -> None:
    deadline = time.monotonic() + PROCESS_TIMEOUT_S
    while not condition():
        if process.poll() is not None:
            raise AssertionError(
                f"the aggregator exited early ({process.returncode}): {process.stderr.read() if process.stderr else ''}"
            )
        assert time.monotonic() < deadline, "the aggregator process did not get there in time"
        time.sleep(0.2)


def test_aggregator_process_posts_stops_on_sigterm_and_a_restart_resumes_and_settles(
    world: World, tmp_path: Path
) -> None:
    # prepare: one client whose fog committed round 1
    train = load_dataset("mnist", train=True)
    images, labels = train.images[:64], train.labels[:64]
    task_id = world.staffed_task({0: [(FOGS[0], 10**14)]})
    registry = world.publisher.contracts.task_registry
    start = world.global_model(task_id, registry.params(task_id).model_id, 0)
    world.commit_trained_update(task_id, 0, FOGS[0], 1, start, images, labels)
    state_path = tmp_path / "aggregator.json"

    # execute: the first process posts round 1 and is stopped by SIGTERM while it waits for round 2
    first = spawn_aggregator(world, task_id, state_path)
    wait_for(lambda: registry.state(task_id).current_round == 2, first)
    first.send_signal(signal.SIGTERM)
    out, err = first.communicate(timeout=PROCESS_TIMEOUT_S)
    posted_model = json.loads(state_path.read_text())["data"]["models"]["1"]

    # then round 2 is committed and a restarted aggregator takes over from the saved state
    world.commit_trained_update(
        task_id, 0, FOGS[0], 2, world.global_model(task_id, bytes.fromhex(posted_model[2:]), 1), images, labels
    )
    restarted = Aggregator(
        world.aggregator, AggregatorSettings(task_id=task_id, state_path=state_path, poll_interval_s=0.01)
    )
    for _ in range(20):  # it posts round 2, which finishes the task; the rounds are pending until their window passes
        if registry.state(task_id).status == TaskStatus.FINISHED:
            break
        restarted.step()
    assert registry.state(task_id).status == TaskStatus.FINISHED and not restarted.state.finished
    world.pass_challenge_window(task_id)
    final = restarted.run()

    # assert: a clean stop (exit 0, state saved), then the task finished and settled by the second process
    assert first.returncode == 0, err
    assert "stopped" in out and "round posted" in err and "reason=SIGTERM" in err
    assert final.finished and set(final.data["models"]) == {"1", "2"} and final.data["models"]["1"] == posted_model
    assert registry.state(task_id).status == TaskStatus.SETTLED
    assert json.loads(state_path.read_text())["finished"] is True


def test_an_aggregator_told_to_crash_after_round_1_dies_by_sigkill_right_after_posting_it(
    world: World, tmp_path: Path
) -> None:
    # prepare: one client whose fog committed round 1
    train = load_dataset("mnist", train=True)
    task_id = world.staffed_task({0: [(FOGS[0], 10**14)]})
    registry = world.publisher.contracts.task_registry
    start = world.global_model(task_id, registry.params(task_id).model_id, 0)
    world.commit_trained_update(task_id, 0, FOGS[0], 1, start, train.images[:64], train.labels[:64])

    # execute
    process = spawn_aggregator(world, task_id, tmp_path / "aggregator.json", "--crash-after-round", "1")
    _, err = process.communicate(timeout=PROCESS_TIMEOUT_S)

    # assert: killed by its own SIGKILL once round 1 was posted, saying so; nothing after it
    assert process.returncode == -signal.SIGKILL, err
    assert "round posted" in err and "fault: dying by SIGKILL" in err
    assert world.publisher.contracts.round_ledger.rounds(task_id) == (1, 0)
    assert registry.state(task_id).current_round == 2
