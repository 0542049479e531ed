"""What an experiment produces, and how it is written to disk.

A run yields one :class:`ExperimentResult`: the per-round records of the
global model and every client's score, plus the per-client accuracies the
fairness figures need. :func:`write_metrics` stores it as ``metrics.json``
(everything, with the configuration) and ``metrics.csv`` (one row per round
and client, ready for pandas or a spreadsheet); :func:`read_result` reads a
finished run back, so that a long series of runs stopped half-way resumes
instead of starting over.
"""

from __future__ import annotations

import csv
import io
import json
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fedchain.console import machine_json
from fedchain.errors import ConfigError
from fedchain.experiments.config import ExperimentConfig, check_same_settings
from fedchain.files import write_atomic
from fedchain.fl.metrics import jain_index, pearson

#: The file holding a finished run. It is written last, so a folder that has it holds the run's every file.
METRICS_FILE = "metrics.json"

#: Columns of ``metrics.csv``, one row per (round, client).
CSV_COLUMNS = (
    "round",
    "test_accuracy",
    "test_loss",
    "client",
    "contribution",
    "quality",
    "accepted",
    "reward_accuracy",
)


@dataclass(frozen=True)
class BestRound:
    """The tested round with the highest Pearson(standalone, rewarded accuracy), and the gain there."""

    round: int
    pearson: float
    #: Mean over clients of rewarded minus standalone accuracy after that round.
    gain_mean: float
    #: The lowest client's rewarded minus standalone accuracy after that round.
    gain_worst: float


@dataclass(frozen=True)
class ClientInfo:
    """A client of the experiment: its index, local sample count and injected fault."""

    index: int
    samples: int
    #: ``none`` or the fault's label (``noisy``, ``flipped``, ``free-rider``, ``scaled``, ``sign-flipped``,
    #: ``noise``, ``sybil``; :data:`fedchain.experiments.federation.FAULT_LABELS`).
    fault: str = "none"


@dataclass(frozen=True)
class RoundRecord:
    """The outcome of one round: the global model's test figures and every client's score."""

    round: int
    test_accuracy: float
    test_loss: float
    #: The strategy's contribution score per client (0 for a rejected update).
    contribution: tuple[float, ...]
    #: The per-round quality q_i the chain consumes (0 for a rejected update).
    quality: tuple[float, ...]
    #: Whether each client's update was aggregated.
    accepted: tuple[bool, ...]
    #: Wall-clock seconds of the round (training, scoring, aggregation, evaluation).
    seconds: float
    #: Test accuracy of each client's rewarded model after this round, when measured
    #: (``ExperimentConfig.fairness_every``); ``None`` otherwise.
    reward_accuracy: tuple[float, ...] | None = None
    #: Screening's rule 5 figure per client (None where not measured: round 1, an update rejected before rule 5
    #: or absent); ``None`` for the whole in a metrics file written before it was recorded.
    novelty: tuple[float | None, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready mapping (lists for tuples)."""
        return {
            "round": self.round,
            "test_accuracy": self.test_accuracy,
            "test_loss": self.test_loss,
            "contribution": list(self.contribution),
            "quality": list(self.quality),
            "accepted": list(self.accepted),
            "seconds": self.seconds,
            "reward_accuracy": _list_or_none(self.reward_accuracy),
            "novelty": None if self.novelty is None else list(self.novelty),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RoundRecord:
        """The record :meth:`to_dict` wrote (JSON ``null`` numbers read as NaN); ``KeyError``,
        ``TypeError`` or ``ValueError`` on a mapping of another shape."""
        rewards = data["reward_accuracy"]
        return cls(
            round=int(data["round"]),
            test_accuracy=_number(data["test_accuracy"]),
            test_loss=_number(data["test_loss"]),
            contribution=_numbers(data["contribution"]),
            quality=_numbers(data["quality"]),
            accepted=tuple(bool(a) for a in data["accepted"]),
            seconds=_number(data["seconds"]),
            reward_accuracy=None if rewards is None else _numbers(rewards),
            novelty=None
            if data.get("novelty") is None
            else tuple(None if v is None else float(v) for v in data["novelty"]),
        )


@dataclass(frozen=True)
class ExperimentResult:
    """Everything one run produced."""

    config: ExperimentConfig
    clients: tuple[ClientInfo, ...]
    rounds: tuple[RoundRecord, ...]
    #: Test accuracy of each client's model trained alone on its own data, once per repeat
    #: (``ExperimentConfig.standalone_repeats``); ``None`` if not computed.
    standalone_runs: tuple[tuple[float, ...], ...] | None
    #: Test accuracy of each client's rewarded model (reward-in-kind strategies; ``None`` otherwise).
    reward_accuracy: tuple[float, ...] | None
    #: First round whose test accuracy reached ``config.target_accuracy`` (``None``: never, or no target).
    rounds_to_target: int | None
    #: Wall-clock seconds of the whole run.
    seconds: float

    @property
    def standalone_accuracy(self) -> tuple[float, ...] | None:
        """Each client's standalone accuracy: the mean of :attr:`standalone_runs` (``None`` if not computed)."""
        return None if self.standalone_runs is None else _column_mean(self.standalone_runs, len(self.clients))

    @property
    def final_accuracy(self) -> float:
        """Test accuracy of the global model after the last round."""
        return self.rounds[-1].test_accuracy if self.rounds else math.nan

    @property
    def best_accuracy(self) -> float:
        """Best test accuracy of the global model over the rounds."""
        return max((r.test_accuracy for r in self.rounds), default=math.nan)

    def fairness(self) -> tuple[float, float] | None:
        """(Pearson of standalone vs reward accuracy, Jain's index of the reward accuracies), when both exist."""
        if self.standalone_accuracy is None or self.reward_accuracy is None or len(self.clients) < 2:
            return None
        return pearson(self.standalone_accuracy, self.reward_accuracy), jain_index(self.reward_accuracy)

    def fairness_by_round(self) -> tuple[tuple[int, float], ...]:
        """``(round, Pearson(standalone, rewarded accuracy))`` for every round whose rewarded models were tested.

        Empty without standalone accuracies or without ``ExperimentConfig.fairness_every``.
        """
        if self.standalone_accuracy is None or len(self.clients) < 2:
            return ()
        return tuple(
            (r.round, pearson(self.standalone_accuracy, r.reward_accuracy))
            for r in self.rounds
            if r.reward_accuracy is not None
        )

    def best_round_fairness(self) -> BestRound | None:
        """The round with the highest Pearson in :meth:`fairness_by_round`, its Pearson and the gain there.

        The FedAVE authors' code reports this figure; :meth:`fairness` is the last round's.
        The best of many rounds is biased upwards, so read it only beside the last round's,
        and beside its gain: early rounds rank clients by how fast their rewards learn.
        """
        best = max(self.fairness_by_round(), key=lambda entry: entry[1], default=None)
        if best is None:
            return None
        gain = self.gain_in_round(best[0])
        assert gain is not None  # fairness_by_round lists only rounds with rewarded accuracies
        return BestRound(best[0], best[1], *gain)

    def gain_in_round(self, round_number: int) -> tuple[float, float] | None:
        """(mean, worst) gain of the rewarded models tested after ``round_number`` over standalone.

        Standalone accuracies are the final ones (each client trained alone for all
        rounds' epochs), so early rounds show what the rewards reach by then.
        """
        record = next((r for r in self.rounds if r.round == round_number), None)
        if record is None or record.reward_accuracy is None or self.standalone_accuracy is None:
            return None
        return gain_over_standalone(record.reward_accuracy, self.standalone_accuracy)

    def collaboration_gain(self) -> tuple[float, float] | None:
        """(mean, worst) over clients of rewarded minus standalone accuracy, when both exist.

        Read beside :meth:`fairness`: rewards that merely equal the standalone models
        correlate perfectly with them and earn nothing; a negative worst gain means some
        client ended below what its own data reaches alone.
        """
        if self.standalone_accuracy is None or self.reward_accuracy is None or not self.clients:
            return None
        return gain_over_standalone(self.reward_accuracy, self.standalone_accuracy)

    def contribution_pearson(self) -> float | None:
        """Pearson of standalone accuracy vs mean contribution over the rounds, when standalone was computed.

        Read beside :meth:`fairness`: this says whether the strategy *ranks* clients the way
        their data deserves; the reward Pearson, whether the rewarded models express that ranking.
        """
        if self.standalone_accuracy is None or len(self.clients) < 2:
            return None
        return pearson(self.standalone_accuracy, self.mean_contribution())

    def standalone_agreement(self) -> float | None:
        """Mean Pearson between every two repeats of the standalone models, when there are two or more.

        How reproducible the fairness reference is. With agreement r between
        repeats, even rewards that follow the clients' true standalone accuracies
        exactly correlate with one repeat at about sqrt(r) and with the mean of
        n repeats at about sqrt(n r / (1 + (n - 1) r)) (Spearman-Brown): the
        ceiling of the fairness Pearson that the reference's own noise sets.
        """
        runs = self.standalone_runs
        if runs is None or len(runs) < 2 or len(self.clients) < 2:
            return None
        pairs = [pearson(a, b) for k, a in enumerate(runs) for b in runs[k + 1 :]]
        return sum(pairs) / len(pairs)

    def fairness_ceiling(self) -> float | None:
        """The Pearson that rewards following the true standalone accuracies would reach (see :meth:`standalone_agreement`)."""
        agreement = self.standalone_agreement()
        if agreement is None or self.standalone_runs is None:
            return None
        r, n = max(agreement, 0.0), len(self.standalone_runs)
        return math.sqrt(n * r / (1 + (n - 1) * r))

    def mean_contribution(self) -> tuple[float, ...]:
        """Each client's contribution averaged over the rounds."""
        return _column_mean([r.contribution for r in self.rounds], len(self.clients))

    def mean_quality(self) -> tuple[float, ...]:
        """Each client's quality averaged over the rounds."""
        return _column_mean([r.quality for r in self.rounds], len(self.clients))

    def accepted_rounds(self) -> tuple[int, ...]:
        """How many rounds each client's update was aggregated in."""
        return tuple(sum(r.accepted[i] for r in self.rounds) for i in range(len(self.clients)))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready mapping of the whole result."""
        fairness = self.fairness()
        ranking = self.contribution_pearson()
        gain = self.collaboration_gain() or (math.nan, math.nan)
        best = self.best_round_fairness()
        return {
            "config": self.config.to_dict(),
            "clients": [{"index": c.index, "samples": c.samples, "fault": c.fault} for c in self.clients],
            "rounds": [r.to_dict() for r in self.rounds],
            "standalone_accuracy": _list_or_none(self.standalone_accuracy),
            "standalone_runs": None if self.standalone_runs is None else [list(run) for run in self.standalone_runs],
            "standalone_agreement": self.standalone_agreement(),
            "fairness_ceiling": self.fairness_ceiling(),
            "reward_accuracy": _list_or_none(self.reward_accuracy),
            "rounds_to_target": self.rounds_to_target,
            "fairness": None
            if fairness is None
            else {
                "pearson": fairness[0],
                "jain": fairness[1],
                "contribution_pearson": ranking,
                "gain_mean": gain[0],
                "gain_worst": gain[1],
                "best_round": None if best is None else best.round,
                "pearson_best_round": None if best is None else best.pearson,
                "gain_mean_best_round": None if best is None else best.gain_mean,
            },
            "final_accuracy": self.final_accuracy,
            "best_accuracy": self.best_accuracy,
            "seconds": self.seconds,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], config: ExperimentConfig) -> ExperimentResult:
        """The result :meth:`to_dict` wrote, as a run of ``config`` (JSON ``null`` numbers read as NaN).

        Raises ``KeyError``, ``TypeError`` or ``ValueError`` on a mapping of another shape.
        """
        standalone = data["standalone_runs"]
        return cls(
            config=config,
            clients=tuple(ClientInfo(int(c["index"]), int(c["samples"]), str(c["fault"])) for c in data["clients"]),
            rounds=tuple(RoundRecord.from_dict(r) for r in data["rounds"]),
            standalone_runs=None if standalone is None else tuple(_numbers(run) for run in standalone),
            reward_accuracy=None if data["reward_accuracy"] is None else _numbers(data["reward_accuracy"]),
            rounds_to_target=None if data["rounds_to_target"] is None else int(data["rounds_to_target"]),
            seconds=_number(data["seconds"]),
        )


def _number(value: Any) -> float:
    """A float of the metrics file: ``null`` stands for NaN (:func:`machine_json` writes NaN so)."""
    return math.nan if value is None else float(value)


def _numbers(values: Sequence[Any]) -> tuple[float, ...]:
    return tuple(_number(value) for value in values)


def gain_over_standalone(reward: Sequence[float], standalone: Sequence[float]) -> tuple[float, float]:
    """(mean, worst) over clients of rewarded minus standalone accuracy."""
    gains = [r - s for r, s in zip(reward, standalone, strict=True)]
    return statistics.fmean(gains), min(gains)


def _list_or_none(values: Sequence[float] | None) -> list[float] | None:
    return None if values is None else list(values)


def _column_mean(rows: Sequence[Sequence[float]], width: int) -> tuple[float, ...]:
    if not rows:
        return tuple(math.nan for _ in range(width))
    return tuple(sum(row[i] for row in rows) / len(rows) for i in range(width))


def write_metrics(result: ExperimentResult, output_dir: Path) -> tuple[Path, Path]:
    """Write ``metrics.json`` and ``metrics.csv`` into ``output_dir``; returns both paths.

    Each file is replaced atomically, and ``metrics.json`` goes last: a run
    killed while writing leaves no ``metrics.json`` that :func:`read_result`
    would take for a finished run.
    """
    csv_path = output_dir / "metrics.csv"
    lines = io.StringIO(newline="")
    writer = csv.writer(lines)
    writer.writerow(CSV_COLUMNS)
    for record in result.rounds:
        for client in result.clients:
            i = client.index
            writer.writerow(
                (
                    record.round,
                    f"{record.test_accuracy:.6f}",
                    f"{record.test_loss:.6f}",
                    i,
                    f"{record.contribution[i]:.6g}",
                    f"{record.quality[i]:.6g}",
                    int(record.accepted[i]),
                    "" if record.reward_accuracy is None else f"{record.reward_accuracy[i]:.6f}",
                )
            )
    write_atomic(csv_path, lines.getvalue().encode())
    json_path = output_dir / METRICS_FILE
    write_atomic(json_path, (machine_json(result.to_dict()) + "\n").encode())
    return json_path, csv_path


def read_result(output_dir: Path, config: ExperimentConfig) -> ExperimentResult | None:
    """The finished run of ``config`` that :func:`write_metrics` kept in ``output_dir``; ``None`` if there is none.

    The kept run must have been made with the same settings as ``config``, but
    for those in :data:`~fedchain.experiments.config.HOW_NOT_WHAT`. Raises :class:`ConfigError` when the
    folder holds a run of other settings (naming them) or an unreadable file:
    neither is overwritten or silently taken for this run.
    """
    path = output_dir / METRICS_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ConfigError(
            f"{path} is not a readable metrics file ({err})",
            hint=f"move {output_dir} aside or choose another output folder; the run is then made again",
        ) from err
    kept = data.get("config") if isinstance(data, Mapping) else None
    if not isinstance(kept, Mapping):
        raise ConfigError(
            f"{path} has no run configuration", hint=f"move {output_dir} aside or choose another output folder"
        )
    check_same_settings(
        kept, config, output_dir, hint="choose another output folder, or move that one aside to make the run again"
    )
    try:
        return ExperimentResult.from_dict(data, config)
    except (KeyError, TypeError, ValueError) as err:
        raise ConfigError(
            f"{path} is not a metrics file of this version ({type(err).__name__}: {err})",
            hint=f"move {output_dir} aside or choose another output folder; the run is then made again",
        ) from err
