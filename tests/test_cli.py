"""The command line teaches: help for every command, errors that say what to do."""

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
