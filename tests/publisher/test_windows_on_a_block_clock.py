"""`fedchain task create` on a chain with a block clock (Anvil mining every second), where windows can be too short.

At 1 s blocks and agents acting at 2 confirmations, the smallest workable
windows are: bidding and reveal 5 s, a round the expected training time plus
4 s, a time tolerance of 1 s, a challenge window 10 s of re-scoring plus 5 s.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fedchain.chain.deployment import deploy
from fedchain.chain.node import AnvilNode, AnvilSettings
from tests.aggregator.conftest import DEPLOYER, PUBLISHER, World
from tests.publisher.test_task_commands import run_cli

#: Terms that fit 1 s blocks at depth 2 exactly: T = 30 / 3 = 10 s of training per round.
FITTING = (
    "--rounds",
    "3",
    "--expected-duration",
    "30",
    "--round-duration",
    "14",
    "--bidding-duration",
    "5",
    "--reveal-duration",
    "5",
    "--time-tolerance",
    "1",
    "--confirmations",
    "2",
)


@pytest.fixture(scope="module")
def clock_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """A deployment on an Anvil of its own that makes a block every second, whether or not anyone sends one."""
    with AnvilNode(AnvilSettings(block_time=1, accounts=4)) as node:
        folder = tmp_path_factory.mktemp("clock")
        deployment = deploy(node.web3(), node.dev_account(DEPLOYER), rpc_url=node.rpc_url, rehearse_first=False)
        yield World(node, deployment.save(folder / "deployment.json"), str(folder / "store"))


def changed(**flags: str) -> tuple[str, ...]:
    """:data:`FITTING` with each ``flag_name=value`` (``bidding_duration="4"``: ``--bidding-duration 4``) changed."""
    args = list(FITTING)
    for name, value in flags.items():
        args[args.index("--" + name.replace("_", "-")) + 1] = value
    return tuple(args)


def test_windows_too_short_for_the_chains_blocks_are_refused_with_their_smallest_values_and_nothing_is_sent(
    clock_world: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    registry = clock_world.publisher.contracts.task_registry
    tasks_before = registry.task_count()

    status = run_cli(
        clock_world,
        PUBLISHER,
        "task",
        "create",
        *changed(bidding_duration="4", round_duration="13"),
        monkeypatch=monkeypatch,
    )

    err = capsys.readouterr().err
    assert status == 1
    assert "a block every 1 s, agents acting at 2 confirmations" in err
    assert (
        "bidding_duration 4 s is too short: at least 5 s (5 blocks)" in err
        and "--bidding-duration (terms.bidding_duration)" in err
    )
    assert "round_duration 13 s is too short: at least 14 s (10 s + 4 blocks)" in err
    assert "reveal_duration" not in err and "time_tolerance" not in err
    assert registry.task_count() == tasks_before
    assert [path for path in Path(clock_world.store_url).rglob("*") if path.is_file()] == []


def test_the_depth_the_agents_act_at_decides_which_windows_fit(
    clock_world: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    deeper = run_cli(clock_world, PUBLISHER, "task", "create", *changed(confirmations="3"), monkeypatch=monkeypatch)

    err = capsys.readouterr().err
    assert deeper == 1
    assert "bidding_duration 5 s is too short: at least 6 s (6 blocks)" in err
    assert "time_tolerance" not in err  # one block, whatever the depth


def test_windows_that_fit_create_the_task(
    clock_world: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    status = run_cli(clock_world, PUBLISHER, "task", "create", *FITTING, monkeypatch=monkeypatch)

    assert status == 0
    task_id = int(capsys.readouterr().out.strip().splitlines()[-1])
    params = clock_world.publisher.contracts.task_registry.params(task_id)
    assert (params.bidding_duration, params.reveal_duration, params.round_duration, params.time_tolerance) == (
        5,
        5,
        14,
        1,
    )


def test_a_challenge_window_too_short_for_the_chains_blocks_is_refused_and_one_that_fits_creates_the_task(
    clock_world: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    registry = clock_world.publisher.contracts.task_registry
    tasks_before = registry.task_count()

    short = run_cli(
        clock_world, PUBLISHER, "task", "create", *FITTING, "--challenge-window", "14", monkeypatch=monkeypatch
    )
    err = capsys.readouterr().err
    fits = run_cli(
        clock_world, PUBLISHER, "task", "create", *FITTING, "--challenge-window", "15", monkeypatch=monkeypatch
    )
    task_id = int(capsys.readouterr().out.strip().splitlines()[-1])

    # assert: the refusal names the window, its smallest value and its flag, and sent nothing; 15 s is enough
    assert short == 1
    assert "challenge_window 14 s is too short: at least 15 s (10 s + 5 blocks)" in err
    assert "--challenge-window (terms.challenge_window)" in err
    assert "bidding_duration" not in err and "round_duration" not in err
    assert fits == 0 and registry.task_count() == tasks_before + 1
    assert registry.params(task_id).challenge_window == 15
