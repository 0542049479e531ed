"""`fedchain demo` refuses bad input with a hint before it starts a chain or a process."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedchain.cli import main
from fedchain.data import DATA_ROOT_ENV


def test_demo_without_a_data_root_says_how_to_give_one_and_starts_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(DATA_ROOT_ENV, raising=False)
    run_dir = tmp_path / "run"

    status = main(["demo", "--run-dir", str(run_dir)])

    err = capsys.readouterr().err
    assert status == 1
    assert DATA_ROOT_ENV in err and "--data-root" in err and "hint:" in err
    assert not run_dir.exists()


def test_demo_refuses_a_run_folder_that_is_not_empty(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "deployment.json").write_text("{}")

    status = main(["demo", "--run-dir", str(run_dir)])

    err = capsys.readouterr().err
    assert status == 1 and "is not empty" in err and "--run-dir" in err


@pytest.mark.parametrize("flag", ["--clients", "--fogs", "--rounds"])
def test_demo_refuses_zero_participants_or_rounds(
    flag: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(["demo", "--run-dir", str(tmp_path / "run"), flag, "0"])

    assert status == 1 and f"{flag} must be at least 1" in capsys.readouterr().err


def test_the_challenge_window_leaves_the_publishers_work_allowance_and_spans_blocks_on_a_block_clock() -> None:
    from fedchain.demo import CHALLENGE_BLOCKS, CHALLENGE_S, CHALLENGE_WORK_S, DemoConfig
    from fedchain.publisher.terms import CHALLENGE_WORK_S as PUBLISHER_WORK_S

    assert CHALLENGE_WORK_S == PUBLISHER_WORK_S
    assert DemoConfig().challenge_seconds == CHALLENGE_S  # automine: the measured work, with room
    assert DemoConfig(block_time=2).challenge_seconds == CHALLENGE_WORK_S + 2 * CHALLENGE_BLOCKS
    assert DemoConfig(block_time=12).challenge_seconds == CHALLENGE_WORK_S + 12 * CHALLENGE_BLOCKS
    assert DemoConfig(block_time=12, challenge_window=300).challenge_seconds == 300
    assert (
        DemoConfig(rpc_url="http://127.0.0.1:8545").challenge_seconds_on(2.0) == CHALLENGE_WORK_S + 2 * CHALLENGE_BLOCKS
    )


@pytest.mark.parametrize("block_time", [2.0, 12.0])
def test_a_demo_on_another_chain_sizes_its_windows_from_the_interval_it_measured_as_block_time_does(
    block_time: float,
) -> None:
    from fedchain.chain.blocktime import BlockInterval
    from fedchain.demo import DemoConfig
    from fedchain.publisher.terms import check_windows

    on_rpc = DemoConfig(rpc_url="http://127.0.0.1:8545")
    measured = BlockInterval(block_time, on_demand=False, gaps=10)

    sized = on_rpc.terms(block_time)

    assert sized == DemoConfig(block_time=block_time).terms()
    assert check_windows(sized, measured, confirmations=0) == []
    # the automine windows the demo used on any --rpc-url chain before: refused on this clock
    assert check_windows(on_rpc.terms(), measured, confirmations=0) != []


def test_demo_with_a_store_bucket_that_does_not_exist_stops_before_any_chain_or_folder(
    s3_url: str, data_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"

    status = main(["demo", "--run-dir", str(run_dir), "--data-root", str(data_root), "--store", "s3://no-such/demo"])

    err = capsys.readouterr().err
    assert status == 1
    assert "the bucket 'no-such'" in err and "does not exist" in err and "aws s3 mb s3://no-such" in err
    assert not run_dir.exists()
