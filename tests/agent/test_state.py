"""The state file survives restarts and crashes: saved atomically, refused when damaged or not the agent's."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fedchain.agent import AgentState, load_state, save_state
from fedchain.errors import AgentError


def a_busy_state() -> AgentState:
    return AgentState(
        agent="fog-1",
        last_block=41,
        jobs={"7": {"phase": "committed", "salt": "0x01"}},
        pending_txs={"0xab": {"action": "reveal", "job": 7}},
        data={"stake_wei": str(10**18)},
    )


def test_a_saved_state_loads_back_equal(tmp_path: Path) -> None:
    path = tmp_path / "fog-1.json"

    save_state(path, a_busy_state())

    assert load_state(path, agent="fog-1", start_block=0) == a_busy_state()


def test_without_a_state_file_the_agent_starts_before_its_start_block(tmp_path: Path) -> None:
    state = load_state(tmp_path / "absent.json", agent="fog-1", start_block=120)

    assert state == AgentState(agent="fog-1", last_block=119)


def test_a_state_file_of_another_agent_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    save_state(path, a_busy_state())

    with pytest.raises(AgentError, match="belongs to agent 'fog-1'"):
        load_state(path, agent="aggregator", start_block=0)


@pytest.mark.parametrize(
    "text",
    [
        "{ half a file",
        "[]",
        '{"version": 99, "agent": "fog-1", "last_block": 1}',
        '{"version": 1, "agent": "fog-1", "last_block": "1"}',
        '{"version": 1, "agent": "fog-1", "last_block": 1, "jobs": []}',
        '{"version": 1, "agent": "fog-1", "last_block": 1, "surprise": 1}',
    ],
    ids=["truncated", "not-an-object", "other-version", "block-as-text", "jobs-as-list", "unknown-field"],
)
def test_a_damaged_state_file_is_refused_with_a_way_out(tmp_path: Path, text: str) -> None:
    path = tmp_path / "state.json"
    path.write_text(text)

    with pytest.raises(AgentError) as raised:
        load_state(path, agent="fog-1", start_block=0)

    assert "delete it" in raised.value.hint


def test_a_state_json_cannot_hold_is_refused_and_the_saved_file_kept(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    save_state(path, a_busy_state())
    broken = a_busy_state()
    broken.data["hash"] = b"\x01\x02"  # raw bytes: the agent should have stored 0x hex

    with pytest.raises(AgentError, match="JSON cannot hold"):
        save_state(path, broken)

    assert load_state(path, agent="fog-1", start_block=0) == a_busy_state()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


def test_a_writer_killed_before_the_rename_leaves_the_old_state(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    save_state(path, a_busy_state())
    # The child dies right after writing the new state to its temporary file, before renaming it.
    child = textwrap.dedent(
        f"""
        import os
        from pathlib import Path
        from fedchain.agent import AgentState, save_state

        os.fsync = lambda fd: os._exit(137)
        save_state(Path({str(path)!r}), AgentState(agent="fog-1", last_block=99))
        """
    )

    result = subprocess.run([sys.executable, "-c", child], capture_output=True, timeout=60)

    assert result.returncode == 137, result.stderr.decode()
    assert load_state(path, agent="fog-1", start_block=0) == a_busy_state()


def test_a_tracked_transaction_is_keyed_by_its_hex_hash_until_settled() -> None:
    state = AgentState(agent="fog-1", last_block=0)
    tx_hash = bytes.fromhex("AB" * 32)

    state.track_tx(tx_hash, "reveal", job=7)

    assert state.pending_txs == {"0x" + "ab" * 32: {"action": "reveal", "job": 7}}
    assert state.settle_tx("0x" + "AB" * 32) == {"action": "reveal", "job": 7}
    assert state.pending_txs == {} and state.settle_tx(tx_hash) is None
