"""The aggregator of a task: fetch and verify updates, score, aggregate, post one transaction per round.

``fedchain aggregator run --task ID`` (:mod:`fedchain.aggregator.cli`) runs
:class:`Aggregator`; :func:`score_round` is one round's arithmetic on its own.
Names are imported on first use, so that ``aggregator run --help`` does not load torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fedchain._lazy import lazy_exports

#: public name -> defining module.
_EXPORTS: dict[str, str] = {
    "ClientInput": "scoring",
    "Evaluator": "scoring",
    "RoundOutcome": "scoring",
    "quality_source": "scoring",
    "score_round": "scoring",
    "Aggregator": "service",
    "AggregatorSettings": "service",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from fedchain.aggregator.scoring import ClientInput, Evaluator, RoundOutcome, quality_source, score_round
    from fedchain.aggregator.service import Aggregator, AggregatorSettings

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
