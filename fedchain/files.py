"""Writing files so that a crash, a kill or a second run never loses one."""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from fedchain.errors import ConfigError


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that readers and crashes see the old or the new bytes, never a mix.

    The bytes go to a temporary file beside ``path``, are flushed to disk and
    renamed over it; the folder is created when missing.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def writable_folder(path: Path, *, option: str) -> Path:
    """``path`` as a folder this process can write into, created when missing.

    Checked when a command starts, so that an unwritable folder is a clear
    error naming ``option`` (the flag that chose it) rather than a traceback
    after the first hour of work.
    """
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as err:
        raise ConfigError(
            f"cannot write into the folder {path}: {err.strerror or err}",
            hint=f"choose a folder you can write to with {option}",
        ) from err
    return path


@contextlib.contextmanager
def output_folder(path: Path, *, option: str) -> Iterator[Path]:
    """:func:`writable_folder` for the length of a command that writes its results there.

    When the command fails (a set-up error, Ctrl-C) before it has written
    anything, the folders this call created are removed again, so a refused
    command leaves nothing behind; a folder that holds anything is kept.
    """
    created = [folder for folder in (path, *path.parents) if not folder.exists()]  # deepest first
    writable_folder(path, option=option)
    try:
        yield path
    except BaseException:
        for folder in created:
            with contextlib.suppress(OSError):  # not empty: it holds what the command wrote
                folder.rmdir()
        raise


def keep_aside(path: Path) -> Path | None:
    """Rename an existing file or folder ``path`` to ``NAME.replaced-UTCTIME.EXT`` beside it; returns the new name.

    ``None`` when nothing is at ``path``. The new name is one that nothing has
    yet (``-2``, ``-3``... after the time when a second one comes within a second).
    """
    if not path.exists():
        return None
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    backup = path.with_name(f"{path.stem}.replaced-{stamp}{path.suffix}")
    number = 1
    while backup.exists():
        number += 1
        backup = path.with_name(f"{path.stem}.replaced-{stamp}-{number}{path.suffix}")
    path.rename(backup)
    return backup
