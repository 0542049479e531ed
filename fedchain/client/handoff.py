"""The job data a client hands to its fog node: safetensors bytes named by their keccak256.

A client writes its (locally noised) training data to the blob store as a
safetensors file with two tensors, ``images`` (float32 ``[N, C, H, W]``,
normalised as the dataset loader does) and ``labels`` (int64 ``[N]``), and one
``__metadata__`` key, ``"fedchain"``, holding canonical JSON
(:class:`JobDataMeta`). It commits the bytes' keccak256 on chain
(``DataHandoff.commitData``); the fog node that trains the job fetches the
object by that hash and checks it with :func:`decode_job_data`, which treats
the bytes as hostile (never unpickles) and refuses, with
:class:`~fedchain.errors.JobDataRejected`:

* bytes that do not hash to the committed hash (or a store object that is damaged);
* anything but a safetensors file with exactly ``images`` and ``labels`` of the right dtypes and ranks;
* metadata for another task or client;
* a sample count other than the data size D the client revealed in its auction (``AuctionOpened.dataSize``);
* labels outside ``0..num_classes-1``, images with another channel count, NaN or infinite pixels.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
from safetensors.torch import load as load_safetensors
from safetensors.torch import save as save_safetensors

from fedchain.errors import BlobCorrupted, BlobTooLarge, JobDataRejected
from fedchain.store.blobs import BlobStore
from fedchain.store.digest import keccak256, parse_digest, to_hex

if TYPE_CHECKING:  # the dataset code loads torchvision, which a fog node does not need
    from fedchain.data.datasets import ImageDataset

#: Version tag written into every job data payload; a reader rejects any other.
FORMAT = "fedchain-jobdata/1"
#: The single ``__metadata__`` key holding :class:`JobDataMeta` as JSON.
METADATA_KEY = "fedchain"
#: Bytes of one label (int64).
LABEL_BYTES = 8
#: Allowance for the safetensors header (names, shapes, metadata), bytes.
HEADER_SLACK_BYTES = 64 * 1024
#: The largest image side a reader accepts before it knows the images (CIFAR-10: 32, MNIST: 28).
MAX_IMAGE_SIDE = 64


@dataclass(frozen=True)
class JobDataMeta:
    """Whose data this is: the task, the client's index in it, the dataset and the privacy noise applied."""

    task_id: int
    client_index: int
    dataset: str
    #: Per-pixel local privacy budget applied before the hand-off; None: no noise.
    epsilon: float | None = None

    def to_json(self) -> str:
        """Canonical JSON (sorted keys, no spaces), with the format tag."""
        return json.dumps({"format": FORMAT, **asdict(self)}, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class JobData:
    """Decoded, checked job data."""

    images: torch.Tensor
    labels: torch.Tensor
    meta: JobDataMeta
    digest: bytes

    def __len__(self) -> int:
        return int(self.labels.shape[0])


@dataclass(frozen=True)
class ExpectedJobData:
    """What a fog node knows of a job's data before it sees it: from the chain and the task spec.

    Attributes:
        task_id: the task.
        client_index: the job's client.
        data_size: D, the samples the client revealed when it opened its auction.
        num_classes: the task's classes (labels must lie in ``0..num_classes-1``).
        in_channels: the task's image channels.
    """

    task_id: int
    client_index: int
    data_size: int
    num_classes: int
    in_channels: int

    @property
    def max_bytes(self) -> int:
        """The most bytes the data may take: D float32 images of up to MAX_IMAGE_SIDE squared pixels per channel."""
        pixels = self.in_channels * MAX_IMAGE_SIDE * MAX_IMAGE_SIDE
        return self.data_size * (4 * pixels + LABEL_BYTES) + HEADER_SLACK_BYTES


def encode_job_data(dataset: ImageDataset, meta: JobDataMeta) -> bytes:
    """The deterministic safetensors bytes of ``dataset``'s images and labels with ``meta``."""
    tensors = {
        "images": dataset.images.detach().to("cpu", torch.float32).contiguous(),
        "labels": dataset.labels.detach().to("cpu", torch.int64).contiguous(),
    }
    return save_safetensors(tensors, metadata={METADATA_KEY: meta.to_json()})


def decode_job_data(data: bytes, expected_hash: bytes | str, expected: ExpectedJobData) -> JobData:
    """Check untrusted job data against the on-chain hash and data size; see the module's list of refusals."""
    committed = parse_digest(expected_hash)
    digest = keccak256(data)
    if digest != committed:
        raise JobDataRejected(f"the job data hashes to {to_hex(digest)}, but the client committed {to_hex(committed)}")
    try:
        tensors = load_safetensors(bytes(data))
        header_length = int.from_bytes(data[:8], "little")
        header = json.loads(data[8 : 8 + header_length])
    except Exception as err:  # safetensors raises several kinds of errors on bad input
        raise JobDataRejected(f"the job data is not a safetensors file: {err}") from err
    meta = _meta(header.get("__metadata__"))
    if (meta.task_id, meta.client_index) != (expected.task_id, expected.client_index):
        raise JobDataRejected(
            f"the job data is for task {meta.task_id} client {meta.client_index}, "
            f"not task {expected.task_id} client {expected.client_index}"
        )
    if set(tensors) != {"images", "labels"}:
        raise JobDataRejected(f"the job data holds tensors {sorted(tensors)}, expected images and labels")
    images, labels = tensors["images"], tensors["labels"]
    if images.dtype != torch.float32 or images.ndim != 4 or images.shape[1] != expected.in_channels:
        raise JobDataRejected(
            f"the job data's images are {images.dtype} of shape {tuple(images.shape)}, expected float32 [N, {expected.in_channels}, H, W]"
        )
    if labels.dtype != torch.int64 or labels.ndim != 1:
        raise JobDataRejected(
            f"the job data's labels are {labels.dtype} of shape {tuple(labels.shape)}, expected int64 [N]"
        )
    size = expected.data_size
    if images.shape[0] != size or labels.shape[0] != size:
        raise JobDataRejected(
            f"the job data has {images.shape[0]} images and {labels.shape[0]} labels, "
            f"but the client revealed a data size of {size} in its auction"
        )
    if size and (int(labels.min()) < 0 or int(labels.max()) >= expected.num_classes):
        raise JobDataRejected(f"the job data has labels outside 0..{expected.num_classes - 1}")
    if not bool(np.isfinite(images.numpy()).all()):
        raise JobDataRejected("the job data's images hold NaN or infinite values")
    return JobData(images=images, labels=labels, meta=meta, digest=digest)


def fetch_job_data(store: BlobStore, expected_hash: bytes | str, expected: ExpectedJobData) -> JobData:
    """Fetch the job data committed as ``expected_hash`` and check it like :func:`decode_job_data`.

    An object that is absent raises :class:`~fedchain.errors.BlobNotFound` (the
    client may not have uploaded it yet: try again later); one that is damaged
    or too large is a :class:`~fedchain.errors.JobDataRejected`.
    """
    name = to_hex(parse_digest(expected_hash))
    try:
        data = store.get(expected_hash, max_bytes=expected.max_bytes)
    except (BlobCorrupted, BlobTooLarge) as err:
        raise JobDataRejected(f"job data {name}: {err.args[0]}") from err
    return decode_job_data(data, expected_hash, expected)


def _meta(metadata: object) -> JobDataMeta:
    if not isinstance(metadata, dict) or not isinstance(metadata.get(METADATA_KEY), str):
        raise JobDataRejected(
            f"the job data carries no {METADATA_KEY!r} metadata: it was not written by a FedChain client"
        )
    try:
        fields = json.loads(metadata[METADATA_KEY])
    except ValueError as err:
        raise JobDataRejected(f"the job data's metadata is not JSON: {err}") from err
    if not isinstance(fields, dict) or fields.pop("format", None) != FORMAT:
        raise JobDataRejected(f"the job data's metadata is not in the {FORMAT} format")
    well_typed = (
        set(fields) == {"task_id", "client_index", "dataset", "epsilon"}
        and type(fields["task_id"]) is int
        and type(fields["client_index"]) is int
        and isinstance(fields["dataset"], str)
        and (fields["epsilon"] is None or isinstance(fields["epsilon"], (int, float)))
    )
    if not well_typed:
        raise JobDataRejected(f"the job data's metadata has unexpected fields or types: {sorted(fields)}")
    return JobDataMeta(**fields)
