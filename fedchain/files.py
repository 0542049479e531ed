"""Writing files so that a crash, a kill or a second run never loses one."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path


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
