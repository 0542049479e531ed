"""What a long-running agent remembers across restarts, saved atomically as JSON.

The state file is small, human-readable JSON (``jq`` works on it)::

    {
      "version": 1,
      "agent": "fog-1",
      "last_block": 1234,
      "finished": false,
      "jobs": {"7": {"phase": "committed", "bid_salt": "0x..."}},
      "pending_txs": {"0xab...": {"action": "reveal", "job": 7}},
      "data": {},
      "block_hashes": {"1233": "0x5d...", "1234": "0x2d..."}
    }

``last_block`` is the last block whose events were fully handled; a restart
resumes at the block after it. ``block_hashes`` holds the hashes of the newest
handled blocks (at most the agent's ``reorg_depth`` of them, keyed by block
number as text), so that the runtime can tell whether the blocks it handled
are still the chain's after a reorganisation; a file saved before they were
kept loads with none. ``jobs`` (keyed by job id as text, since JSON
keys are text), ``pending_txs`` (keyed by transaction hash) and ``data`` belong
to the agent: the runtime only saves them. Record a transaction in
``pending_txs`` *before* sending it, and check its receipt on restart, so an
agent killed between sending and saving does not send it twice.

A save writes a temporary file beside the state file, flushes it to disk and
renames it over the old one, so a crash leaves either the old or the new
state, never a mix.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fedchain.errors import AgentError
from fedchain.files import writable_folder, write_atomic

log = logging.getLogger(__name__)

#: Version of the state file layout; a file of another version is refused.
STATE_VERSION = 1


@dataclass
class AgentState:
    """An agent's progress and bookkeeping; mutable, saved by the runtime after every step."""

    agent: str
    last_block: int
    finished: bool = False
    jobs: dict[str, Any] = field(default_factory=dict)
    pending_txs: dict[str, Any] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)
    #: The account the agent signs with (checksum address); None: not recorded (a file from before it was).
    owner: str | None = None
    #: Hashes (0x hex) of the newest handled blocks, keyed by block number as text; kept by the runtime.
    block_hashes: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> str:
        """The state as indented JSON; :class:`AgentError` if the agent stored something JSON cannot hold."""
        try:
            return json.dumps({"version": STATE_VERSION, **asdict(self)}, indent=2, sort_keys=True, allow_nan=False)
        except (TypeError, ValueError) as err:
            raise AgentError(
                f"agent {self.agent!r} keeps state that JSON cannot hold: {err}",
                hint="store only text, numbers, booleans, None, lists and dicts with text keys (hashes as 0x hex)",
            ) from err

    @classmethod
    def from_json(cls, text: str, *, source: str = "the state file") -> AgentState:
        """Parse :meth:`to_json`'s output."""
        try:
            raw = json.loads(text)
        except ValueError as err:
            raise AgentError(f"{source} is not valid JSON: {err}", hint=_DAMAGED_HINT) from err
        if not isinstance(raw, dict) or raw.pop("version", None) != STATE_VERSION:
            raise AgentError(f"{source} is not a version-{STATE_VERSION} agent state file", hint=_DAMAGED_HINT)
        try:
            state = cls(**raw)
        except TypeError as err:
            raise AgentError(f"{source} has unexpected fields: {err}", hint=_DAMAGED_HINT) from err
        well_typed = (
            isinstance(state.agent, str)
            and type(state.last_block) is int
            and isinstance(state.finished, bool)
            and all(isinstance(table, dict) for table in (state.jobs, state.pending_txs, state.data))
            and (state.owner is None or isinstance(state.owner, str))
            and isinstance(state.block_hashes, dict)
            and all(number.isdecimal() and _is_hex(digest) for number, digest in state.block_hashes.items())
        )
        if not well_typed:
            raise AgentError(f"{source} has a field of the wrong type", hint=_DAMAGED_HINT)
        return state

    def track_tx(self, tx_hash: str | bytes, action: str, **details: Any) -> None:
        """Record a transaction as pending: do it after signing and *before* sending, then save.

        Sign locally (``account.sign_transaction``) to know the hash before the
        transaction leaves; on restart, look up each pending hash's receipt
        instead of sending again.
        """
        self.pending_txs[_tx_key(tx_hash)] = {"action": action, **details}

    def settle_tx(self, tx_hash: str | bytes) -> dict[str, Any] | None:
        """Forget a pending transaction (mined or dropped); returns what was recorded, if anything."""
        return self.pending_txs.pop(_tx_key(tx_hash), None)

    def remember_blocks(self, hashes: Mapping[int, bytes], keep: int) -> None:
        """Add the hashes of handled blocks, keeping only those of the ``keep`` newest block numbers."""
        self.block_hashes.update({str(number): "0x" + bytes(digest).hex() for number, digest in hashes.items()})
        newest = max(map(int, self.block_hashes), default=0)
        self.block_hashes = {
            number: digest for number, digest in self.block_hashes.items() if int(number) > newest - keep
        }

    def forget_blocks_after(self, block: int) -> None:
        """Drop the hashes of blocks after ``block`` (they were reorganised away)."""
        self.block_hashes = {number: digest for number, digest in self.block_hashes.items() if int(number) <= block}

    def remembered_blocks(self) -> list[tuple[int, bytes]]:
        """The remembered ``(block number, hash)`` pairs, newest first."""
        pairs = [
            (int(number), bytes.fromhex(digest.removeprefix("0x"))) for number, digest in self.block_hashes.items()
        ]
        return sorted(pairs, reverse=True)

    def copy(self) -> AgentState:
        """A deep copy (through JSON, so it also proves the state can be saved)."""
        return AgentState.from_json(self.to_json())


def _is_hex(text: object) -> bool:
    """Whether ``text`` is 0x-prefixed hexadecimal text."""
    if not isinstance(text, str) or not text.startswith("0x"):
        return False
    try:
        bytes.fromhex(text[2:])
    except ValueError:
        return False
    return True


def _tx_key(tx_hash: str | bytes) -> str:
    """A transaction hash as the lowercase 0x hex that keys ``pending_txs``."""
    text = "0x" + bytes(tx_hash).hex() if isinstance(tx_hash, (bytes, bytearray)) else tx_hash.lower()
    return text if text.startswith("0x") else "0x" + text


_DAMAGED_HINT = (
    "restore the file from a backup, or delete it to start over from the configured start block "
    "(the agent then replays the chain's events from there)"
)


def save_state(path: Path, state: AgentState) -> None:
    """Save ``state`` to ``path`` atomically."""
    write_atomic(path, state.to_json().encode())


def load_state(path: Path, *, agent: str, start_block: int, owner: str | None = None) -> AgentState:
    """The state saved at ``path``, or a fresh one that starts at ``start_block`` if there is none.

    A file saved by another agent, or under another signing account
    (``owner``), is refused rather than silently taken over: its bids' salts
    and pending transactions are that account's.
    """
    if not path.exists():
        return AgentState(agent=agent, last_block=start_block - 1, owner=owner)
    state = AgentState.from_json(path.read_text(), source=f"state file {path}")
    if state.agent != agent:
        raise AgentError(
            f"state file {path} belongs to agent {state.agent!r}, not {agent!r}",
            hint="give every agent its own state file (--state PATH)",
        )
    if owner is not None and state.owner not in (None, owner):
        raise AgentError(
            f"state file {path} was saved by account {state.owner}, but agent {agent!r} now signs as {owner}",
            hint="give every account its own state file (--state PATH), or sign with the key that saved this one",
        )
    if owner is not None:
        state.owner = owner
    return state


@contextlib.contextmanager
def exclusive(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on the state file ``path`` (through ``PATH.lock``) while the block runs.

    Two processes working from one state file would overwrite each other's
    bids, salts and pending transactions; the second is refused instead. The
    lock dies with its process, so a killed agent leaves no stale lock. A file
    system that cannot lock (some network file systems) is warned about, and
    the agent runs unprotected.
    """
    writable_folder(path.parent, option="--state PATH (the agent's state file)")  # before any block is handled
    lock_path = path.with_name(path.name + ".lock")
    with open(lock_path, "a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "unknown"
            raise AgentError(
                f"state file {path} is in use by another running agent (process {holder})",
                hint="stop that process first, or give this agent its own state file (--state PATH)",
            ) from None
        except OSError as err:
            log.warning("cannot lock %s (%s): nothing stops a second agent from using %s", lock_path, err, path)
            yield
            return
        lock.truncate(0)
        lock.write(str(os.getpid()))
        lock.flush()
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
