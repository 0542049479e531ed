"""The quality floor's value and check, apart from the torch kernels of :mod:`fedchain.fl.quality`.

The task spec validates its ``quality_floor`` with :func:`check_floor`, and commands that only read
specs (``--help`` included) must not load torch to do it.
"""

from __future__ import annotations

from fedchain.errors import ConfigError

#: The least quality of an accepted update in a task built today (:attr:`fedchain.taskspec.TaskSpec.quality_floor`).
#: Between r_a_min (0.1 by default) and its square root: one poor round keeps r_a at or above r_a_min,
#: while a client whose every round sits at the floor falls below it (r_a = floor squared).
DEFAULT_QUALITY_FLOOR = 0.2


def check_floor(floor: float) -> None:
    """A :class:`ConfigError` unless ``0 <= floor < 1``."""
    if not (isinstance(floor, int | float) and 0 <= floor < 1):
        raise ConfigError(
            f"the quality floor must be a number in [0, 1), got {floor!r}",
            hint=f"{DEFAULT_QUALITY_FLOOR} (the default) keeps an honest client through one poor round; 0 is the seed's measure",
        )


__all__ = ["DEFAULT_QUALITY_FLOOR", "check_floor"]
