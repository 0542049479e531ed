"""The quality's settings, the floor and the data credit, with their checks, apart from the torch kernels of
:mod:`fedchain.fl.quality`.

The task spec validates its ``quality_floor`` with :func:`check_floor` and its ``data_credit`` with
:func:`check_data_credit`, and commands that only read specs (``--help`` included) must not load torch to do it.
"""

from __future__ import annotations

import math

from fedchain.errors import ConfigError

#: The least quality of an accepted update in a task built today (:attr:`fedchain.taskspec.TaskSpec.quality_floor`).
#: Between r_a_min (0.1 by default) and its square root: from round 3 on one poor round keeps r_a at or above
#: r_a_min, while a client whose every round sits at the floor falls below it (r_a = floor squared). In rounds 1
#: and 2 the history is too short: a floored round there still removes the client (r_a 0.04 and 0.093).
DEFAULT_QUALITY_FLOOR = 0.2


def check_floor(floor: float) -> None:
    """A :class:`ConfigError` unless ``0 <= floor < 1``."""
    if not (isinstance(floor, int | float) and 0 <= floor < 1):
        raise ConfigError(
            f"the quality floor must be a number in [0, 1), got {floor!r}",
            hint=f"{DEFAULT_QUALITY_FLOOR} (the default) keeps an honest client through one poor round from round 3 on; "
            "0 is the seed's measure",
        )


#: The most a contribution quality is multiplied by for a client holding less data than the round's mean
#: (:func:`fedchain.fl.quality.data_credited`; :attr:`fedchain.taskspec.TaskSpec.data_credit`). 4: a client with a
#: quarter of the mean data or more is judged per sample; one claiming less gains no more.
DEFAULT_DATA_CREDIT = 4.0


def check_data_credit(credit: float) -> None:
    """A :class:`ConfigError` unless ``credit`` is a finite number >= 1."""
    if not (isinstance(credit, int | float) and math.isfinite(credit) and credit >= 1):
        raise ConfigError(
            f"the data credit must be a finite number >= 1, got {credit!r}",
            hint=f"{DEFAULT_DATA_CREDIT} (the default) judges a small client's contribution per sample; "
            "1 is the contribution as it is",
        )


__all__ = ["DEFAULT_DATA_CREDIT", "DEFAULT_QUALITY_FLOOR", "check_data_credit", "check_floor"]
