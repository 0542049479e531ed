"""How a fog node's transcript binds its job, as the committee's code checks it (real MNIST).

Every way a transcript can fail to bind the committed job (a missing checkpoint or manifest, a wrong count, a
start or end that is not the committed one, a tampered checkpoint) is the fog node's fault, and an honest one
binds and stands segment by segment.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from fedchain.client.handoff import JobData
from fedchain.store import BlobStore, open_store
from fedchain.transcripts.bench import Setting, _case, _train
from fedchain.transcripts.judge import TranscriptJob, judge_segment, search_segments
from fedchain.transcripts.record import NAMESPACE, checkpoint_meta, store_transcript

CLIENT = "0x" + "00" * 19 + "01"


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
