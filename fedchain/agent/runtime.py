"""The loop every long-running agent shares: poll confirmed block ranges, handle, save, repeat.

An :class:`Agent` is generic. It knows nothing of contracts: it is given

- ``head()``: the chain's latest block number (``lambda: w3.eth.block_number``);
- ``handle(blocks, state)``: fetch and act on the events of an inclusive block
  range (``w3.eth.get_logs({"fromBlock": blocks.first, "toBlock": blocks.last})``
  or the chain layer's typed event fetchers), recording what it did in ``state``;
- optionally ``idle(state)``: called when no new confirmed block exists, for
  work driven by the clock rather than by events (a deadline passing);
- optionally ``block_hash(number)``: the hash of the chain's block ``number``
  (``None`` if there is none), to notice reorganisations, and
  ``on_reorg(state, ancestor)``: forget what was derived from the blocks after
  ``ancestor``, which were reorganised away.

Each step is a transaction on the state: the handler works on a copy, and only
when it returns is the copy, with ``last_block`` advanced, saved atomically and
kept. A handler that raises leaves the saved state as it was, so the same range
is handled again after a restart. Handlers must therefore be idempotent for a
range they may see twice (only after a crash: a clean stop never repeats one).

On a public chain, recent blocks are reorganised away: the chain switches to
another branch that shares its blocks up to a common ancestor. Given
``block_hash``, the agent remembers the hashes of the last
:attr:`AgentSettings.reorg_depth` blocks it handled, and every step first
checks that the last one is still the chain's. If not, it walks back to the
newest remembered block that still is, rewinds ``last_block`` there, calls
``on_reorg`` and saves, then handles the new branch's blocks as any others.
Handling blocks only ``confirmations`` deep avoids most of this: a
reorganisation shallower than ``confirmations`` never touches a handled block.
A head below ``last_block`` whose remembered blocks are all gone is a reset
chain (an :class:`AgentError`), not a reorganisation.

SIGTERM and SIGINT stop the loop cleanly: the current step finishes and is
saved, then :meth:`Agent.run` returns (the command exits 0). A second signal
interrupts at once; the saved state is still consistent.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from fedchain.agent.logs import AgentLogger
from fedchain.agent.state import AgentState, exclusive, load_state, save_state
from fedchain.errors import AgentError, ConfigError, RpcUnavailable
from fedchain.signals import STOP_SIGNALS, handlers_set

_log = logging.getLogger(__name__)

#: Errors that mean "try again later" by default: connection failures and timeouts (requests' and
#: aiohttp's errors derive from OSError), and an endpoint that kept failing through the RPC retries.
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (OSError, RpcUnavailable)

#: While waiting for new blocks, how often the loop looks whether a stop was requested (seconds).
STOP_CHECK_INTERVAL_S = 0.05

#: How many handled blocks' hashes an agent remembers by default: Ethereum finalises blocks after
#: about 64 (two epochs), so no reorganisation of a finalising chain goes deeper.
DEFAULT_REORG_DEPTH = 64
#: The most hashes an agent may remember: each costs about 80 bytes of state file, written every step.
MAX_REORG_DEPTH = 1_024


@dataclass(frozen=True)
class BlockRange:
    """An inclusive range of block numbers, ``first <= last``."""

    first: int
    last: int

    def __post_init__(self) -> None:
        if not 0 <= self.first <= self.last:
            raise ValueError(f"a block range needs 0 <= first <= last, got {self.first}..{self.last}")

    def __len__(self) -> int:
        return self.last - self.first + 1

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.first, self.last + 1))

    def __str__(self) -> str:
        return f"{self.first}..{self.last}"


def next_range(last_processed: int, head: int, confirmations: int, max_blocks: int) -> BlockRange | None:
    """The next range to handle after ``last_processed``, or ``None`` if no new block is confirmed.

    A block is confirmed once ``confirmations`` blocks sit on top of it, so the
    range ends at ``head - confirmations`` at the latest, and spans at most
    ``max_blocks`` blocks.
    """
    first = last_processed + 1
    last = min(head - confirmations, first + max_blocks - 1)
    return BlockRange(first, last) if last >= first else None


@dataclass(frozen=True)
class AgentSettings:
    """How an agent polls and where it keeps its state."""

    #: The agent's name in logs and in its state file (one state file per agent).
    name: str
    #: Where the state is saved (JSON).
    state_path: Path
    #: The first block to handle when there is no state file yet (for example the deployment block).
    start_block: int = 0
    #: Blocks that must sit on top of a block before it is handled: 0 on a local dev chain,
    #: a few on a public chain, where recent blocks can be reorganised away.
    confirmations: int = 0
    #: Seconds to wait before asking for new blocks again when there are none.
    poll_interval_s: float = 1.0
    #: The most blocks handed to one handler call (bounds an ``eth_getLogs`` query).
    max_blocks_per_step: int = 1_000
    #: Transient failures in a row (RPC down) before the agent gives up with an AgentError.
    max_consecutive_failures: int = 30
    #: The account the agent signs with; a state file saved under another is refused.
    owner: str | None = None
    #: How many of the newest handled blocks' hashes are remembered, so the deepest reorganisation the
    #: agent can rewind to its exact common ancestor (a deeper one rewinds this many blocks and logs an error).
    reorg_depth: int = DEFAULT_REORG_DEPTH

    def __post_init__(self) -> None:
        if not self.name:
            raise ConfigError("an agent needs a name")
        if self.start_block < 0 or self.confirmations < 0:
            raise ConfigError(f"start_block and confirmations must be >= 0 in agent {self.name!r}")
        if self.poll_interval_s <= 0 or self.max_blocks_per_step < 1 or self.max_consecutive_failures < 1:
            raise ConfigError(
                f"agent {self.name!r} needs poll_interval_s > 0, max_blocks_per_step >= 1 "
                "and max_consecutive_failures >= 1"
            )
        if not 1 <= self.reorg_depth <= MAX_REORG_DEPTH:
            raise ConfigError(
                f"agent {self.name!r} needs 1 <= reorg_depth <= {MAX_REORG_DEPTH}, got {self.reorg_depth}"
            )


#: ``handle(blocks, state)``: act on the events of ``blocks``, recording progress in ``state``.
Handler = Callable[[BlockRange, AgentState], None]
#: ``idle(state)``: clock-driven work when no new block is confirmed.
IdleHandler = Callable[[AgentState], None]
#: ``block_hash(number)``: the hash of the chain's block ``number``, or ``None`` if the chain has none.
BlockHashReader = Callable[[int], bytes | None]
#: ``on_reorg(state, ancestor)``: forget what ``state`` holds from the blocks after ``ancestor`` (reorganised away);
#: ``state.last_block`` is already ``ancestor``, and the blocks after it are handled again next.
ReorgHandler = Callable[[AgentState, int], None]


class Agent:
    """A resumable polling loop over confirmed block ranges (see the module's documentation)."""

    def __init__(
        self,
        settings: AgentSettings,
        *,
        head: Callable[[], int],
        handle: Handler,
        idle: IdleHandler | None = None,
        block_hash: BlockHashReader | None = None,
        on_reorg: ReorgHandler | None = None,
        transient: tuple[type[BaseException], ...] = TRANSIENT_ERRORS,
    ) -> None:
        self.settings = settings
        self.log = AgentLogger(_log, agent=settings.name)
        self._head = head
        self._handle = handle
        self._idle = idle
        self._block_hash = block_hash  # None: reorganisations go unnoticed (a chain that has none)
        self._on_reorg = on_reorg
        self._transient = transient
        # A plain flag, not a threading.Event: signal handlers must not take locks the main thread may hold.
        self._stop_requested = False
        self._state = load_state(
            settings.state_path, agent=settings.name, start_block=settings.start_block, owner=settings.owner
        )

    @property
    def state(self) -> AgentState:
        """A copy of the last saved state (mutating it changes nothing)."""
        return self._state.copy()

    @property
    def stopping(self) -> bool:
        """Whether a stop was requested."""
        return self._stop_requested

    def stop(self, reason: str = "requested") -> None:
        """Ask the loop to stop after the current step (safe from signal handlers and other threads)."""
        if not self._stop_requested:
            self.log.info("stopping after the current step", reason=reason)
        self._stop_requested = True

    def _commit(self, work: Callable[[AgentState], None], last_block: int | None = None) -> None:
        """Run ``work`` on a copy of the state; save and keep the copy only if it returns."""
        draft = self._state.copy()
        work(draft)
        if last_block is not None:
            draft.last_block = last_block
        if draft != self._state:  # an idle poll that changed nothing costs no disk write
            save_state(self.settings.state_path, draft)
            self._state = draft

    def step(self) -> BlockRange | None:
        """Rewind past a reorganisation if there was one, then handle the next confirmed block range, or
        run the idle handler; returns the range handled."""
        settings = self.settings
        head = self._head()
        self._follow_reorg(head)
        if head < self._state.last_block:
            raise self._reset_error(head)
        blocks = next_range(self._state.last_block, head, settings.confirmations, settings.max_blocks_per_step)
        if blocks is None:
            if self._idle is not None:
                self._commit(self._idle)
            return None
        # Read before handling: a reorganisation while the handler runs then leaves an old hash, which the
        # next step notices; read after, a new hash could hide the old events the handler saw.
        hashes = self._hashes_to_remember(blocks, head)
        if hashes is None:
            self.log.debug("the chain shrank under the step; polling again", blocks=str(blocks))
            return None

        def handle(state: AgentState) -> None:
            self._handle(blocks, state)
            state.remember_blocks(hashes, settings.reorg_depth)

        self._commit(handle, last_block=blocks.last)
        self.log.debug("handled blocks", blocks=str(blocks), head=head)
        return blocks

    def _hashes_to_remember(self, blocks: BlockRange, head: int) -> dict[int, bytes] | None:
        """The hashes of the blocks of ``blocks`` within ``reorg_depth`` of ``head`` (its last block's at least),
        or ``None`` if one of them is gone already.

        Blocks deeper than that are not reorganised, so catching up far behind costs one read per step.
        """
        if self._block_hash is None:
            return {}
        first = min(max(blocks.first, head - self.settings.reorg_depth + 1), blocks.last)
        hashes = {number: self._block_hash(number) for number in range(first, blocks.last + 1)}
        known = {number: digest for number, digest in hashes.items() if digest is not None}
        return known if len(known) == len(hashes) else None

    def _follow_reorg(self, head: int) -> None:
        """If the last handled block is no longer the chain's, rewind to the newest remembered block that is.

        With no remembered block still the chain's, a head below the last handled block means a reset
        chain (raised by :meth:`step`); otherwise the reorganisation was deeper than ``reorg_depth``,
        and the agent rewinds that many blocks, which may not reach the fork.
        """
        last_block = self._state.last_block
        # Only hashes up to the last handled block count: a state whose last block was moved back by hand
        # (to handle blocks again) keeps newer ones, and its last block has no hash to check.
        remembered = [(number, digest) for number, digest in self._state.remembered_blocks() if number <= last_block]
        if self._block_hash is None or not remembered or remembered[0][0] != last_block:
            return
        ancestor = next((number for number, digest in remembered if self._block_hash(number) == digest), None)
        if ancestor == last_block:
            return
        if ancestor is not None:
            self.log.warning(
                "chain reorganised: handling the blocks after the common ancestor again",
                depth=last_block - ancestor,
                ancestor=ancestor,
                vanished=str(BlockRange(ancestor + 1, last_block)),
            )
        elif head < last_block:
            raise self._reset_error(head)
        else:
            ancestor = max(last_block - self.settings.reorg_depth, self.settings.start_block - 1)
            self.log.error(
                f"chain reorganised below every remembered block: rewinding {self.settings.reorg_depth} blocks, "
                f"which may not reach the fork; delete {self.settings.state_path} to handle the chain again "
                "from its start block",
                remembered=len(remembered),
                ancestor=ancestor,
            )

        def rewind(state: AgentState) -> None:
            state.last_block = ancestor
            state.forget_blocks_after(ancestor)
            if self._on_reorg is not None:
                self._on_reorg(state, ancestor)

        self._commit(rewind)

    def _reset_error(self, head: int) -> AgentError:
        """The error of a chain whose head is below the last handled block, which no reorganisation explains."""
        return AgentError(
            f"agent {self.settings.name!r} has handled up to block {self._state.last_block}, "
            f"but the chain's head is block {head}: the chain was reset or is another chain",
            hint=f"delete {self.settings.state_path} if the chain was restarted, or pass the right --rpc-url",
        )

    def run(self) -> AgentState:
        """Step until stopped (signal, :meth:`stop`, or a handler setting ``state.finished``); returns the state."""
        if self._state.finished:
            self.log.info("already finished; nothing to do", block=self._state.last_block)
            return self.state
        self.log.info("started", resume_from=self._state.last_block + 1, state=str(self.settings.state_path))
        failures = 0
        with exclusive(self.settings.state_path), self._stop_on_signals():
            while not self._stop_requested:
                try:
                    blocks = self.step()
                    failures = 0
                except self._transient as err:
                    failures += 1
                    if failures >= self.settings.max_consecutive_failures:
                        raise AgentError(
                            f"agent {self.settings.name!r} failed {failures} times in a row: {err}",
                            hint="check that the chain node (--rpc-url) and the blob store are reachable",
                        ) from err
                    self.log.warning("step failed; retrying", error=repr(err), failures=failures)
                    blocks = None
                if self._state.finished:
                    self.log.info("finished", block=self._state.last_block)
                    break
                if blocks is None:
                    self._sleep(self.settings.poll_interval_s)
        self.log.info("stopped", block=self._state.last_block)
        return self.state

    def _sleep(self, seconds: float) -> None:
        """Wait ``seconds``, returning early once a stop is requested."""
        deadline = time.monotonic() + seconds
        while not self._stop_requested and (remaining := deadline - time.monotonic()) > 0:
            time.sleep(min(remaining, STOP_CHECK_INTERVAL_S))

    def _stop_on_signals(self) -> contextlib.AbstractContextManager[bool]:
        """Turn SIGTERM and SIGINT into :meth:`stop` while the loop runs (main thread only)."""

        def on_signal(signum: int, _frame: object) -> None:
            if self._stop_requested:
                raise KeyboardInterrupt  # a second signal: leave now; the saved state is consistent
            self.stop(signal.Signals(signum).name)

        return handlers_set(dict.fromkeys(STOP_SIGNALS, on_signal))
