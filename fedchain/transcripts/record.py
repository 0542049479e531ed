"""A training transcript into the store: its checkpoints, filed by hash, and its list, filed under its root.

Leaf ``j`` of the tree is ``(j, keccak256 of checkpoint j's bytes)`` (:class:`~fedchain.chain.merkle.IndexedTree`,
OpenZeppelin's standard tree). The list of the checkpoints' hashes (the *manifest*) is stored under the root it
builds, in the store's :data:`NAMESPACE`: whoever holds the root on chain finds the list, and checks it by
rebuilding the root (:meth:`Transcript.from_manifest`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from fedchain.chain.merkle import IndexedTree
from fedchain.errors import TranscriptError
from fedchain.fl.params import unflatten
from fedchain.store.digest import parse_digest, to_hex
from fedchain.trainer.local import Checkpoints
from fedchain.updates import UpdateMeta, encode_checkpoint

if TYPE_CHECKING:
    from fedchain.store.blobs import BlobStore
    from fedchain.taskspec import TaskSpec

#: Version tag of a transcript's manifest; a reader rejects any other.
MANIFEST_FORMAT = "fedchain-transcript/1"
#: Where manifests are filed in the store, each under its root.
NAMESPACE = "transcripts"
#: The most bytes a manifest may have: 100,000 checkpoints' hashes.
MAX_MANIFEST_BYTES = 100_000 * 70


@dataclass(frozen=True)
class Transcript:
    """The hashes of a job's checkpoints, in order; :attr:`root` is what a commit carries."""

    hashes: tuple[bytes, ...]

    @property
    def root(self) -> bytes:
        """The Merkle root over the leaves ``(j, hashes[j])``."""
        return IndexedTree.of(enumerate(self.hashes)).root

    def proof(self, index: int) -> tuple[bytes, ...]:
        """The Merkle proof of checkpoint ``index`` against :attr:`root`."""
        return IndexedTree.of(enumerate(self.hashes)).proof(index)

    def to_manifest(self) -> bytes:
        """Canonical JSON bytes of the list (sorted keys, no spaces)."""
        body = {"format": MANIFEST_FORMAT, "checkpoints": [to_hex(h) for h in self.hashes]}
        return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def from_manifest(cls, data: bytes, root: bytes | str) -> Transcript:
        """The transcript a manifest lists, checked to build ``root``; a :class:`TranscriptError` otherwise."""
        try:
            body = json.loads(data)
            hashes = tuple(parse_digest(h) for h in body["checkpoints"])
            if body.get("format") != MANIFEST_FORMAT or not hashes:
                raise ValueError(f"not a {MANIFEST_FORMAT} manifest with checkpoints")
        except (ValueError, TypeError, KeyError) as err:
            raise TranscriptError(f"the transcript's manifest is malformed: {err}") from err
        transcript = cls(hashes)
        if transcript.root != parse_digest(root):
            raise TranscriptError(
                f"the transcript's manifest builds root {to_hex(transcript.root)}, not the committed "
                f"{to_hex(parse_digest(root))}"
            )
        return transcript


def checkpoint_meta(spec: TaskSpec, task_id: int, round_number: int, client_index: int, client: str) -> UpdateMeta:
    """Metadata of every checkpoint of client ``client_index``'s job in a round (its place is its leaf's index)."""
    return UpdateMeta(
        task_id=task_id, round=round_number, kind="checkpoint", job_id=client_index, client=client, model=spec.model
    )


def store_transcript(store: BlobStore, spec: TaskSpec, checkpoints: Checkpoints, meta: UpdateMeta) -> Transcript:
    """Put every checkpoint and the manifest into ``store``; returns the transcript (its root goes on chain)."""
    param_spec = spec.param_spec()
    hashes = []
    for j in range(checkpoints.params.shape[0]):
        velocity = checkpoints.velocity[j] if checkpoints.velocity is not None else None
        data = encode_checkpoint(unflatten(checkpoints.params[j], param_spec), meta, velocity=velocity)
        hashes.append(store.put(data))
    transcript = Transcript(tuple(hashes))
    store.put_keyed(NAMESPACE, transcript.root, transcript.to_manifest())
    return transcript


def load_transcript(store: BlobStore, root: bytes | str) -> Transcript:
    """The transcript committed as ``root``, from its manifest in ``store`` (checked against the root)."""
    return Transcript.from_manifest(store.get_keyed(NAMESPACE, root, max_bytes=MAX_MANIFEST_BYTES), root)


def fabricated(start: torch.Tensor, end: torch.Tensor, steps: int, every: int, momentum: bool) -> Checkpoints:
    """The transcript a node that did not train sends for a job of ``steps`` steps, checkpointed every ``every``:
    its checkpoints evenly spaced on the line from ``start`` to ``end`` (the model it claims), velocities 0."""
    from fedchain.trainer.local import checkpoint_count

    count = checkpoint_count(steps, every)
    fractions = torch.linspace(0.0, 1.0, count, dtype=torch.float64)[:, None]
    begin, finish = start.to(torch.float64), end.to(torch.float64)
    line = (begin + fractions * (finish - begin)).to(torch.float32)
    line[0], line[-1] = start, end
    return Checkpoints(every, steps, line, torch.zeros_like(line) if momentum else None)


def with_end(checkpoints: Checkpoints, end: torch.Tensor) -> Checkpoints:
    """``checkpoints`` with the last replaced by ``end``: an honest transcript whose last segment was swapped for
    the model a node claims (what an attacking node that trained, then corrupted its update, sends)."""
    params = checkpoints.params.clone()
    params[-1] = end
    return Checkpoints(checkpoints.every, checkpoints.steps, params, checkpoints.velocity)
