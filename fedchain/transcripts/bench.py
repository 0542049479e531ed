"""``fedchain bench transcripts``: honest segment drift and cheats, judged the way a fog challenge judges them.

For every job setting (dataset, model, samples per job, local epochs) the benchmark trains a few jobs with every
engine and thread count a fog node may use, each keeping its transcript, and judges every segment of every job
with the committee's code (:func:`~fedchain.transcripts.judge.search_segments` over a temporary store: the
binding checks, then each segment re-executed the reference way from the node's own checkpoint). An honest node
must never be convicted; :attr:`HonestDrift.largest` is how close it came to the tolerance.

Then it builds, from the reference run, what a node that did not train as told commits (:data:`CHEATS`), and
judges it as a client's search would (in order, up to the first segment that convicts). Every cheat must be
caught; :attr:`CheatCatch.smallest` is the least convicting distance over the jobs (infinite when the transcript
itself did not bind the job).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import click
import torch

from fedchain.console import machine_json

if TYPE_CHECKING:
    from fedchain.client.handoff import JobData
    from fedchain.taskspec import TaskSpec
    from fedchain.trainer.local import Checkpoints
    from fedchain.transcripts.judge import SegmentJudgement

log = logging.getLogger(__name__)

#: Engines and torch threads a fog node may train with on a CPU (the process engine's workers run one thread).
CPU_VARIANTS: tuple[tuple[str, int], ...] = (
    ("sequential", 1),
    ("sequential", 2),
    ("process", 1),
    ("stacked", 1),
    ("stacked", 2),
    ("vmap", 1),
    ("vmap", 2),
)
#: What the GPU adds when CUDA is present (the fog node's default engine there is stacked).
CUDA_VARIANTS: tuple[tuple[str, int], ...] = (("sequential", 1), ("stacked", 1), ("vmap", 1))

#: What a node that did not train as told commits, with its transcript.
CHEATS = (
    "zero update, interpolated transcript",
    "half the samples, interpolated transcript",
    "half the samples, trained, checkpoints twice as often",
    "another shuffle seed, trained transcript",
    "disguised free rider, interpolated transcript",
    "disguised free rider as the last checkpoint of an honest transcript",
    "half the steps of every segment, trained transcript",
    "fewer steps: the first half of the job's transcript",
)


@dataclass(frozen=True)
class Setting:
    """One kind of job: ``jobs`` clients of ``samples`` samples each, ``epochs`` local epochs."""

    dataset: str
    model: str
    samples: int
    epochs: int
    jobs: int = 2

    @property
    def label(self) -> str:
        return f"{self.dataset} {self.model} {self.samples}x{self.epochs}"


@dataclass(frozen=True)
class HonestDrift:
    """One engine's honest transcripts of a setting, judged segment by segment."""

    setting: Setting
    engine: str
    threads: int
    device: str
    segments: int
    #: The largest segment distance over every segment of every job.
    largest: float
    #: Jobs with a segment upheld (an honest node convicted): must be 0.
    convicted: int
    train_s: float


@dataclass(frozen=True)
class CheatCatch:
    """One cheat of a setting, searched as a client searches."""

    setting: Setting
    cheat: str
    #: Jobs whose search found a convicting segment, of ``jobs``.
    caught: int
    jobs: int
    #: The least convicting distance over the jobs (inf: the transcript did not bind the job).
    smallest: float
    #: A binding fault the judge named, if any.
    fault: str | None


@dataclass(frozen=True)
class SettingCost:
    """What transcripts cost in a setting: the fog node's time and bytes per job, and a dispute's re-execution."""

    setting: Setting
    every: int
    checkpoints: int
    checkpoint_bytes: int
    #: Seconds to train the whole job with its transcript kept, and without (the reference engine, one thread).
    job_s: float
    plain_job_s: float
    #: Seconds to encode, hash and store one job's transcript (a local store).
    store_s: float
    #: Seconds to re-execute one segment the reference way (the committee's work).
    segment_s: float

    @property
    def overhead(self) -> float:
        """The fog node's extra time for the transcript, relative to training the job without one."""
        return (self.job_s + self.store_s) / self.plain_job_s - 1


@dataclass(frozen=True)
class _Case:
    """Jobs of a setting, ready to train and judge."""

    setting: Setting
    spec: TaskSpec
    data: tuple[JobData, ...]
    start: torch.Tensor


def _case(setting: Setting, every: int, data_root: str | None) -> _Case:
    from fedchain.client.handoff import JobData, JobDataMeta
    from fedchain.data.datasets import load_dataset
    from fedchain.fl.params import flatten
    from fedchain.taskspec import TaskSpec

    spec = TaskSpec(dataset=setting.dataset, model=setting.model, local_epochs=setting.epochs, transcript_every=every)
    train = load_dataset(setting.dataset, train=True, root=data_root)
    data = tuple(
        JobData(
            train.images[i * setting.samples : (i + 1) * setting.samples],
            train.labels[i * setting.samples : (i + 1) * setting.samples],
            JobDataMeta(task_id=1, client_index=i, dataset=setting.dataset),
            bytes(32),
        )
        for i in range(setting.jobs)
    )
    return _Case(setting, spec, data, flatten(spec.initial_params(), spec.param_spec())[0])


def _train(
    case: _Case, engine: str, threads: int, device: str = "cpu", *, every: int | None = None, **change: Any
) -> tuple[list[Checkpoints], float]:
    """Each job's checkpoints trained by ``engine`` (every ``every`` steps, default the spec's; ``change``: other
    training settings, a cheat's), and the seconds it took."""
    from fedchain.trainer.trainer import Trainer

    config = dataclasses.replace(case.spec.train_config(1), **change)
    started = time.perf_counter()
    with Trainer(case.spec.model_spec(), engine=engine, device=device, threads=threads) as trainer:  # type: ignore[arg-type]
        result = trainer.train(
            case.start,
            [(d.images, d.labels) for d in case.data],
            client_ids=list(range(len(case.data))),
            config=config,
            checkpoint_every=every or _every(case, 0),
        )
    assert result.checkpoints is not None
    return list(result.checkpoints), time.perf_counter() - started


def _every(case: _Case, job: int) -> int:
    from fedchain.trainer.local import steps_per_client

    return case.spec.checkpoint_every(steps_per_client(len(case.data[job]), case.spec.train_config(1)))


def _client(job: int) -> str:
    """The address job ``job``'s client has in the benchmark."""
    return "0x" + "00" * 19 + f"{job + 1:02x}"


def judge(case: _Case, job: int, checkpoints: Checkpoints, *, every_segment: bool) -> tuple[SegmentJudgement, ...]:
    """Job ``job``'s transcript ``checkpoints`` judged by the committee's code, through a temporary store."""
    from fedchain.store import open_store
    from fedchain.transcripts.judge import TranscriptJob, search_segments
    from fedchain.transcripts.record import checkpoint_meta, store_transcript

    client = _client(job)
    meta = checkpoint_meta(case.spec, 1, 1, job, client)
    with tempfile.TemporaryDirectory() as folder:
        store = open_store(folder)
        transcript = store_transcript(store, case.spec, checkpoints, meta)
        update = checkpoints.params[-1] - case.start
        task = TranscriptJob(case.spec, 1, 1, job, client, case.data[job], case.start, update, transcript.root)
        return search_segments(store, task, every_segment=every_segment)


def honest_drift(case: _Case, variants: Sequence[tuple[str, int, str]]) -> Iterator[HonestDrift]:
    """Every variant's transcripts of ``case``'s jobs, every segment judged."""
    from fedchain.transcripts.judge import first_upheld

    for engine, threads, device in variants:
        transcripts, seconds = _train(case, engine, threads, device)
        judged = [judge(case, j, t, every_segment=True) for j, t in enumerate(transcripts)]
        row = HonestDrift(
            case.setting,
            engine,
            threads,
            device,
            len(judged[0]),
            max(s.distance for segments in judged for s in segments),
            sum(first_upheld(segments) is not None for segments in judged),
            seconds,
        )
        log.info(
            "%s %s x%d %s: largest %.3g, convicted %d",
            case.setting.label,
            engine,
            threads,
            device,
            row.largest,
            row.convicted,
        )
        yield row


def _cheats(case: _Case) -> Iterator[tuple[str, list[Checkpoints]]]:
    """Each cheat of :data:`CHEATS` and the transcript it commits per job."""
    from fedchain.trainer.local import steps_per_client
    from fedchain.transcripts.record import fabricated, with_end
    from fedchain.transcripts.segments import JobShape

    spec = case.spec
    momentum = bool(spec.momentum)
    honest, _ = _train(case, "sequential", 1)
    shapes = [(steps_per_client(len(d), spec.train_config(1)), _every(case, j)) for j, d in enumerate(case.data)]
    updates = torch.stack([t.params[-1] - case.start for t in honest]).to(torch.float64)
    half = _Case(case.setting, spec, tuple(_halved(d) for d in case.data), case.start)
    # checkpoints often enough that the half job's transcript has as many as the whole job's
    half_steps = steps_per_client(len(half.data[0]), spec.train_config(1))
    halved, _ = _train(half, "sequential", 1, every=math.ceil(half_steps / JobShape(*shapes[0]).segments))
    reseeded, _ = _train(case, "sequential", 1, seed=spec.train_config(1).seed + 1)
    n = len(case.data)
    generator = torch.Generator().manual_seed(0)
    others = torch.stack([torch.cat([updates[:i], updates[i + 1 :]]).mean(dim=0) for i in range(n)])
    noise = torch.randn(others.shape, generator=generator, dtype=torch.float64)
    free_rider = (others + noise * 0.1 * others.norm(dim=1, keepdim=True) / others.shape[1] ** 0.5).to(torch.float32)

    def line(end: Callable[[int], torch.Tensor]) -> list[Checkpoints]:
        return [fabricated(case.start, end(j), steps, every, momentum) for j, (steps, every) in enumerate(shapes)]

    yield CHEATS[0], line(lambda j: case.start.clone())
    yield CHEATS[1], line(lambda j: halved[j].params[-1])
    yield CHEATS[2], halved
    yield CHEATS[3], reseeded
    yield CHEATS[4], line(lambda j: case.start + free_rider[j])
    yield CHEATS[5], [with_end(t, case.start + free_rider[j]) for j, t in enumerate(honest)]
    yield CHEATS[6], [_half_steps(case, j, steps, every) for j, (steps, every) in enumerate(shapes)]
    yield CHEATS[7], [_first_half(t) for t in honest]


def _first_half(checkpoints: Checkpoints) -> Checkpoints:
    """The transcript of the first half of a job's checkpoints (what a node that stopped half way has)."""
    from fedchain.trainer.local import Checkpoints

    kept = max(2, checkpoints.params.shape[0] // 2)
    velocity = checkpoints.velocity[:kept] if checkpoints.velocity is not None else None
    return Checkpoints(checkpoints.every, (kept - 1) * checkpoints.every, checkpoints.params[:kept], velocity)


def _halved(data: JobData) -> JobData:
    half = len(data) // 2
    return dataclasses.replace(data, images=data.images[:half], labels=data.labels[:half])


def _half_steps(case: _Case, job: int, steps: int, every: int) -> Checkpoints:
    """A transcript of the job's checkpoint count in which every segment ran only the first half of its steps."""
    from fedchain.trainer.local import (
        Checkpoints,
        client_generator,
        flat_state,
        load_flat,
        prepare_model,
        train_segment,
    )
    from fedchain.transcripts.segments import JobShape

    spec = case.spec
    config = spec.train_config(1)
    param_spec = spec.param_spec()
    data = case.data[job]
    model = prepare_model(spec.model_spec().build(), torch.device("cpu"))
    load_flat(model, case.start, param_spec)
    shape = JobShape(steps, every)
    states, velocity = [case.start.clone()], None
    for segment in range(shape.segments):
        span = shape.steps_of(segment)
        velocity = train_segment(
            model,
            param_spec,
            data.images,
            data.labels,
            config,
            client_generator(config.seed, job),
            range(span.start, span.start + max(1, len(span) // 2)),
            velocity,
        )
        states.append(flat_state(model, param_spec))
    params = torch.stack(states)
    return Checkpoints(every, steps, params, torch.zeros_like(params) if config.momentum else None)


def cheat_catches(case: _Case) -> Iterator[CheatCatch]:
    """Every cheat of ``case``'s jobs, searched in order as a client does."""
    from fedchain.transcripts.judge import first_upheld

    for name, transcripts in _cheats(case):
        found = [first_upheld(judge(case, j, t, every_segment=False)) for j, t in enumerate(transcripts)]
        caught = [f for f in found if f is not None]
        row = CheatCatch(
            case.setting,
            name,
            len(caught),
            len(found),
            min((f.distance for f in caught), default=math.nan),
            next((f.fault for f in caught if f.fault is not None), None),
        )
        log.info("%s %s: caught %d/%d", case.setting.label, name, row.caught, row.jobs)
        yield row


def setting_cost(case: _Case) -> SettingCost:
    """The fog node's time and bytes for a job's transcript, and the committee's re-execution of one segment
    against the whole job."""
    from fedchain.store import open_store
    from fedchain.trainer.trainer import Trainer
    from fedchain.transcripts.record import checkpoint_meta, store_transcript
    from fedchain.transcripts.segments import JobShape, State, reexecute_segment
    from fedchain.updates import checkpoint_bytes

    spec = case.spec
    jobs = len(case.data)
    transcripts, seconds = _train(case, "sequential", 1)
    started = time.perf_counter()
    with Trainer(spec.model_spec(), engine="sequential", threads=1) as trainer:
        pairs = [(d.images, d.labels) for d in case.data]
        trainer.train(case.start, pairs, client_ids=list(range(jobs)), config=spec.train_config(1))
    plain_s = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as folder:
        store = open_store(folder)
        started = time.perf_counter()
        for job, checkpoints in enumerate(transcripts):
            store_transcript(store, spec, checkpoints, checkpoint_meta(spec, 1, 1, job, _client(job)))
        store_s = time.perf_counter() - started
    first = transcripts[0]
    shape = JobShape(first.steps, first.every)
    started = time.perf_counter()
    reexecute_segment(spec, State(case.start), case.data[0], 1, 0, shape.steps_of(0))
    segment_s = time.perf_counter() - started
    size = checkpoint_bytes(spec.param_spec(), bool(spec.momentum))
    return SettingCost(
        case.setting, first.every, shape.checkpoints, size, seconds / jobs, plain_s / jobs, store_s / jobs, segment_s
    )


#: The settings measured by default: every engine's drift is then measured on jobs of 600 to 6,000 samples,
#: 1 to 3 local epochs, both models and both datasets.
DEFAULT_SETTINGS = tuple(
    Setting(dataset, model, samples, epochs)
    for dataset in ("mnist", "fashion_mnist")
    for model in ("lenet5", "cnn")
    for samples, epochs in ((600, 1), (600, 3), (6000, 1), (6000, 3))
)


def run_bench(
    settings: Sequence[Setting], every: int | None, data_root: str | None, *, cheats: bool = True
) -> tuple[list[HonestDrift], list[CheatCatch], list[SettingCost]]:
    """The benchmark's rows (see the module docstring)."""
    from fedchain.taskspec import DEFAULT_TRANSCRIPT_EVERY

    variants = [(engine, threads, "cpu") for engine, threads in CPU_VARIANTS]
    if torch.cuda.is_available():
        variants += [(engine, threads, "cuda") for engine, threads in CUDA_VARIANTS]
    honest: list[HonestDrift] = []
    caught: list[CheatCatch] = []
    costs: list[SettingCost] = []
    for setting in settings:
        case = _case(setting, every or DEFAULT_TRANSCRIPT_EVERY, data_root)
        honest += honest_drift(case, variants)
        if cheats:
            caught += cheat_catches(case)
        costs.append(setting_cost(case))
    return honest, caught, costs


def _setting(text: str) -> Setting:
    try:
        dataset, model, samples, epochs = text.split(":")
        return Setting(dataset, model, int(samples), int(epochs))
    except ValueError as err:
        raise click.BadParameter(f"{text!r}: give dataset:model:samples:epochs, e.g. mnist:cnn:6000:3") from err


@click.command(name="transcripts")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
@click.option(
    "--setting",
    "settings",
    multiple=True,
    help="A job setting dataset:model:samples:epochs (repeat the option) [default: both datasets and models, "
    "600 and 6000 samples, 1 and 3 epochs].",
)
@click.option("--every", type=click.IntRange(min=1), default=None, help="Steps per checkpoint [default: the spec's].")
@click.option("--no-cheats", is_flag=True, help="Measure honest drift only.")
@click.option("--data-root", help="Dataset folder. [default: FEDCHAIN_DATA_ROOT]")
def transcripts(
    as_json: bool, settings: tuple[str, ...], every: int | None, no_cheats: bool, data_root: str | None
) -> None:
    """Honest drift of every segment of every engine's transcripts, and every cheat's catch, against the segment
    tolerance a fog challenge is judged by."""
    from fedchain.transcripts.segments import SEGMENT_TOLERANCE

    chosen = [_setting(s) for s in settings] or list(DEFAULT_SETTINGS)
    honest, caught, costs = run_bench(chosen, every, data_root, cheats=not no_cheats)
    if as_json:
        click.echo(
            machine_json(
                {
                    "segment_tolerance": SEGMENT_TOLERANCE,
                    "honest": [asdict(r) for r in honest],
                    "cheats": [asdict(r) for r in caught],
                    "costs": [asdict(r) for r in costs],
                }
            )
        )
        return
    click.echo("honest transcripts: largest segment distance over every segment of every job, jobs convicted")
    for h in honest:
        click.echo(
            f"  {h.setting.label:<28} {h.engine:<10} x{h.threads} {h.device:<4} {h.segments:>4} segments "
            f"{h.largest:10.3g}  convicted {h.convicted}/{h.setting.jobs}  ({h.train_s:.1f} s)"
        )
    if caught:
        click.echo("cheats: jobs caught, least convicting distance (inf: the transcript does not bind the job)")
        for c in caught:
            click.echo(f"  {c.setting.label:<28} {c.cheat:<68} {c.caught}/{c.jobs} {c.smallest:10.3g}")
    click.echo(
        "cost per job: checkpoints stored, the fog node's training with its transcript (and storing it) against "
        "without, one segment re-executed by the committee"
    )
    for k in costs:
        click.echo(
            f"  {k.setting.label:<28} every {k.every} steps: {k.checkpoints} checkpoints of {k.checkpoint_bytes:,} B "
            f"({k.checkpoints * k.checkpoint_bytes / 1e6:.1f} MB); job {k.job_s:.2f} s + store {k.store_s:.2f} s "
            f"against {k.plain_job_s:.2f} s ({k.overhead:+.0%}); one segment {k.segment_s:.3f} s"
        )
    largest = max(h.largest for h in honest)
    convicted = sum(h.convicted for h in honest)
    line = f"segment tolerance {SEGMENT_TOLERANCE:g}: largest honest drift {largest:.3g}, {convicted} honest jobs convicted"
    if caught:
        finite = [c.smallest for c in caught if math.isfinite(c.smallest)]
        missed = sum(c.jobs - c.caught for c in caught)
        line += f"; nearest cheat {min(finite, default=math.inf):.3g}, {missed} cheating jobs missed"
    click.echo(line)


__all__ = ["CHEATS", "CheatCatch", "HonestDrift", "Setting", "SettingCost", "run_bench", "transcripts"]
