"""Progress of a series of runs (``fedchain reproduce``): what the loops report, and the bars that draw it.

The loops (:func:`~fedchain.experiments.reproduce.fairness.fairness_runs`,
:func:`~fedchain.experiments.reproduce.rounds.rounds_to_accuracy`) call a
:class:`RunObserver`, which reports nowhere; :class:`RunBars` draws two bars
from those calls: the runs done of all, and the rounds of the run under way.
"""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from fedchain.experiments.results import ExperimentResult, RoundRecord


class RunObserver:
    """What a series of runs reports while it works; this base reports nowhere (subclass it to show something)."""

    def run_started(self, label: str, rounds: int, note: str = "") -> None:
        """A run named ``label`` of at most ``rounds`` rounds begins (``note``: what it does first)."""

    def run_set_up(self) -> None:
        """The run has read its data and checked its names; training begins."""

    def round_done(self, record: RoundRecord) -> None:
        """The run finished a round."""

    def run_done(self, summary: str, result: ExperimentResult) -> None:
        """The run finished; ``summary`` is a line about it."""


def round_columns() -> tuple[TextColumn | BarColumn | MofNCompleteColumn | TimeElapsedColumn, ...]:
    """The columns of a bar over rounds: description, bar, done of total, a note (the accuracy), time."""
    return (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[note]}"),
        TimeElapsedColumn(),
    )


class RunBars(RunObserver):
    """A :class:`RunObserver` drawing the runs done of ``total`` and the current run's rounds on ``console``.

    The bars appear once the first run is set up, so an error in the set-up
    (an unknown name, a missing file) is printed without an empty bar.
    """

    def __init__(self, console: Console, total: int) -> None:
        self._progress = Progress(*round_columns(), console=console, transient=False)
        self._runs: TaskID = self._progress.add_task("runs", total=total, note="")
        self._rounds: TaskID = self._progress.add_task("", total=None, note="", visible=False)

    def __enter__(self) -> RunBars:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if self._progress.live.is_started:
            self._progress.stop()

    def run_started(self, label: str, rounds: int, note: str = "") -> None:
        self._progress.reset(self._rounds, total=rounds, description=label, note=note, visible=True)

    def run_set_up(self) -> None:
        if not self._progress.live.is_started:
            self._progress.start()

    def round_done(self, record: RoundRecord) -> None:
        self._progress.update(self._rounds, advance=1, note=f"acc {100 * record.test_accuracy:.2f}%")

    def run_done(self, summary: str, result: ExperimentResult) -> None:
        self._progress.console.log(
            f"{summary}: {len(result.rounds)} rounds, best {100 * result.best_accuracy:.2f}%, {result.seconds:.0f} s"
        )
        self._progress.update(self._runs, advance=1)
