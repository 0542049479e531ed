"""``fedchain bench drift``: the honest floating-point drift behind the entry dispute's quality tolerance.

A client or an arbiter re-scores a posted round
(:class:`fedchain.audit.scores.ScoreReproduction`) on another machine. The
figure is the largest quality difference (1e18 fixed point, shown as a
fraction) between the round scored with 1 and with several torch threads, and
with the evaluation split in other batch sizes, next to
:data:`~fedchain.disputes.judging.QUALITY_TOLERANCE`. The drift of re-executed
training, behind the fog challenges, is ``fedchain bench transcripts``
(:mod:`fedchain.transcripts.bench`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass

import click
import torch

from fedchain.console import machine_json

log = logging.getLogger(__name__)

#: The drift benchmark's jobs: clients, samples per client.
JOBS, SAMPLES = 5, 600


@dataclass(frozen=True)
class QualityDrift:
    """How far one way of scoring a round is from the reference (1 thread, the default evaluation batch)."""

    model: str
    variant: str
    #: The largest |q - q_ref| over the clients, as a fraction (quality 1.0 = 1e18).
    largest: float


@contextlib.contextmanager
def _threads(count: int) -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _jobs(data_root: str | None) -> list[tuple[torch.Tensor, torch.Tensor]]:
    from fedchain.data.datasets import load_dataset

    train = load_dataset("mnist", train=True, root=data_root)
    return [
        (train.images[i * SAMPLES : (i + 1) * SAMPLES], train.labels[i * SAMPLES : (i + 1) * SAMPLES])
        for i in range(JOBS)
    ]


def quality_drift(model: str, data_root: str | None, threads: Sequence[int] = (2,)) -> list[QualityDrift]:
    """One round's qualities scored with more threads, and with the evaluation in other batch sizes."""
    from fedchain.aggregator.scoring import ClientInput, Evaluator, score_round
    from fedchain.fl.floor import DEFAULT_MIN_LOSS_REPUTATION, DEFAULT_MIN_QUALITY
    from fedchain.fl.params import flatten
    from fedchain.fl.registry import get_strategy
    from fedchain.taskspec import TaskSpec, load_validation
    from fedchain.trainer.evaluation import EVAL_BATCH_SIZE
    from fedchain.trainer.trainer import Trainer

    spec = TaskSpec(dataset="mnist", model=model)
    jobs = _jobs(data_root)
    start = flatten(spec.initial_params(), spec.param_spec())[0]
    with Trainer(spec.model_spec(), engine="sequential", device="cpu") as trainer:
        updates = trainer.train(start, jobs, client_ids=list(range(JOBS)), config=spec.train_config(1)).updates(start)
    clients = [ClientInput(update=u, data_size=SAMPLES, round_time=10) for u in updates]
    validation = load_validation(spec, data_root)

    def qualities(batch_size: int = EVAL_BATCH_SIZE) -> torch.Tensor:
        evaluator = Evaluator(spec.model_spec(), validation, "cpu", batch_size=batch_size)
        outcome = score_round(
            get_strategy(spec.strategy),
            start,
            clients,
            evaluator,
            None,
            screening=spec.screening,
            quality_floor=spec.floor_at(
                1, min_quality=DEFAULT_MIN_QUALITY, min_loss_reputation=DEFAULT_MIN_LOSS_REPUTATION
            ),
            data_credit=spec.data_credit,
            grace=spec.grace_rule(min_quality=DEFAULT_MIN_QUALITY),
        )
        return torch.tensor([m.quality for m in outcome.measurements], dtype=torch.float64) / 10**18

    with _threads(1):
        reference = qualities()
    rows = []
    for count in threads:
        with _threads(count):
            rows.append(QualityDrift(model, f"{count} threads", float((qualities() - reference).abs().max())))
    with _threads(1):
        for batch in (100, 1000):
            rows.append(
                QualityDrift(model, f"evaluation batch {batch}", float((qualities(batch) - reference).abs().max()))
            )
    return rows


@click.command(name="drift")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
@click.option(
    "--model",
    "models",
    multiple=True,
    default=("lenet5", "cnn"),
    show_default=True,
    help="Models to measure (repeat the option).",
)
@click.option("--data-root", help="Dataset folder. [default: FEDCHAIN_DATA_ROOT]")
def drift(as_json: bool, models: tuple[str, ...], data_root: str | None) -> None:
    """Honest drift of re-scored qualities (threads, evaluation batches), against the entry dispute's tolerance
    (the fog challenges' is `fedchain bench transcripts`)."""
    from fedchain.disputes.judging import QUALITY_TOLERANCE

    qualities = [row for model in models for row in quality_drift(model, data_root)]
    if as_json:
        click.echo(machine_json({"quality_tolerance": QUALITY_TOLERANCE, "qualities": [asdict(r) for r in qualities]}))
        return
    click.echo("re-scored round: largest quality difference to 1 thread and the default evaluation batch")
    for q in qualities:
        click.echo(f"  {q.model:<7} {q.variant:<22} {q.largest:10.3g}")
    click.echo(
        f"  quality tolerance {QUALITY_TOLERANCE:g}: {_ratio(QUALITY_TOLERANCE, max(r.largest for r in qualities))} "
        "the largest drift"
    )


def _ratio(big: float, small: float) -> str:
    """``big / small`` in words: ``120 times``, ``0.38 times`` (two figures below 10), or ``above`` when ``small``
    is 0 (no drift at all)."""
    if small <= 0:
        return "above (none measured)"
    ratio = big / small
    return f"{ratio:,.0f} times" if ratio >= 10 else f"{ratio:.2g} times"  # 0.38 times: the drift passes the tolerance


__all__ = ["QualityDrift", "drift", "quality_drift"]
