"""The fog-node agent: watch auctions, bid, train the jobs won, commit update hashes.

``fog run`` / ``fedchain fog run`` (:mod:`fog.cli`) runs a :class:`FogNode`
configured by a :class:`FogConfig`; its bids come from :mod:`fog.bidding`.
Names are imported on first use, so that ``fog run --help`` does not load torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fedchain._lazy import lazy_exports

#: public name -> defining module.
_EXPORTS: dict[str, str] = {
    "BidDecision": "bidding",
    "CostModel": "bidding",
    "decide_bid": "bidding",
    "FogConfig": "config",
    "load_fog_config": "config",
    "FogNode": "node",
    "FogJob": "jobs",
    "Phase": "jobs",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from fog.bidding import BidDecision, CostModel, decide_bid
    from fog.config import FogConfig, load_fog_config
    from fog.jobs import FogJob, Phase
    from fog.node import FogNode

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
