"""FedChain for Flower federations: the incentive layer around Flower's Message API and deployment engine.

``pip install 'fedchain[flower]'``. The server wraps its strategy in :class:`IncentiveStrategy`; each
``ClientApp`` joins, replies and withdraws through :class:`FedChainClient`. The task must be self-trained
(``fedchain task create --self-trained``): each client trains its own job, no fog auction.
"""

from __future__ import annotations

from fedchain._lazy import lazy_exports

_EXPORTS = {
    "IncentiveStrategy": "strategy",
    "FedChainServer": "strategy",
    "FedChainClient": "client",
    "RoundPoster": "poster",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
