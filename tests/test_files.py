"""Files a crash, a kill or a second run must not lose, and folders a command must be able to write."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from fedchain.cli import cli
from fedchain.errors import ConfigError, DataError
from fedchain.files import keep_aside, output_folder, writable_folder, write_atomic


def test_a_writable_folder_is_created_with_its_parents(tmp_path: Path) -> None:
    folder = writable_folder(tmp_path / "a" / "b", option="--out")

    assert folder.is_dir() and not list(folder.iterdir())  # the probe file is gone


def test_a_folder_that_cannot_be_made_is_refused_naming_the_option(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")

    with pytest.raises(ConfigError, match=r"cannot write into the folder .*a-file/runs") as caught:
        writable_folder(blocker / "runs", option="--output-dir")
    assert "--output-dir" in (caught.value.hint or "")


@pytest.mark.parametrize(
    ("command", "flag"),
    [
        (["simulate"], "--output-dir"),
        (["reproduce", "fairness"], "--output-dir"),
        (["demo"], "--run-dir"),
        (["audit", "--task", "1"], "--html"),
    ],
)
def test_commands_refuse_an_unwritable_output_folder_before_any_work(
    tmp_path: Path, command: list[str], flag: str
) -> None:
    (tmp_path / "a-file").write_text("")

    result = CliRunner().invoke(cli, [*command, flag, str(tmp_path / "a-file" / "runs")])

    assert isinstance(result.exception, ConfigError) and "cannot write into the folder" in str(result.exception)
    assert result.output == ""  # no progress bar, no data read, no chain asked


class Failed(Exception):
    """Stands for a command's set-up error or Ctrl-C."""


def test_an_output_folder_made_for_a_failed_command_is_removed_with_the_parents_it_made(tmp_path: Path) -> None:
    folder = tmp_path / "runs" / "simulate" / "run"

    with pytest.raises(Failed), output_folder(folder, option="-o") as made:
        assert made.is_dir()
        raise Failed

    assert not (tmp_path / "runs").exists() and tmp_path.is_dir()


def test_an_output_folder_that_existed_or_holds_anything_is_kept_when_the_command_fails(tmp_path: Path) -> None:
    existing = tmp_path / "existing"
    existing.mkdir()
    written = tmp_path / "new" / "run"

    with pytest.raises(Failed), output_folder(existing, option="-o"):
        raise Failed
    with pytest.raises(Failed), output_folder(written, option="-o"):
        write_atomic(written / "rounds-unfinished.json", b"[]")
        raise Failed

    assert existing.is_dir()
    assert (written / "rounds-unfinished.json").read_bytes() == b"[]"


@pytest.mark.parametrize("command", [["simulate", "--clients", "2"], ["reproduce", "fairness", "--seeds", "1"]])
def test_a_command_refused_at_set_up_leaves_no_output_folder(tmp_path: Path, command: list[str]) -> None:
    folder = tmp_path / "runs" / "mine"

    result = CliRunner().invoke(cli, [*command, "--train-samples", "200", "--rounds", "1", "-o", str(folder)])

    assert isinstance(result.exception, DataError) and "leaves no training data" in str(result.exception)
    assert not (tmp_path / "runs").exists()


def test_keep_aside_renames_a_file_or_a_folder_to_a_new_name_each_time(tmp_path: Path) -> None:
    folder = tmp_path / "series"
    names = []
    for round_ in range(2):
        (folder / "run").mkdir(parents=True)
        write_atomic(folder / "run" / "metrics.json", f"{round_}".encode())
        names.append(keep_aside(folder))

    assert names[0] != names[1] and all(n is not None and n.name.startswith("series.replaced-") for n in names)
    assert [(n / "run" / "metrics.json").read_text() for n in names if n is not None] == ["0", "1"]
    assert keep_aside(folder) is None  # nothing left to keep
