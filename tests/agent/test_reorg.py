"""An agent whose handled blocks are reorganised away rewinds to the common ancestor and handles the new branch.

Anvil rewrites its recent blocks under a toy agent: ``anvil_reorg`` replaces
the newest blocks by as many new ones, and ``evm_revert`` drops them (a shorter
chain). The toy agent keeps every event it handled in its state, and forgets
those of the vanished blocks in ``on_reorg``, so after a reorganisation its
state must equal that of an agent that only ever saw the final chain.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from web3 import Web3

from fedchain.agent import Agent, AgentSettings, AgentState, BlockRange, save_state
from fedchain.agent.chainloop import block_hash_reader
from fedchain.agent.runtime import MAX_REORG_DEPTH
from fedchain.chain.node import AnvilNode
from fedchain.errors import AgentError, ConfigError
from tests.agent.toychain import deploy_emitter, emit, mine, reorganise, revert, settings_for, snapshot


class EventRecorder:
    """A toy agent's callbacks: it keeps ``[block, topic]`` of every event it handled in ``state.data``."""

    def __init__(self, w3: Web3, emitter: str) -> None:
        self.w3 = w3
        self.emitter = emitter
        #: Every block handed to the handler, in order (outside the state: it survives rewinds).
        self.handled: list[int] = []
        #: The common ancestors ``on_reorg`` was called with.
        self.reorgs: list[int] = []

    def handle(self, blocks: BlockRange, state: AgentState) -> None:
        logs = self.w3.eth.get_logs({"fromBlock": blocks.first, "toBlock": blocks.last, "address": self.emitter})
        self.handled.extend(blocks)
        events = state.data.setdefault("events", [])
        events.extend([entry["blockNumber"], int.from_bytes(entry["topics"][0], "big")] for entry in logs)

    def on_reorg(self, state: AgentState, ancestor: int) -> None:
        self.reorgs.append(ancestor)
        state.data["events"] = [event for event in state.data.get("events", []) if event[0] <= ancestor]

    def agent(self, settings: AgentSettings) -> Agent:
        return Agent(
            settings,
            head=lambda: self.w3.eth.block_number,
            handle=self.handle,
            block_hash=block_hash_reader(self.w3),
            on_reorg=self.on_reorg,
        )


def catch_up(agent: Agent) -> None:
    """Step until no confirmed block is left to handle."""
    while agent.step() is not None:
        pass


def final_chain_state(chain: Web3, emitter: str, settings: AgentSettings, tmp_path: Path) -> AgentState:
    """The state of an agent like ``settings``' that starts now, so it only ever sees the chain as it is."""
    fresh = EventRecorder(chain, emitter).agent(replace(settings, state_path=tmp_path / "fresh.json"))
    catch_up(fresh)
    return fresh.state


@pytest.fixture(scope="module")
def chain() -> Iterator[Web3]:
    """An Anvil of this module's own: the events and rewritten blocks here must not reach other tests' agents."""
    with AnvilNode() as node:
        yield node.web3()


@pytest.fixture
def emitter(chain: Web3) -> str:
    return deploy_emitter(chain)


def test_an_agent_rewinds_to_the_common_ancestor_and_handles_the_new_branch_once(
    tmp_path: Path, chain: Web3, emitter: str, caplog: pytest.LogCaptureFixture
) -> None:
    settings = settings_for(tmp_path, chain)
    start = settings.start_block
    emit(chain, emitter, 1, 2, 3, 4)  # blocks start .. start + 3
    recorder = EventRecorder(chain, emitter)
    agent = recorder.agent(settings)
    catch_up(agent)

    reorganise(chain, emitter, depth=2, topics={0: 5, 1: 6})  # start + 2 and start + 3 replaced
    with caplog.at_level(logging.WARNING):
        catch_up(agent)

    assert recorder.reorgs == [start + 1]
    assert recorder.handled == [start, start + 1, start + 2, start + 3, start + 2, start + 3]
    assert agent.state.data["events"] == [[start, 1], [start + 1, 2], [start + 2, 5], [start + 3, 6]]
    assert agent.state == final_chain_state(chain, emitter, settings, tmp_path)
    assert (
        f"chain reorganised: handling the blocks after the common ancestor again agent=probe depth=2 "
        f"ancestor={start + 1} vanished={start + 2}..{start + 3}" in caplog.text
    )


def test_a_reorganisation_to_a_shorter_chain_rewinds_instead_of_refusing_the_chain(
    tmp_path: Path, chain: Web3, emitter: str
) -> None:
    settings = settings_for(tmp_path, chain)
    start = settings.start_block
    emit(chain, emitter, 1)
    before = snapshot(chain)
    emit(chain, emitter, 2, 3)  # start + 1, start + 2: gone after the revert
    recorder = EventRecorder(chain, emitter)
    agent = recorder.agent(settings)
    catch_up(agent)

    revert(chain, before)
    emit(chain, emitter, 7)  # the new branch's start + 1; the head is below the agent's last block
    assert chain.eth.block_number < agent.state.last_block
    catch_up(agent)

    assert recorder.reorgs == [start]
    assert agent.state.data["events"] == [[start, 1], [start + 1, 7]]
    assert agent.state == final_chain_state(chain, emitter, settings, tmp_path)


def test_an_agent_restarted_after_a_reorganisation_rewinds_from_its_saved_hashes(
    tmp_path: Path, chain: Web3, emitter: str
) -> None:
    settings = settings_for(tmp_path, chain)
    start = settings.start_block
    emit(chain, emitter, 1, 2, 3)
    catch_up(EventRecorder(chain, emitter).agent(settings))

    reorganise(chain, emitter, depth=1, topics={0: 7})  # while the agent is down
    emit(chain, emitter, 8)
    recorder = EventRecorder(chain, emitter)
    restarted = recorder.agent(settings)
    catch_up(restarted)

    assert recorder.reorgs == [start + 1]
    assert recorder.handled == [start + 2, start + 3]
    assert restarted.state.data["events"] == [[start, 1], [start + 1, 2], [start + 2, 7], [start + 3, 8]]
    assert restarted.state == final_chain_state(chain, emitter, settings, tmp_path)


def test_a_reorganisation_shallower_than_the_confirmations_never_touches_a_handled_block(
    tmp_path: Path, chain: Web3, emitter: str, caplog: pytest.LogCaptureFixture
) -> None:
    settings = settings_for(tmp_path, chain, confirmations=3)
    start = settings.start_block
    emit(chain, emitter, 1, 2, 3, 4, 5)  # head start + 4: confirmed up to start + 1
    recorder = EventRecorder(chain, emitter)
    agent = recorder.agent(settings)
    catch_up(agent)

    reorganise(chain, emitter, depth=2, topics={1: 9})  # start + 3 and start + 4 replaced
    mine(chain, 3)
    with caplog.at_level(logging.WARNING):
        catch_up(agent)

    assert recorder.reorgs == [] and "reorganised" not in caplog.text
    assert recorder.handled == list(range(start, chain.eth.block_number - 2))
    assert agent.state.data["events"] == [[start, 1], [start + 1, 2], [start + 2, 3], [start + 4, 9]]
    assert agent.state == final_chain_state(chain, emitter, settings, tmp_path)


def test_a_reorganisation_below_every_remembered_block_rewinds_reorg_depth_blocks_and_says_so(
    tmp_path: Path, chain: Web3, emitter: str, caplog: pytest.LogCaptureFixture
) -> None:
    settings = settings_for(tmp_path, chain, reorg_depth=2)
    start = settings.start_block
    emit(chain, emitter, 1, 2, 3, 4)
    recorder = EventRecorder(chain, emitter)
    agent = recorder.agent(settings)
    catch_up(agent)

    reorganise(chain, emitter, depth=4, topics={0: 5})  # every handled block replaced
    with caplog.at_level(logging.ERROR):
        agent.step()

    assert recorder.reorgs == [start + 1]  # two blocks back, which does not reach the fork at start - 1
    assert "reorganised below every remembered block: rewinding 2 blocks" in caplog.text
    assert agent.state.last_block == start + 3 and sorted(map(int, agent.state.block_hashes)) == [start + 2, start + 3]


def test_an_agent_remembers_the_hashes_of_its_newest_handled_blocks_only(
    tmp_path: Path, chain: Web3, emitter: str
) -> None:
    settings = settings_for(tmp_path, chain, reorg_depth=3, max_blocks_per_step=2)
    mine(chain, 7)
    agent = EventRecorder(chain, emitter).agent(settings)

    catch_up(agent)

    head = chain.eth.block_number
    assert agent.state.remembered_blocks() == [
        (number, bytes(chain.eth.get_block(number)["hash"])) for number in (head, head - 1, head - 2)
    ]


def test_a_head_below_the_last_block_with_none_of_its_blocks_left_is_still_a_reset_chain(
    tmp_path: Path, chain: Web3, emitter: str
) -> None:
    settings = settings_for(tmp_path, chain)
    gone = chain.eth.block_number + 100
    save_state(
        settings.state_path, AgentState(agent="probe", last_block=gone, block_hashes={str(gone): "0x" + "ab" * 32})
    )
    agent = EventRecorder(chain, emitter).agent(settings)

    with pytest.raises(AgentError, match="chain was reset"):
        agent.step()


@pytest.mark.parametrize("depth", [0, MAX_REORG_DEPTH + 1])
def test_settings_refuse_a_reorg_depth_that_remembers_nothing_or_bloats_the_state(tmp_path: Path, depth: int) -> None:
    with pytest.raises(ConfigError, match="reorg_depth"):
        AgentSettings(name="probe", state_path=tmp_path / "s.json", reorg_depth=depth)


def test_a_chain_that_shrinks_between_the_head_and_the_hashes_is_polled_again_not_handled(
    tmp_path: Path, chain: Web3, emitter: str
) -> None:
    settings = settings_for(tmp_path, chain)
    emit(chain, emitter, 1)
    before = snapshot(chain)
    emit(chain, emitter, 2)
    recorder = EventRecorder(chain, emitter)

    def head_then_shrink() -> int:
        head = chain.eth.block_number
        revert(chain, before)  # the block the head named vanishes before the step reads its hash
        return head

    agent = Agent(settings, head=head_then_shrink, handle=recorder.handle, block_hash=block_hash_reader(chain))

    assert agent.step() is None

    assert recorder.handled == [] and not settings.state_path.exists()
