"""The chain's block clock: how often blocks come, and what time the next one will carry.

A public chain makes blocks on its own clock (about 12 s on Ethereum, 2 s on
most L2s) whether or not anyone sends a transaction; a development chain that
automines makes one only when a transaction arrives, and its latest block's
time then stands still while the wall clock moves on. Every deadline the
contracts check is a block's timestamp, so an agent that decides whether it is
still in time, and a publisher that decides whether a window is long enough,
both need to know which kind of chain they are on and how long its blocks take.

:func:`block_interval` measures it from the timestamps of the latest blocks;
:func:`next_block_time` says what the next block will most likely carry. The
arithmetic is in pure functions (:func:`estimate_interval`,
:func:`expected_next_block_time`) so that it is tested without a chain; the
functions that take a ``Web3`` only read the chain.
"""

from __future__ import annotations

import itertools
import logging
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from web3 import Web3
from web3.types import RPCEndpoint

log = logging.getLogger(__name__)

#: Blocks whose gaps :func:`block_interval` measures by default: enough that a few missed slots or a
#: burst of fast blocks move the median by nothing, few enough to read in one or two seconds over HTTP.
DEFAULT_SAMPLE = 20
#: A gap longer than this many typical gaps (at least 1 s each) is not something a block clock makes: a
#: chain with such a gap makes blocks on demand. Ethereum's longest ordinary gaps (a few missed slots in
#: a row) stay below it; an automining chain idle between two transactions goes far past it.
IRREGULAR_GAP_FACTOR = 5
#: Node methods that say whether the node mines a block per transaction (Anvil answers both, Hardhat the
#: second); a public endpoint knows neither, and its gaps decide.
AUTOMINE_METHODS = ("anvil_getAutomine", "hardhat_getAutomine")


@dataclass(frozen=True)
class BlockInterval:
    """How a chain makes blocks, measured from its latest ones.

    Attributes:
        seconds: the typical time between two blocks (the median gap; the mean when blocks come faster
            than the timestamps' 1 s resolution); 0.0 when the chain has a single block.
        on_demand: the chain makes a block when a transaction arrives (automine), not on a clock: its
            latest block's time says nothing about when the next block comes.
        gaps: how many gaps between consecutive blocks the estimate rests on.
    """

    seconds: float
    on_demand: bool
    gaps: int

    def span(self, blocks: int) -> float:
        """Seconds that ``blocks`` blocks take on this chain (0.0 on demand: a block comes when needed)."""
        return 0.0 if self.on_demand else blocks * self.seconds

    def describe(self) -> str:
        """A few words for messages: ``"a block every 12 s"`` or ``"blocks on demand (automine)"``."""
        if self.on_demand:
            return "blocks on demand (automine)"
        return f"a block every {self.seconds:g} s"


def estimate_interval(timestamps: Sequence[int], *, automine: bool | None = None) -> BlockInterval:
    """The block interval of consecutive blocks' ``timestamps`` (oldest first).

    ``automine`` is what the node says of itself (None: it did not say); without
    it, a gap far longer than the typical one (:data:`IRREGULAR_GAP_FACTOR`)
    marks blocks made on demand. With fewer than two timestamps nothing can be
    measured: the interval is 0.0 and the chain counts as on demand unless the
    node said otherwise.
    """
    gaps = [later - earlier for earlier, later in itertools.pairwise(timestamps)]
    if not gaps:
        return BlockInterval(0.0, True if automine is None else automine, 0)
    median = float(statistics.median(gaps))
    # Blocks faster than 1 s share timestamps, so most gaps read 0: the mean over the span counts them right.
    seconds = median if median > 0 else (timestamps[-1] - timestamps[0]) / len(gaps)
    irregular = max(gaps) > IRREGULAR_GAP_FACTOR * max(median, 1.0)
    return BlockInterval(seconds, irregular if automine is None else automine, len(gaps))


def expected_next_block_time(latest: int, interval: BlockInterval, now: float) -> int:
    """The timestamp the next block will most likely carry, after a latest block at ``latest``.

    On a block clock it is one interval after the latest block: the chain's own
    clock, not this machine's, which may be off. On demand the next block is
    made when a transaction arrives and carries the time then (``now``, by the
    node's clock), never less than the latest block's.
    """
    if interval.on_demand:
        return max(latest, int(now))
    return int(latest + interval.seconds)


def node_automine(w3: Web3) -> bool | None:
    """Whether the node says it mines a block per transaction; None when it does not say (a public endpoint)."""
    for method in AUTOMINE_METHODS:
        try:
            response: Any = w3.provider.make_request(RPCEndpoint(method), [])
        except Exception as err:  # noqa: BLE001  (an endpoint may refuse an unknown method in any way: then it did not say)
            log.debug("%s not answered: %s", method, err)
            continue
        result = response.get("result") if isinstance(response, dict) else None
        if isinstance(result, bool):
            return result
    return None


def recent_timestamps(w3: Web3, count: int) -> list[int]:
    """The timestamps of the latest ``count`` blocks (fewer on a younger chain), oldest first."""
    latest = int(w3.eth.block_number)
    first = max(0, latest - count + 1)
    return [int(w3.eth.get_block(number)["timestamp"]) for number in range(first, latest + 1)]


def block_interval(w3: Web3, *, sample: int = DEFAULT_SAMPLE) -> BlockInterval:
    """The chain's recent block interval, from the gaps between its latest ``sample`` blocks (see :func:`estimate_interval`)."""
    if sample < 2:
        raise ValueError(f"sample must be at least 2 blocks (one gap), got {sample}")
    interval = estimate_interval(recent_timestamps(w3, sample), automine=node_automine(w3))
    log.debug("block interval %.3f s over %d gaps, on demand: %s", interval.seconds, interval.gaps, interval.on_demand)
    return interval


def next_block_time(w3: Web3, interval: BlockInterval) -> int:
    """The timestamp ``w3``'s chain will most likely give its next block (see :func:`expected_next_block_time`).

    On demand, the time now is the node's: the timestamp of its pending block
    when it has one (Anvil's counts the time moved on by ``evm_increaseTime``,
    which the wall clock does not), else this machine's clock.
    """
    latest = int(w3.eth.get_block("latest")["timestamp"])
    if not interval.on_demand:
        return expected_next_block_time(latest, interval, time.time())
    return expected_next_block_time(latest, interval, node_time(w3))


def node_time(w3: Web3) -> float:
    """The time now by the node's clock: its pending block's timestamp, or this machine's clock when it has none."""
    try:
        return float(w3.eth.get_block("pending")["timestamp"])
    except Exception as err:  # noqa: BLE001  (an endpoint without a pending block may refuse in any way)
        log.debug("no pending block: %s", err)
        return time.time()


#: Seconds between two measurements of the block interval by a :class:`ChainClock` (a chain's pace rarely changes).
CLOCK_REFRESH_S = 120.0


class ChainClock:
    """The time of a chain's next block, for agents that plan against it (is a deadline still reachable, is a
    window open yet?) rather than against this machine's clock.

    The interval is measured on first use and again every ``refresh_s`` seconds
    (about 20 RPC calls); each :meth:`next_block_time` then costs one or two.
    """

    def __init__(self, w3: Web3, *, refresh_s: float = CLOCK_REFRESH_S) -> None:
        self.w3 = w3
        self.refresh_s = refresh_s
        self._interval: BlockInterval | None = None
        self._measured_at = 0.0

    @property
    def interval(self) -> BlockInterval:
        """The chain's block interval, measured at most ``refresh_s`` seconds ago."""
        if self._interval is None or time.monotonic() - self._measured_at > self.refresh_s:
            self._interval = block_interval(self.w3)
            self._measured_at = time.monotonic()
        return self._interval

    def next_block_time(self) -> int:
        """The timestamp the chain's next block will most likely carry (:func:`next_block_time`)."""
        return next_block_time(self.w3, self.interval)
