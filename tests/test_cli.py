"""The command line teaches: help for every command, errors that say what to do."""

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from fedchain.cli import COMMANDS, cli, main


def test_help_lists_every_command() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    for name in COMMANDS:
        assert name in result.output


def test_unknown_command_exits_with_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["no-such-command"]) == 2
    assert "No such command" in capsys.readouterr().err


@pytest.mark.parametrize(
    "command",
    [
        ["--help"],
        ["fog", "run", "--help"],
        ["client", "run", "--help"],
        ["aggregator", "run", "--help"],
        ["demo", "--help"],
        ["task", "create", "--help"],
        ["withdraw", "--help"],
        ["flower", "example", "--help"],
        ["flower", "join", "--help"],
    ],
)
def test_the_agents_and_task_commands_help_answers_without_loading_torch(command: list[str]) -> None:
    # torch takes seconds to import; an agent loads it to run, not to print its options, and
    # the task commands and withdraw (chain transactions) never need it to start
    probe = (
        f"import sys; from fedchain.cli import main; main({command!r}); print('torch' in sys.modules, file=sys.stderr)"
    )

    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)

    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "False"


def test_the_flower_example_refuses_a_folder_that_is_no_flower_app(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["flower", "example", "--app", str(tmp_path), "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "is not a Flower app (no pyproject.toml)" in err
    assert "examples/flower" in err  # the hint says where the example is
