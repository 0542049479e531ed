"""The quality's settings, the floor and the data credit, with their checks, apart from the torch kernels of
:mod:`fedchain.fl.quality`.

The floor of a round (:func:`round_floor`) is the task's ``quality_floor``, raised in the early rounds to the
least quality that one poor round may score without removing a client whose earlier rounds were all at q_min or
better. The chain's mechanism (DESIGN.md, eqs. 5 and 8) makes that least quality depend on the round: in round 1
a quality below q_min leaves r_a = q squared, so q must reach sqrt(r_a_min); later the earlier rounds carry more of
the weighted mean, and the least quality falls towards r_a_min / q_min.

The task spec validates its ``quality_floor`` with :func:`check_floor`, its ``data_credit`` with
:func:`check_data_credit`, its ``quality_grace`` with :func:`check_grace` and its switches (``early_floor``,
``grace_first_round``, ``grace_first_round_loss``, ``grace_first_round_screened``, ``grace_first_round_extra``) with
:func:`check_switch`, and commands that only read specs (``--help`` included) must not load torch to do it.
"""

from __future__ import annotations

import math

from fedchain.errors import ConfigError

#: The least quality of an accepted update in a task built today (:attr:`fedchain.taskspec.TaskSpec.quality_floor`).
#: Between r_a_min (0.1 by default) and its square root: from round 3 on one poor round keeps r_a at or above
#: r_a_min, while a client whose every round sits at the floor falls below it (r_a = floor squared). In rounds 1
#: and 2 the history is too short for it (a round at 0.2 leaves r_a at 0.04 and 0.093): a spec's ``early_floor``
#: raises the floor of every round to :func:`protective_floor`, which tends to r_a_min / q_min = 0.2.
DEFAULT_QUALITY_FLOOR = 0.2


#: q_min and r_a_min of a task with the default terms (:class:`fedchain.publisher.TaskTerms` starts from them): the
#: thresholds a simulation's floor is raised for, as the chain's mechanism of its pay columns has them.
DEFAULT_MIN_QUALITY = 0.5
DEFAULT_MIN_LOSS_REPUTATION = 0.1


def check_floor(floor: float) -> None:
    """A :class:`ConfigError` unless ``0 <= floor < 1``."""
    if not (isinstance(floor, int | float) and 0 <= floor < 1):
        raise ConfigError(
            f"the quality floor must be a number in [0, 1), got {floor!r}",
            hint=f"{DEFAULT_QUALITY_FLOOR} (the default, raised in the early rounds by early_floor) keeps an honest "
            "client through one poor round; "
            "0 is the seed's measure",
        )


#: The most a contribution quality is multiplied by for a client holding less data than the round's mean
#: (:func:`fedchain.fl.quality.data_credited`; :attr:`fedchain.taskspec.TaskSpec.data_credit`). 4: a client with a
#: quarter of the mean data or more is judged per sample; one claiming less gains no more.
DEFAULT_DATA_CREDIT = 4.0

#: Poor rounds per client and task that a task built today scores at q_min (:func:`fedchain.fl.quality.graced`);
#: a spec stored before the rule reads 0.
DEFAULT_QUALITY_GRACE = 2


def protective_floor(round_number: int, *, min_quality: float, min_loss_reputation: float) -> float:
    """The least quality that keeps r_a at ``min_loss_reputation`` in round ``round_number`` after earlier rounds at
    ``min_quality``: the root of ``((n - 1) q_min + 2 f) / (n + 1) * f = r_a_min`` (linear weights ``2j / (n (n+1))``,
    and r_a times f for a round below q_min), rounded up to 3 decimals so that the chain's fixed point keeps it,
    and at most q_min (a round at q_min is not decayed at all).

    With the default terms (q_min 0.5, r_a_min 0.1): 0.317 in round 1, 0.282 in round 2, 0.263 in round 3,
    0.25 in round 4, towards 0.2 = r_a_min / q_min.
    """
    if round_number < 1:
        raise ConfigError(f"rounds count from 1, got round {round_number}")
    if not (min_quality > 0 and min_loss_reputation >= 0):
        raise ConfigError(
            f"q_min must be positive and r_a_min non-negative, got {min_quality} and {min_loss_reputation}"
        )
    earlier = (round_number - 1) * min_quality
    root = (-earlier + math.sqrt(earlier * earlier + 8 * (round_number + 1) * min_loss_reputation)) / 4
    return min(math.ceil(root * 1000 - 1e-9) / 1000, min_quality)


def round_floor(
    floor: float, round_number: int, *, early: bool, min_quality: float, min_loss_reputation: float
) -> float:
    """The least quality of an accepted update in round ``round_number``: ``floor``, raised to
    :func:`protective_floor` when ``early`` (a task spec's ``early_floor``) and the floor is on (``floor > 0``).

    Then one poor round removes no client that had no poor round before, in any round; a client that scores at
    the floor round after round still falls below r_a_min (in round 2 with the default terms). The round is the
    task's: a client with a skipped round before (void, neutral, no commit) has fewer scored rounds on chain and
    is protected less (docs/robustness.md, "The first rounds").
    """
    check_floor(floor)
    if not early or floor == 0 or min_quality <= 0:  # q_min 0: no round is ever decayed, nothing to protect
        return floor
    raised = protective_floor(round_number, min_quality=min_quality, min_loss_reputation=min_loss_reputation)
    return max(floor, min(raised, 0.999))


def check_switch(name: str, value: object) -> None:
    """A :class:`ConfigError` unless setting ``name`` (``early_floor``, ``grace_first_round``,
    ``grace_first_round_loss``, ``grace_first_round_screened``, ``grace_first_round_extra``,
    ``grace_two_in_a_row``) is a boolean."""
    if not isinstance(value, bool):
        raise ConfigError(f"{name} must be true or false, got {value!r}")


def check_grace(allowance: object) -> None:
    """A :class:`ConfigError` unless ``allowance`` is a whole number >= 0."""
    if isinstance(allowance, bool) or not isinstance(allowance, int) or allowance < 0:
        raise ConfigError(
            f"quality_grace must be a whole number of rounds >= 0, got {allowance!r}",
            hint=f"{DEFAULT_QUALITY_GRACE} (the default) forgives an honest client's odd poor round; 0 turns it off",
        )


def check_data_credit(credit: float) -> None:
    """A :class:`ConfigError` unless ``credit`` is a finite number >= 1."""
    if not (isinstance(credit, int | float) and math.isfinite(credit) and credit >= 1):
        raise ConfigError(
            f"the data credit must be a finite number >= 1, got {credit!r}",
            hint=f"{DEFAULT_DATA_CREDIT} (the default) judges a small client's contribution per sample; "
            "1 is the contribution as it is",
        )


__all__ = [
    "DEFAULT_DATA_CREDIT",
    "DEFAULT_MIN_LOSS_REPUTATION",
    "DEFAULT_MIN_QUALITY",
    "DEFAULT_QUALITY_FLOOR",
    "DEFAULT_QUALITY_GRACE",
    "check_data_credit",
    "check_floor",
    "check_grace",
    "protective_floor",
    "round_floor",
]
