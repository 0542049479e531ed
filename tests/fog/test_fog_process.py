"""The fog node as a real OS process: it bids, stops cleanly on SIGTERM, and resumes without bidding twice."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from fedchain.chain.keys import PRIVATE_KEY_ENV
from tests.aggregator.conftest import FOGS, TERMS, World
from tests.fog.conftest import Agents

#: The longest a process may take to do what a test waits for (imports included, on a busy CPU).
WAIT_S = 60.0
#: Bidding and reveal windows, seconds: far longer than a process takes to start, so only the test moves past them.
WINDOW_S = 3600


def wait_for(condition: Callable[[], bool], process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert process.poll() is None, f"the fog process exited early:\n{process.communicate()[1]}"
        if time.monotonic() > deadline:
            process.kill()
            raise AssertionError(f"the fog process did not get there in time:\n{process.communicate()[1]}")
        time.sleep(0.2)


def mine_at(world: World, timestamp: int) -> None:
    """Mine a block with ``timestamp``: the chain's clock jumps to it, however long the test took so far."""
    world.publisher.w3.provider.make_request("evm_mine", [timestamp])


def start_fog(world: World, task_id: int, state: Path) -> subprocess.Popen[str]:
    env = {**os.environ, PRIVATE_KEY_ENV: world.node.dev_account(FOGS[0]).key.hex()}
    command = [
        sys.executable,
        "-m",
        "fog.cli",
        "run",
        "--deployment",
        str(world.deployment_file),
        "--store",
        world.store_url,
        "--state",
        str(state),
        "--task",
        str(task_id),
        "--name",
        "fog-proc",
        "--engine",
        "sequential",
        "--poll-interval",
        "0.1",
    ]
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def stop(process: subprocess.Popen[str]) -> tuple[int, str]:
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=WAIT_S)
    return process.returncode, err


def test_fog_process_stops_cleanly_on_sigterm_and_resumes_without_bidding_twice(
    world: World, agents: Agents, tmp_path: Path
) -> None:
    # prepare: an open auction (bidding open long enough for a process to start); the fog node runs as its own process
    terms = dataclasses.replace(TERMS, bidding_duration=WINDOW_S, reveal_duration=WINDOW_S)
    task_id = world.create(terms)
    agents.client(0, task_id).step()
    auction = world.publisher.contracts.fog_auction
    state = tmp_path / "fog.json"
    first = start_fog(world, task_id, state)

    # execute: SIGTERM once it has bid; start it again once the bidding closed
    wait_for(lambda: len(auction.bids(task_id, 0)) == 1, first)
    code, log = stop(first)
    saved = json.loads(state.read_text())
    mine_at(world, auction.job(task_id, 0).bidding_deadline + 1)
    second = start_fog(world, task_id, state)
    wait_for(lambda: auction.bids(task_id, 0)[0].revealed, second)
    second_code, second_log = stop(second)

    # assert: clean exits with the state saved; one bid, revealed after the restart
    assert (code, second_code) == (0, 0)
    assert "bid committed" in log and "stopped" in log
    assert saved["jobs"][f"{task_id}:0"]["phase"] == "bid"
    assert "bid committed" not in second_log and "bid revealed" in second_log
    assert [(bid.bidder, bid.revealed) for bid in auction.bids(task_id, 0)] == [(world.session(FOGS[0]).address, True)]
