"""Honest training transcripts are never convicted, whichever CPU engine and thread count trained them (real MNIST
and Fashion-MNIST).

Every segment of every job is judged by the committee's code. The full matrix (every engine on every job of 600
and 6,000 samples, 1 and 3 epochs, both models and datasets) is `fedchain bench transcripts`; here every engine
and thread count of :data:`~fedchain.transcripts.bench.CPU_VARIANTS` trains at least one job of a subset that
spans the matrix (the reference engine, whose segments must re-execute bit for bit, among them).
"""

from __future__ import annotations

import pytest

from fedchain.taskspec import DEFAULT_TRANSCRIPT_EVERY
from fedchain.transcripts.bench import CPU_VARIANTS, Setting, _case, honest_drift
from fedchain.transcripts.segments import SEGMENT_TOLERANCE

#: Jobs that span the matrix (small and large, one to three epochs, both models and datasets), each trained by a
#: few engines, so that every engine and thread count trains one of them.
HONEST_CASES: tuple[tuple[Setting, tuple[tuple[str, int], ...]], ...] = (
    (Setting("mnist", "lenet5", 6000, 1, jobs=1), (("process", 1), ("vmap", 2), ("stacked", 1))),
    (Setting("fashion_mnist", "cnn", 600, 3, jobs=1), (("vmap", 1), ("sequential", 2), ("stacked", 2))),
    (Setting("fashion_mnist", "lenet5", 1200, 2, jobs=2), (("sequential", 1), ("vmap", 2))),
)


def test_the_cases_train_with_every_cpu_engine_and_thread_count() -> None:
    assert {variant for _, variants in HONEST_CASES for variant in variants} == set(CPU_VARIANTS)


@pytest.mark.parametrize(
    ("setting", "variants"), HONEST_CASES, ids=[s.label.replace(" ", "-") for s, _ in HONEST_CASES]
)
def test_no_honest_transcript_is_convicted(setting: Setting, variants: tuple[tuple[str, int], ...]) -> None:
    # act: the engines train the jobs, every segment judged by the committee's code
    rows = list(honest_drift(_case(setting, DEFAULT_TRANSCRIPT_EVERY, None), [(e, t, "cpu") for e, t in variants]))

    # assert: nobody convicted, and the largest drift well below the tolerance (the bench reports the margin)
    assert [(r.engine, r.threads, r.convicted) for r in rows] == [(e, t, 0) for e, t in variants]
    assert max(r.largest for r in rows) < SEGMENT_TOLERANCE / 2, [(r.engine, r.threads, r.largest) for r in rows]
    assert all(r.segments >= 2 for r in rows)
    reference = [r for r in rows if (r.engine, r.threads) == ("sequential", 1)]
    assert all(r.largest == 0.0 for r in reference)  # the reference way re-executes its own segments bit for bit
