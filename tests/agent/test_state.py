"""The state file survives restarts and crashes: saved atomically, refused when damaged or not the agent's."""

from __future__ import annotations

import errno
import fcntl
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fedchain.agent import AgentState, load_state, save_state
from fedchain.agent.state import exclusive
from fedchain.errors import AgentError, ConfigError


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
        '{"version": 1, "agent": "fog-1", "last_block": 1, "block_hashes": {"latest": "0xab"}}',
        '{"version": 1, "agent": "fog-1", "last_block": 1, "block_hashes": {"1": "abcd"}}',
        '{"version": 1, "agent": "fog-1", "last_block": 1, "block_hashes": {"1": "0xnothex"}}',
    ],
    ids=[
        "truncated",
        "not-an-object",
        "other-version",
        "block-as-text",
        "jobs-as-list",
        "unknown-field",
        "hash-of-no-number",
        "hash-without-0x",
        "hash-not-hex",
    ],
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


def test_a_state_remembers_the_hashes_of_its_newest_blocks_only_and_forgets_reorganised_ones() -> None:
    state = AgentState(agent="fog-1", last_block=12)
    state.remember_blocks({10: b"\x0a", 11: b"\x0b"}, keep=3)

    state.remember_blocks({12: b"\x0c", 13: b"\x0d"}, keep=3)

    assert state.block_hashes == {"11": "0x0b", "12": "0x0c", "13": "0x0d"}
    assert state.remembered_blocks() == [(13, b"\x0d"), (12, b"\x0c"), (11, b"\x0b")]
    state.forget_blocks_after(11)
    assert state.remembered_blocks() == [(11, b"\x0b")]


def test_a_state_file_from_before_block_hashes_were_kept_loads_with_none(tmp_path: Path) -> None:
    path = tmp_path / "fog.json"
    path.write_text('{"version": 1, "agent": "fog-1", "last_block": 41, "jobs": {"7": {"phase": "bid"}}}')

    state = load_state(path, agent="fog-1", start_block=0)

    assert (state.last_block, state.jobs, state.block_hashes) == (41, {"7": {"phase": "bid"}}, {})


def test_a_tracked_transaction_is_keyed_by_its_hex_hash_until_settled() -> None:
    state = AgentState(agent="fog-1", last_block=0)
    tx_hash = bytes.fromhex("AB" * 32)

    state.track_tx(tx_hash, "reveal", job=7)

    assert state.pending_txs == {"0x" + "ab" * 32: {"action": "reveal", "job": 7}}
    assert state.settle_tx("0x" + "AB" * 32) == {"action": "reveal", "job": 7}
    assert state.pending_txs == {} and state.settle_tx(tx_hash) is None


FOG_KEY_A = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
FOG_KEY_B = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"


def test_a_state_file_saved_under_another_account_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "fog.json"
    save_state(path, load_state(path, agent="fog", start_block=0, owner=FOG_KEY_A))

    with pytest.raises(AgentError, match=f"saved by account {FOG_KEY_A}.*signs as {FOG_KEY_B}") as raised:
        load_state(path, agent="fog", start_block=0, owner=FOG_KEY_B)

    assert "--state" in raised.value.hint
    assert load_state(path, agent="fog", start_block=0, owner=FOG_KEY_A).owner == FOG_KEY_A


def test_a_state_file_from_before_owners_were_recorded_is_adopted_by_its_next_signer(tmp_path: Path) -> None:
    path = tmp_path / "fog.json"
    path.write_text('{"version": 1, "agent": "fog-1", "last_block": 41}')

    state = load_state(path, agent="fog-1", start_block=0, owner=FOG_KEY_A)

    assert (state.last_block, state.owner) == (41, FOG_KEY_A)


def test_a_state_file_in_use_is_refused_to_a_second_holder_naming_the_first(tmp_path: Path) -> None:
    path = tmp_path / "fog.json"

    in_use = f"in use by another running agent \\(process {os.getpid()}\\)"
    with exclusive(path), pytest.raises(AgentError, match=in_use) as raised, exclusive(path):
        pass  # pragma: no cover: never entered

    assert "--state" in raised.value.hint
    with exclusive(path):  # released on leaving the block
        pass


def test_the_lock_of_a_killed_agent_dies_with_it(tmp_path: Path) -> None:
    path = tmp_path / "fog.json"
    child = textwrap.dedent(
        f"""
        import os, sys
        from pathlib import Path
        from fedchain.agent.state import exclusive

        with exclusive(Path({str(path)!r})):
            print("locked", flush=True)
            sys.stdin.readline()  # hold the lock until killed
        """
    )
    holder = subprocess.Popen([sys.executable, "-c", child], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(AgentError, match=f"process {holder.pid}"), exclusive(path):
            pass  # pragma: no cover: never entered
    finally:
        holder.kill()
        holder.wait(timeout=30)

    with exclusive(path):  # SIGKILL left no stale lock
        pass


def test_a_file_system_that_cannot_lock_is_warned_about_and_the_agent_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def no_locks(_file: object, _operation: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")  # as some network file systems answer

    monkeypatch.setattr(fcntl, "flock", no_locks)
    entered = False

    with exclusive(tmp_path / "fog.json"):
        entered = True

    assert entered and "nothing stops a second agent" in caplog.text


def test_a_state_file_in_a_folder_that_cannot_be_written_is_refused_at_start(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")

    with (
        pytest.raises(ConfigError, match="cannot write into the folder") as caught,
        exclusive(tmp_path / "a-file" / "fog.json"),
    ):
        pass
    assert "--state PATH" in (caught.value.hint or "")
