"""A fog node's training transcript judged as the committee and the client judge it (real MNIST and Fashion-MNIST).

Honest transcripts of every CPU engine and thread count are never convicted; every cheat of
:data:`fedchain.transcripts.bench.CHEATS` is caught; every way a transcript can fail to bind its job (a missing
checkpoint or manifest, a wrong count, a start or end that is not the committed one) is the fog node's fault.
The full matrix (jobs of 600 and 6,000 samples, 1 and 3 epochs, both models and datasets) is
`fedchain bench transcripts`; here a subset that spans it.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from fedchain.client.handoff import JobData
from fedchain.store import BlobStore, open_store
from fedchain.taskspec import DEFAULT_TRANSCRIPT_EVERY
from fedchain.transcripts.bench import CHEATS, CPU_VARIANTS, Setting, _case, _train, cheat_catches, honest_drift
from fedchain.transcripts.judge import TranscriptJob, judge_segment, search_segments
from fedchain.transcripts.record import NAMESPACE, checkpoint_meta, store_transcript
from fedchain.transcripts.segments import SEGMENT_TOLERANCE

CLIENT = "0x" + "00" * 19 + "01"

#: Jobs that span the matrix: small and large, one and three epochs, both models and datasets.
HONEST_SETTINGS = (
    Setting("mnist", "lenet5", 6000, 1, jobs=1),
    Setting("fashion_mnist", "cnn", 600, 3, jobs=1),
    Setting("fashion_mnist", "lenet5", 1200, 2, jobs=2),
)
CHEAT_SETTINGS = (Setting("mnist", "cnn", 600, 1), Setting("fashion_mnist", "lenet5", 1200, 2))


@pytest.mark.parametrize("setting", HONEST_SETTINGS, ids=lambda s: s.label.replace(" ", "-"))
def test_no_honest_transcript_of_any_cpu_engine_or_thread_count_is_convicted(setting: Setting) -> None:
    # act: every CPU engine and thread count trains the jobs, every segment judged by the committee's code
    rows = list(honest_drift(_case(setting, DEFAULT_TRANSCRIPT_EVERY, None), [(e, t, "cpu") for e, t in CPU_VARIANTS]))

    # assert: nobody convicted, and the largest drift well below the tolerance (the bench reports the margin)
    assert [(r.engine, r.threads, r.convicted) for r in rows] == [(e, t, 0) for e, t in CPU_VARIANTS]
    assert max(r.largest for r in rows) < SEGMENT_TOLERANCE / 2
    assert all(r.segments >= 2 for r in rows)


@pytest.mark.parametrize("setting", CHEAT_SETTINGS, ids=lambda s: s.label.replace(" ", "-"))
def test_every_cheat_is_caught_on_every_job(setting: Setting) -> None:
    # act
    rows = list(cheat_catches(_case(setting, DEFAULT_TRANSCRIPT_EVERY, None)))

    # assert: every cheat of every job convicted, each at least twice the tolerance
    assert [(r.cheat, r.caught) for r in rows] == [(cheat, setting.jobs) for cheat in CHEATS]
    assert min(r.smallest for r in rows) > 2 * SEGMENT_TOLERANCE


@dataclasses.dataclass
class Committed:
    """One honest job's transcript in a store, and the job as the chain has it."""

    store: BlobStore
    job: TranscriptJob
    hashes: tuple[bytes, ...]


@pytest.fixture(scope="module")
def honest(tmp_path_factory: pytest.TempPathFactory) -> Committed:
    case = _case(Setting("mnist", "lenet5", 600, 1, jobs=1), 20, None)
    (checkpoints,), _ = _train(case, "stacked", 2)
    store = open_store(str(tmp_path_factory.mktemp("store")))
    transcript = store_transcript(store, case.spec, checkpoints, checkpoint_meta(case.spec, 1, 1, 0, CLIENT))
    update = checkpoints.params[-1] - case.start
    job = TranscriptJob(case.spec, 1, 1, 0, CLIENT, case.data[0], case.start, update, transcript.root)
    return Committed(store, job, transcript.hashes)


def copy_of(committed: Committed, tmp_path: Path) -> BlobStore:
    """A store of its own holding ``committed``'s objects, for a test to damage."""
    store = open_store(str(tmp_path))
    for digest in committed.hashes:
        store.put(committed.store.get(digest))
    store.put_keyed(NAMESPACE, committed.job.root, committed.store.get_keyed(NAMESPACE, committed.job.root))
    return store


def test_an_honest_transcript_binds_its_job_and_every_segment_stands(honest: Committed) -> None:
    judged = search_segments(honest.store, honest.job, every_segment=True)

    assert [j.segment for j in judged] == list(range(honest.job.shape.segments)) == [0, 1, 2]
    assert not any(j.upheld for j in judged) and all(j.fault is None for j in judged)
    assert [len(j.steps) for j in judged] == [20, 20, 20]


def test_a_segment_the_job_has_not_convicts_nobody(honest: Committed) -> None:
    judged = judge_segment(honest.store, honest.job, 7)

    assert (judged.upheld, judged.distance) == (False, 0.0)


def test_a_checkpoint_missing_from_the_store_is_the_fog_nodes_fault(honest: Committed, tmp_path: Path) -> None:
    store = copy_of(honest, tmp_path)
    Path(store.path_of(honest.hashes[2])).unlink()

    segment_1 = judge_segment(store, honest.job, 1)  # ends at the missing checkpoint
    segment_0 = judge_segment(store, honest.job, 0)  # does not touch it

    assert segment_1.upheld and segment_1.fault is not None and "checkpoint 2 is not in the store" in segment_1.fault
    assert not segment_0.upheld


def test_a_transcript_whose_manifest_is_missing_convicts_whatever_segment_is_named(
    honest: Committed, tmp_path: Path
) -> None:
    store = copy_of(honest, tmp_path)
    Path(store.keyed_path(NAMESPACE, honest.job.root)).unlink()

    judged = judge_segment(store, honest.job, 0)

    assert judged.upheld and judged.fault is not None and "not in the store" in judged.fault
    assert math.isinf(judged.distance)


@pytest.mark.parametrize(
    ("change", "fault"),
    [
        (lambda job: dataclasses.replace(job, start=job.start + 1e-3), "checkpoint 0 is not the round's start model"),
        (lambda job: dataclasses.replace(job, update=job.update * 1.01), "is not the committed update"),
        (lambda job: dataclasses.replace(job, root=bytes(32)), "not in the store"),
        (lambda job: dataclasses.replace(job, data=_first(job.data, 400)), "checkpoints; a job of 40 steps"),
    ],
    ids=["start", "update", "root", "count"],
)
def test_a_transcript_that_does_not_bind_the_committed_job_is_the_fog_nodes_fault(
    honest: Committed, change: object, fault: str
) -> None:
    job = change(honest.job)  # type: ignore[operator]

    judged = judge_segment(honest.store, job, 0)

    assert judged.upheld and judged.fault is not None and fault in judged.fault, judged.fault


def test_a_tampered_checkpoint_convicts_the_segment_that_ends_at_it(honest: Committed, tmp_path: Path) -> None:
    from fedchain.chain.merkle import IndexedTree
    from fedchain.fl.params import unflatten
    from fedchain.transcripts.record import Transcript
    from fedchain.updates import encode_checkpoint

    store = copy_of(honest, tmp_path)
    case = _case(Setting("mnist", "lenet5", 600, 1, jobs=1), 20, None)
    (checkpoints,), _ = _train(case, "sequential", 1)
    moved = checkpoints.params[1] + 0.5 * (checkpoints.params[1] - checkpoints.params[0])
    data = encode_checkpoint(unflatten(moved, case.spec.param_spec()), checkpoint_meta(case.spec, 1, 1, 0, CLIENT))
    hashes = list(honest.hashes)
    hashes[1] = store.put(data)
    tampered = Transcript(tuple(hashes))
    store.put_keyed(NAMESPACE, tampered.root, tampered.to_manifest())
    assert tampered.root == IndexedTree.of(enumerate(hashes)).root
    job = dataclasses.replace(honest.job, root=tampered.root)

    judged = search_segments(store, job)

    assert [(j.segment, j.upheld) for j in judged] == [(0, True)]
    assert judged[0].fault is None and 0.4 < judged[0].distance < 0.6


def _first(data: JobData, count: int) -> JobData:
    return dataclasses.replace(data, images=data.images[:count], labels=data.labels[:count])
