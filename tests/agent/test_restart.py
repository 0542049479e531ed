"""A real agent process on a real Anvil: SIGTERM stops it cleanly, a restart resumes without repeating a block."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from fedchain.agent import AgentState
from fedchain.chain.node import AnvilNode
from tests.agent.toychain import deploy_emitter, emit

AGENT = Path(__file__).with_name("journal_agent.py")


def start_agent(node: AnvilNode, state: Path, journal: Path, step_delay: float) -> subprocess.Popen[str]:
    command = [sys.executable, str(AGENT), "--rpc-url", node.rpc_url, "--state", str(state), "--journal", str(journal)]
    return subprocess.Popen([*command, "--step-delay", str(step_delay)], stderr=subprocess.PIPE, text=True)


def wait_until(condition: Callable[[], object], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the agent made no progress in time"
        time.sleep(0.02)


def journal_lines(journal: Path) -> list[dict]:
    return [json.loads(line) for line in journal.read_text().splitlines()] if journal.exists() else []


def saved_block(state: Path) -> int:
    return AgentState.from_json(state.read_text()).last_block if state.exists() else -1


def terminate(agent: subprocess.Popen[str]) -> tuple[int, str]:
    agent.send_signal(signal.SIGTERM)
    _, stderr = agent.communicate(timeout=30)
    return agent.returncode, stderr


def test_agent_stopped_by_sigterm_resumes_from_its_saved_block_without_handling_a_block_twice(
    node: AnvilNode, tmp_path: Path
) -> None:
    # prepare: a contract and three events before the agent starts
    w3 = node.web3()
    emitter = deploy_emitter(w3)
    emit(w3, emitter, 1, 2, 3)
    state, journal = tmp_path / "state.json", tmp_path / "journal.jsonl"

    # execute: a slow agent, stopped by SIGTERM while it is catching up
    first = start_agent(node, state, journal, step_delay=0.2)
    wait_until(lambda: len(journal_lines(journal)) >= 2)
    first_status, first_log = terminate(first)
    stopped_at = saved_block(state)
    handled_first = len(journal_lines(journal))

    # ... more events while it is down, then a fast restart that catches up and handles one more live event
    emit(w3, emitter, 4, 5)
    second = start_agent(node, state, journal, step_delay=0.0)
    wait_until(lambda: saved_block(state) == w3.eth.block_number)
    emit(w3, emitter, 6)
    wait_until(lambda: saved_block(state) == w3.eth.block_number)
    second_status, second_log = terminate(second)

    # assert: clean exits, and every block from genesis to the head handled exactly once, in order
    assert (first_status, second_status) == (0, 0), first_log + second_log
    head = w3.eth.block_number
    blocks = [line["block"] for line in journal_lines(journal)]
    assert blocks == list(range(head + 1))
    assert stopped_at == handled_first - 1  # the first run saved exactly what it journaled
    assert f"resume_from={stopped_at + 1}" in second_log
    assert "stopping after the current step agent=journal reason=SIGTERM" in first_log
    seen = [int(topic, 16) for line in journal_lines(journal) for topic in line["topics"]]
    assert seen == [1, 2, 3, 4, 5, 6]
    assert AgentState.from_json(state.read_text()).data == {"events": 6}
