"""The fog-node agent: watch auctions, bid, train the jobs won, commit update hashes.

``fog run`` / ``fedchain fog run`` (:mod:`fog.cli`) runs a :class:`FogNode`
configured by a :class:`FogConfig`; its bids come from :mod:`fog.bidding`.
"""

from fog.bidding import BidDecision, CostModel, decide_bid
from fog.config import FogConfig, load_fog_config
from fog.node import FogNode

__all__ = ["BidDecision", "CostModel", "FogConfig", "FogNode", "decide_bid", "load_fog_config"]
