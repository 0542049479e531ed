"""The agent loop hands out confirmed block ranges, saves after every step, and stops cleanly."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from web3 import Web3

from fedchain.agent import Agent, AgentSettings, AgentState, BlockRange, next_range, save_state
from fedchain.errors import AgentError, ConfigError
from tests.agent.toychain import mine, settings_for


def saved(settings: AgentSettings) -> AgentState:
    return AgentState.from_json(settings.state_path.read_text())


@pytest.mark.parametrize(
    ("last_processed", "head", "confirmations", "max_blocks", "expected"),
    [
        (-1, 0, 0, 10, BlockRange(0, 0)),  # nothing handled yet: genesis alone
        (4, 4, 0, 10, None),  # up to date
        (4, 100, 0, 10, BlockRange(5, 14)),  # far behind: at most max_blocks
        (4, 10, 2, 10, BlockRange(5, 8)),  # blocks 9 and 10 are not confirmed yet
        (4, 6, 2, 10, None),  # block 5 has one block on top, not two
        (4, 7, 2, 1, BlockRange(5, 5)),  # one block per step
    ],
)
def test_next_range_ends_at_the_last_confirmed_block_and_spans_at_most_max_blocks(
    last_processed: int, head: int, confirmations: int, max_blocks: int, expected: BlockRange | None
) -> None:
    assert next_range(last_processed, head, confirmations, max_blocks) == expected


def test_a_block_range_is_inclusive_and_refuses_to_run_backwards() -> None:
    assert list(BlockRange(3, 5)) == [3, 4, 5] and len(BlockRange(3, 5)) == 3
    with pytest.raises(ValueError):
        BlockRange(5, 3)


@pytest.mark.parametrize(
    "overrides",
    [{"confirmations": -1}, {"start_block": -1}, {"poll_interval_s": 0}, {"max_blocks_per_step": 0}, {"name": ""}],
)
def test_settings_refuse_impossible_values(tmp_path: Path, overrides: dict) -> None:
    with pytest.raises(ConfigError):
        AgentSettings(**({"name": "probe", "state_path": tmp_path / "s.json"} | overrides))


def test_steps_hand_confirmed_blocks_to_the_handler_and_save_the_last_one(tmp_path: Path, chain: Web3) -> None:
    settings = settings_for(tmp_path, chain, confirmations=2, max_blocks_per_step=3)
    start = settings.start_block
    seen: list[BlockRange] = []
    agent = Agent(settings, head=lambda: chain.eth.block_number, handle=lambda blocks, state: seen.append(blocks))
    mine(chain, 7)  # head = start + 6; confirmed up to start + 4

    ranges = [agent.step(), agent.step(), agent.step()]

    assert ranges == [*seen, None] == [BlockRange(start, start + 2), BlockRange(start + 3, start + 4), None]
    assert saved(settings).last_block == start + 4


def test_a_failing_handler_leaves_the_saved_state_as_it_was(tmp_path: Path, chain: Web3) -> None:
    settings = settings_for(tmp_path, chain)

    def handle(blocks: BlockRange, state: AgentState) -> None:
        state.jobs["7"] = {"phase": "bid"}
        raise RuntimeError("the node answered nonsense")

    agent = Agent(settings, head=lambda: chain.eth.block_number, handle=handle)
    mine(chain, 1)

    with pytest.raises(RuntimeError):
        agent.step()

    assert agent.state == AgentState(agent="probe", last_block=settings.start_block - 1)
    assert not settings.state_path.exists()


def test_the_idle_handler_runs_when_no_block_is_new_and_its_changes_are_saved(tmp_path: Path, chain: Web3) -> None:
    settings = settings_for(tmp_path, chain)

    def idle(state: AgentState) -> None:
        state.data["idle_calls"] = state.data.get("idle_calls", 0) + 1

    agent = Agent(settings, head=lambda: chain.eth.block_number, handle=lambda b, s: None, idle=idle)

    assert agent.step() is None and agent.step() is None

    assert saved(settings).data == {"idle_calls": 2}
    assert saved(settings).last_block == settings.start_block - 1


def test_sigterm_stops_the_run_after_the_current_step_is_saved(tmp_path: Path, chain: Web3) -> None:
    settings = settings_for(tmp_path, chain, max_blocks_per_step=1)
    handled: list[int] = []

    def handle(blocks: BlockRange, state: AgentState) -> None:
        handled.append(blocks.first)
        if len(handled) == 2:
            signal.raise_signal(signal.SIGTERM)  # arrives mid-step

    mine(chain, 5)
    before = signal.getsignal(signal.SIGTERM)

    final = Agent(settings, head=lambda: chain.eth.block_number, handle=handle).run()

    assert handled == [settings.start_block, settings.start_block + 1]
    assert final.last_block == saved(settings).last_block == settings.start_block + 1
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_second_signal_interrupts_at_once_leaving_the_last_saved_state(tmp_path: Path, chain: Web3) -> None:
    settings = settings_for(tmp_path, chain, max_blocks_per_step=1)

    def handle(blocks: BlockRange, state: AgentState) -> None:
        if blocks.first == settings.start_block + 1:
            signal.raise_signal(signal.SIGINT)
            signal.raise_signal(signal.SIGINT)

    mine(chain, 3)

    with pytest.raises(KeyboardInterrupt):
        Agent(settings, head=lambda: chain.eth.block_number, handle=handle).run()

    assert saved(settings).last_block == settings.start_block


def test_a_handler_that_marks_the_state_finished_ends_the_run_for_good(tmp_path: Path, chain: Web3) -> None:
    settings = settings_for(tmp_path, chain)
    calls: list[BlockRange] = []

    def handle(blocks: BlockRange, state: AgentState) -> None:
        calls.append(blocks)
        state.finished = True

    mine(chain, 2)
    Agent(settings, head=lambda: chain.eth.block_number, handle=handle).run()
    mine(chain, 2)

    restarted = Agent(settings, head=lambda: chain.eth.block_number, handle=handle).run()

    assert len(calls) == 1
    assert restarted.finished and restarted.last_block == calls[0].last


def test_transient_failures_are_retried_until_the_chain_answers(tmp_path: Path, chain: Web3) -> None:
    settings = settings_for(tmp_path, chain)
    outages = iter([ConnectionError("refused"), ConnectionError("refused")])

    def head() -> int:
        outage = next(outages, None)
        if outage is not None:
            raise outage
        return chain.eth.block_number

    def handle(blocks: BlockRange, state: AgentState) -> None:
        state.finished = True

    mine(chain, 1)

    assert Agent(settings, head=head, handle=handle).run().finished


def test_an_agent_gives_up_after_too_many_failures_in_a_row(tmp_path: Path, chain: Web3) -> None:
    settings = settings_for(tmp_path, chain, max_consecutive_failures=3)

    def head() -> int:
        raise ConnectionError("refused")

    with pytest.raises(AgentError, match="failed 3 times in a row"):
        Agent(settings, head=head, handle=lambda b, s: None).run()


def test_a_state_ahead_of_the_chain_is_refused_as_a_reset_chain(tmp_path: Path, chain: Web3) -> None:
    settings = settings_for(tmp_path, chain)
    save_state(settings.state_path, AgentState(agent="probe", last_block=chain.eth.block_number + 100))
    agent = Agent(settings, head=lambda: chain.eth.block_number, handle=lambda b, s: None)

    with pytest.raises(AgentError, match="chain was reset") as raised:
        agent.step()

    assert str(settings.state_path) in raised.value.hint


def test_an_idle_poll_that_changes_nothing_writes_nothing(tmp_path: Path, chain: Web3) -> None:
    settings = settings_for(tmp_path, chain)
    agent = Agent(settings, head=lambda: chain.eth.block_number, handle=lambda b, s: None, idle=lambda state: None)

    assert agent.step() is None

    assert not settings.state_path.exists()


def test_a_running_agent_holds_its_state_file_against_a_second_run(tmp_path: Path, chain: Web3) -> None:
    settings = settings_for(tmp_path, chain)
    second: list[str] = []

    def handle(blocks: BlockRange, state: AgentState) -> None:
        try:  # a second process started on the same state file while this one runs
            Agent(settings, head=lambda: chain.eth.block_number, handle=handle).run()
        except AgentError as err:
            second.append(str(err))
        state.finished = True

    mine(chain, 1)
    Agent(settings, head=lambda: chain.eth.block_number, handle=handle).run()

    assert len(second) == 1 and "in use by another running agent" in second[0]
