"""Every cheat of :data:`fedchain.transcripts.bench.CHEATS` is caught, searched as a client searches (real MNIST
and Fashion-MNIST): each convicted at least twice the segment tolerance away."""

from __future__ import annotations

import pytest

from fedchain.taskspec import DEFAULT_TRANSCRIPT_EVERY
from fedchain.transcripts.bench import CHEATS, Setting, _case, cheat_catches
from fedchain.transcripts.segments import SEGMENT_TOLERANCE

CHEAT_SETTINGS = (Setting("mnist", "cnn", 600, 1), Setting("fashion_mnist", "lenet5", 1200, 2))


@pytest.mark.parametrize("setting", CHEAT_SETTINGS, ids=lambda s: s.label.replace(" ", "-"))
def test_every_cheat_is_caught_on_every_job(setting: Setting) -> None:
    # act
    rows = list(cheat_catches(_case(setting, DEFAULT_TRANSCRIPT_EVERY, None)))

    # assert: every cheat of every job convicted, each at least twice the tolerance
    assert [(r.cheat, r.caught) for r in rows] == [(cheat, setting.jobs) for cheat in CHEATS]
    assert min(r.smallest for r in rows) > 2 * SEGMENT_TOLERANCE
