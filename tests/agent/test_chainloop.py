"""The loop the fog nodes and clients share follows reorganisations of its session's chain."""

from __future__ import annotations

from pathlib import Path

from fedchain.agent import AgentState, BlockRange
from fedchain.agent.chainloop import block_hash_reader, session_agent
from tests.agent.toychain import mine
from tests.aggregator.conftest import World, chain_node, deployment_file, world  # noqa: F401  (fixtures)


def test_a_session_agent_rewinds_when_its_chain_is_reorganised(world: World, tmp_path: Path) -> None:
    session = world.session(0)
    handled: list[int] = []
    reorgs: list[int] = []

    def handle(blocks: BlockRange, state: AgentState) -> None:
        handled.extend(blocks)

    def on_reorg(state: AgentState, ancestor: int) -> None:
        reorgs.append(ancestor)

    agent = session_agent(
        session,
        name="probe",
        state_path=tmp_path / "probe.json",
        confirmations=0,
        poll_interval_s=0.01,
        handle=handle,
        idle=lambda state: None,
        on_reorg=on_reorg,
    )
    mine(session.w3, 3)
    agent.step()
    head = session.w3.eth.block_number
    transfer = {"from": session.w3.eth.accounts[0], "to": session.w3.eth.accounts[1], "value": 1}

    session.w3.provider.make_request("anvil_reorg", [2, [[transfer, 0]]])
    agent.step()

    assert reorgs == [head - 2]
    assert handled[-2:] == [head - 1, head]


def test_the_block_hash_reader_gives_a_blocks_hash_and_none_past_the_head(world: World) -> None:
    w3 = world.session(0).w3
    block_hash = block_hash_reader(w3)
    head = w3.eth.block_number

    assert block_hash(head) == bytes(w3.eth.get_block(head)["hash"])
    assert block_hash(head + 1) is None
