"""`fedchain aggregator run` refuses bad settings before it touches a chain."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedchain.aggregator import AggregatorSettings
from fedchain.cli import main
from fedchain.errors import ConfigError


@pytest.mark.parametrize(
    ("flags", "options", "message"),
    [
        (["--strategy", "fedmagic"], None, "unknown strategy 'fedmagic'"),
        (["--strategy", "fedave"], "beta: -1\n", "beta=-1.0 must be positive"),
    ],
)
def test_a_strategy_the_aggregator_cannot_run_is_refused_before_any_chain_access(
    flags: list[str], options: str | None, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    extra = []
    if options is not None:
        (tmp_path / "options.yaml").write_text(options)
        extra = ["--strategy-options", str(tmp_path / "options.yaml")]

    code = main(["aggregator", "run", "--task", "1", *flags, *extra, "--deployment", str(tmp_path / "none.json")])

    err = capsys.readouterr().err
    assert code == 1
    assert message in err and "deployment" not in err  # the missing deployment file was never reached


@pytest.mark.parametrize(
    "plan", ["0x1234@1", "0x70997970C51812dc3A010C7d01b50e0d17dc79C8", "0x70997970C51812dc3A010C7d01b50e0d17dc79C8@0"]
)
def test_a_zero_client_plan_that_is_not_address_at_round_is_a_usage_error_before_any_chain_access(
    plan: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        ["aggregator", "run", "--task", "1", "--zero-client", plan, "--deployment", str(tmp_path / "none.json")]
    )

    err = capsys.readouterr().err
    assert code == 2
    assert f"{plan!r} is not ADDRESS@ROUND" in err and "--zero-client" in err and "deployment" not in err


def test_a_crash_round_below_1_is_refused_before_any_chain_access(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        ["aggregator", "run", "--task", "1", "--crash-after-round", "0", "--deployment", str(tmp_path / "none.json")]
    )

    err = capsys.readouterr().err
    assert code == 2
    assert "--crash-after-round" in err and "deployment" not in err
    with pytest.raises(ConfigError, match="crash_after_round must be >= 1"):
        AggregatorSettings(task_id=1, state_path=tmp_path / "aggregator.json", crash_after_round=0)
