"""PNG plots of an experiment, drawn with matplotlib's Agg renderer.

Figures are built with :class:`matplotlib.figure.Figure` directly (no
``pyplot`` state machine), so plotting works headless and from threads.
"""

from __future__ import annotations

import math
from pathlib import Path

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from fedchain.experiments.results import ExperimentResult

#: Colour of honest clients and of each injected fault in the contribution plot.
FAULT_COLOURS = {
    "none": "tab:blue",
    "noisy": "tab:orange",
    "flipped": "tab:red",
    "free-rider": "tab:gray",
    "scaled": "tab:purple",
}
#: Figure size in inches and resolution of the PNGs.
FIGSIZE = (6.4, 4.0)
#: Label every client on the x axis up to this many clients.
MAX_TICKED_CLIENTS = 30
DPI = 120


def plot_accuracy(result: ExperimentResult, path: Path) -> Path:
    """Test accuracy of the global model per round (and the target, if any)."""
    figure = Figure(figsize=FIGSIZE, dpi=DPI)
    axes = figure.add_subplot()
    rounds = [r.round for r in result.rounds]
    axes.plot(rounds, [100 * r.test_accuracy for r in result.rounds], marker="o", label=result.config.strategy)
    target = result.config.target_accuracy
    if target is not None:
        axes.axhline(100 * target, linestyle="--", color="tab:gray", label=f"target {100 * target:g}%")
    axes.set_xlabel("round")
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_ylabel("test accuracy (%)")
    axes.set_title(f"{result.config.dataset}, {result.config.partition}, {len(result.clients)} clients")
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path)
    return path


def plot_contribution(result: ExperimentResult, path: Path) -> Path:
    """Each client's contribution averaged over the rounds, coloured by injected fault."""
    figure = Figure(figsize=FIGSIZE, dpi=DPI)
    axes = figure.add_subplot()
    contribution = result.mean_contribution()
    indices = [c.index for c in result.clients]
    colours = [FAULT_COLOURS.get(c.fault, "black") for c in result.clients]
    axes.bar(indices, contribution, color=colours)
    for fault in sorted({c.fault for c in result.clients}):
        axes.bar([], [], color=FAULT_COLOURS.get(fault, "black"), label=fault)
    if len(indices) <= MAX_TICKED_CLIENTS:
        axes.set_xticks(indices)
    axes.set_xlabel("client")
    axes.set_ylabel("mean contribution per round")
    axes.set_title(f"contribution per client ({result.config.strategy})")
    axes.legend()
    axes.grid(axis="y", alpha=0.3)
    figure.tight_layout()
    figure.savefig(path)
    return path


def plot_reward(result: ExperimentResult, path: Path, pearson: float) -> Path:
    """Accuracy of each client's rewarded model against its standalone accuracy.

    The dashed diagonal is "no gain": a client below it ended worse than alone.
    """
    if result.standalone_accuracy is None or result.reward_accuracy is None:
        raise ValueError("plot_reward needs both standalone and reward accuracies")
    figure = Figure(figsize=FIGSIZE, dpi=DPI)
    axes = figure.add_subplot()
    standalone = [100 * a for a in result.standalone_accuracy]
    reward = [100 * a for a in result.reward_accuracy]
    axes.scatter(standalone, reward, c=[FAULT_COLOURS.get(c.fault, "black") for c in result.clients])
    for client, x, y in zip(result.clients, standalone, reward, strict=True):
        axes.annotate(str(client.index), (x, y), textcoords="offset points", xytext=(3, 3), fontsize=7)
    low, high = min(standalone + reward), max(standalone + reward)
    axes.plot([low, high], [low, high], linestyle="--", color="grey", linewidth=1, label="no gain")
    axes.legend(loc="lower right")
    axes.set_xlabel("standalone accuracy (%)")
    axes.set_ylabel("rewarded model accuracy (%)")
    axes.set_title(f"reward vs standalone ({result.config.strategy}), Pearson {pearson:.3f}")
    axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path)
    return path


def plot_fairness_by_round(result: ExperimentResult, path: Path) -> Path:
    """Pearson(standalone, rewarded accuracy) and the clients' gain over standalone, per tested round.

    Shows whether fairness holds through training or only at some rounds
    (rewards that saturate at the global model's accuracy lose the ranking).
    """
    by_round = result.fairness_by_round()
    if not by_round:
        raise ValueError(
            "plot_fairness_by_round needs rewarded accuracies per round (fairness_every) and standalone ones"
        )
    rounds = [entry[0] for entry in by_round]
    gains = [result.gain_in_round(r) or (math.nan, math.nan) for r in rounds]
    figure = Figure(figsize=(2 * FIGSIZE[0], FIGSIZE[1]), dpi=DPI)
    left, right = figure.subplots(1, 2)
    left.plot(rounds, [entry[1] for entry in by_round], marker="o")
    left.set_ylim(-1.05, 1.05)
    for axes in (left, right):
        axes.set_xlabel("round")
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        axes.grid(alpha=0.3)
    left.set_ylabel("Pearson(standalone, rewarded accuracy)")
    left.set_title(f"fairness per round ({result.config.strategy})")
    right.plot(rounds, [100 * g[0] for g in gains], marker="o", label="mean client")
    right.plot(rounds, [100 * g[1] for g in gains], marker="v", label="worst client")
    right.axhline(0, linestyle="--", color="grey", linewidth=1)
    right.set_ylabel("rewarded minus standalone accuracy (pt)")
    right.set_title("gain over final standalone model")
    right.legend()
    figure.tight_layout()
    figure.savefig(path)
    return path


#: The files :func:`write_plots` may write: accuracy, contribution, reward and fairness by round.
PLOT_FILES = ("accuracy.png", "contribution.png", "reward_vs_standalone.png", "fairness_by_round.png")


def write_plots(result: ExperimentResult, output_dir: Path, pearson: float | None = None) -> list[Path]:
    """Write every plot that applies to ``result`` into ``output_dir``; returns their paths."""
    output_dir.mkdir(parents=True, exist_ok=True)
    accuracy, contribution, reward, by_round = (output_dir / name for name in PLOT_FILES)
    paths = [plot_accuracy(result, accuracy), plot_contribution(result, contribution)]
    if pearson is not None and result.standalone_accuracy is not None and result.reward_accuracy is not None:
        paths.append(plot_reward(result, reward, pearson))
    if result.fairness_by_round():
        paths.append(plot_fairness_by_round(result, by_round))
    return paths
