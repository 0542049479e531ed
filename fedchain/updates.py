"""The update codec: model parameters as safetensors bytes, and the checks on untrusted ones.

Every tensor payload that crosses a process boundary (a fog node's update, the
aggregator's global model of a round) is a safetensors file whose
``__metadata__`` holds one key, ``"fedchain"``: a JSON object (sorted keys)
with the payload's format, kind, task, round, job, client and model name
(:class:`UpdateMeta`). One key keeps the bytes deterministic (safetensors
writes several metadata keys in a random order), so equal parameters and
metadata always give equal bytes and the same hash.

The hash committed on chain is :func:`~fedchain.store.keccak256` of these exact
bytes (:func:`update_hash`).

:func:`decode_update` treats its input as hostile. It never unpickles; it
rejects, in this order, with an :class:`~fedchain.errors.UpdateRejected`
subclass whose ``reason`` the aggregator records as the failed quality check:

=====================  ==================================================
``oversized``          more bytes than ``max_bytes`` (checked first, before hashing)
``hash_mismatch``      the bytes do not hash to the committed hash
``not_safetensors``    a pickle, garbage, a truncated or inconsistent file
``wrong_metadata``     no FedChain metadata, or not the expected task/round/job
``wrong_names``        tensor names differ from the model's
``wrong_shape``        a tensor's shape differs
``wrong_dtype``        a tensor's dtype differs
``non_finite``         a NaN or an infinity
``bad_local_losses``   local losses missing, unexpected, or not a finite,
                       non-negative float32 vector of the expected length
=====================  ==================================================

Local losses (fedave): an update of a task whose strategy needs them carries,
besides the model's tensors, one extra tensor :data:`LOCAL_LOSSES`: the
per-sample cross-entropy of the fog node's trained model on the first
:func:`local_loss_count` samples of the job's data, float32 ``[count]``.
Inside the payload, the on-chain hash covers it like the parameters.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch
from safetensors.torch import load as load_safetensors
from safetensors.torch import save as save_safetensors

from fedchain.errors import (
    BlobCorrupted,
    BlobNotFound,
    BlobTooLarge,
    RejectReason,
    StoreError,
    UpdateHashMismatch,
    UpdateLocalLossesRejected,
    UpdateMetadataMismatch,
    UpdateMissing,
    UpdateNonFinite,
    UpdateNotSafetensors,
    UpdateSpecMismatch,
    UpdateTooLarge,
)
from fedchain.fl.params import Params, ParamSpec
from fedchain.store.blobs import BlobStore
from fedchain.store.digest import CANONICAL_HASH, keccak256, parse_digest, to_hex

#: Version tag written into every payload; a reader rejects any other.
FORMAT = "fedchain-params/1"
#: The single ``__metadata__`` key that holds FedChain's metadata (JSON).
METADATA_KEY = "fedchain"
#: safetensors files start with an 8-byte little-endian header length.
HEADER_LENGTH_BYTES = 8

#: Name of the extra tensor holding an update's per-sample local losses (fedave).
LOCAL_LOSSES = "__local_losses__"
#: The most local losses an update carries (4 bytes each): a larger job ships its first this many samples' losses.
MAX_LOCAL_LOSSES = 65_536

#: What a payload holds: a client's trained update, a round's global model, a client's rewarded model, or one
#: checkpoint of a fog node's training transcript (:mod:`fedchain.transcripts`).
PayloadKind = Literal["update", "model", "reward", "checkpoint"]
#: Name of the extra tensor of a checkpoint that holds SGD's velocity (flat float32 ``[d]``) in a task with momentum.
VELOCITY = "__velocity__"


@dataclass(frozen=True)
class UpdateMeta:
    """Who produced a payload, for which task, round and model.

    ``job_id`` and ``client`` name the training job and the client (address)
    of an update (the address is kept in lowercase); a global model leaves them
    ``None``. ``model`` is the model spec's name (for example ``"mnist-cnn"``).
    """

    task_id: int
    round: int
    kind: PayloadKind = "update"
    job_id: int | None = None
    client: str | None = None
    model: str = ""

    def __post_init__(self) -> None:
        if self.client is not None:  # addresses compare equal whatever their checksum casing
            object.__setattr__(self, "client", self.client.lower())
        if self.kind not in ("update", "model", "reward", "checkpoint"):
            raise ValueError(f"kind must be 'update', 'model', 'reward' or 'checkpoint', got {self.kind!r}")
        if self.task_id < 0 or self.round < 0 or (self.job_id is not None and self.job_id < 0):
            raise ValueError(f"task_id, round and job_id must be non-negative in {self}")

    def to_json(self) -> str:
        """Canonical JSON (sorted keys, no spaces), with the format tag."""
        return json.dumps({"format": FORMAT, **dataclasses.asdict(self)}, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> UpdateMeta:
        """Parse :meth:`to_json`'s output; anything else raises :class:`UpdateMetadataMismatch`."""
        try:
            fields = json.loads(text)
        except ValueError as err:
            raise UpdateMetadataMismatch(f"the update's metadata is not JSON: {err}") from err
        if not isinstance(fields, dict) or fields.pop("format", None) != FORMAT:
            raise UpdateMetadataMismatch(f"the update's metadata is not in the {FORMAT} format")
        expected = {f.name for f in dataclasses.fields(cls)}
        if set(fields) != expected:
            raise UpdateMetadataMismatch(
                f"the update's metadata has fields {sorted(fields)}, expected {sorted(expected)}"
            )
        integers = ("task_id", "round")
        if any(type(fields[name]) is not int for name in integers) or type(fields["job_id"]) not in (int, type(None)):
            raise UpdateMetadataMismatch("the update's task_id, round and job_id must be integers")
        if not isinstance(fields["model"], str) or not isinstance(fields["client"], (str, type(None))):
            raise UpdateMetadataMismatch("the update's model and client must be text")
        try:
            return cls(**fields)
        except ValueError as err:
            raise UpdateMetadataMismatch(f"the update's metadata is invalid: {err}") from err


@dataclass(frozen=True)
class DecodedUpdate:
    """A payload that passed every check: its parameters (in the spec's order), metadata and hash."""

    params: Params
    meta: UpdateMeta
    digest: bytes
    #: Per-sample local losses ``[count]`` float32 when the payload had to carry them, else None.
    local_losses: torch.Tensor | None = None


def local_loss_count(data_size: int) -> int:
    """How many per-sample local losses an update of a job of ``data_size`` samples carries."""
    return max(0, min(int(data_size), MAX_LOCAL_LOSSES))


def local_losses_bytes(count: int | None) -> int:
    """Bytes that ``count`` local losses add to a payload (add them to its size limit)."""
    return 4 * (count or 0)


def update_hash(data: bytes) -> bytes:
    """The hash committed on chain for a payload: keccak256 of its exact bytes."""
    return keccak256(data)


def encode_update(
    params: Mapping[str, torch.Tensor], meta: UpdateMeta, *, local_losses: torch.Tensor | None = None
) -> bytes:
    """Serialise ``params`` with ``meta`` as deterministic safetensors bytes (tensors moved to CPU).

    ``local_losses``, when given, goes in as the float32 vector :data:`LOCAL_LOSSES`.
    """
    tensors = {name: tensor.detach().to("cpu").contiguous() for name, tensor in params.items()}
    if local_losses is not None:
        tensors[LOCAL_LOSSES] = local_losses.detach().to("cpu", torch.float32).reshape(-1).contiguous()
    return save_safetensors(tensors, metadata={METADATA_KEY: meta.to_json()})


def _header(data: bytes) -> dict[str, Any]:
    """The JSON header of a safetensors file, parsed without trusting its length field."""
    if len(data) < HEADER_LENGTH_BYTES:
        raise UpdateNotSafetensors(f"the update has {len(data)} bytes, too few for a safetensors file")
    length = int.from_bytes(data[:HEADER_LENGTH_BYTES], "little")
    if length > len(data) - HEADER_LENGTH_BYTES:
        raise UpdateNotSafetensors(
            f"the update's header claims {length} bytes but only {len(data) - HEADER_LENGTH_BYTES} follow: "
            "not a safetensors file (a pickle or garbage?)"
        )
    try:
        header = json.loads(data[HEADER_LENGTH_BYTES : HEADER_LENGTH_BYTES + length].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise UpdateNotSafetensors(f"the update's header is not JSON: {err}") from err
    if not isinstance(header, dict):
        raise UpdateNotSafetensors("the update's header is not a JSON object")
    return header


def _check_spec(tensors: Mapping[str, torch.Tensor], spec: ParamSpec) -> None:
    """Raise :class:`UpdateSpecMismatch` unless ``tensors`` has exactly ``spec``'s names, shapes and dtypes."""
    if set(tensors) != set(spec.names):
        missing = sorted(set(spec.names) - set(tensors))
        extra = sorted(set(tensors) - set(spec.names))
        raise UpdateSpecMismatch(
            f"the update's tensors differ from the model's: missing {missing}, unexpected {extra}",
            reason=RejectReason.WRONG_NAMES,
        )
    for name, shape, dtype in zip(spec.names, spec.shapes, spec.dtypes, strict=True):
        tensor = tensors[name]
        if tuple(tensor.shape) != tuple(shape):
            raise UpdateSpecMismatch(
                f"tensor {name!r} has shape {tuple(tensor.shape)}, the model's is {tuple(shape)}",
                reason=RejectReason.WRONG_SHAPE,
            )
        if tensor.dtype != dtype:
            raise UpdateSpecMismatch(
                f"tensor {name!r} has dtype {tensor.dtype}, the model's is {dtype}", reason=RejectReason.WRONG_DTYPE
            )


def _all_finite(tensor: torch.Tensor) -> bool:
    """Whether a CPU tensor holds no NaN or infinity (numpy: many times faster than torch on a busy CPU)."""
    if not (tensor.is_floating_point() or tensor.is_complex()):
        return True
    if tensor.dtype == torch.bfloat16:  # numpy has no bfloat16; float32 holds every bfloat16 value
        tensor = tensor.to(torch.float32)
    return bool(np.isfinite(tensor.numpy()).all())


def decode_update(
    data: bytes,
    expected_hash: bytes | str | None,
    expected_spec: ParamSpec,
    max_bytes: int,
    *,
    expected_meta: UpdateMeta | None = None,
    expected_local_losses: int | None = None,
) -> DecodedUpdate:
    """Check an untrusted payload and return its parameters; never unpickles.

    ``expected_hash`` is the hash committed on chain (``None`` only when the
    caller has verified the bytes already). ``expected_meta``, when given,
    must equal the payload's metadata. ``expected_local_losses`` is the number
    of local losses the payload must carry (None: it must carry none). Raises an
    :class:`~fedchain.errors.UpdateRejected` subclass whose ``reason`` says
    what was wrong (see the module's table).
    """
    if len(data) > max_bytes:
        raise UpdateTooLarge(f"the update has {len(data)} bytes, over the limit of {max_bytes}")
    digest = update_hash(data)
    if expected_hash is not None and digest != parse_digest(expected_hash):
        raise UpdateHashMismatch(
            f"the update hashes to {to_hex(digest)}, but {to_hex(parse_digest(expected_hash))} was committed"
        )
    return _decode_hashed(data, digest, expected_spec, expected_meta, expected_local_losses)


def _check_local_losses(losses: torch.Tensor | None, expected: int | None) -> None:
    """Raise :class:`UpdateLocalLossesRejected` unless ``losses`` is what ``expected`` asks for."""
    if expected is None:
        if losses is not None:
            raise UpdateLocalLossesRejected(f"the update carries {LOCAL_LOSSES!r}, which this task's updates must not")
        return
    if losses is None:
        raise UpdateLocalLossesRejected(f"the update carries no {LOCAL_LOSSES!r}: {expected} local losses expected")
    if losses.dtype != torch.float32 or tuple(losses.shape) != (expected,):
        raise UpdateLocalLossesRejected(
            f"the update's local losses are {losses.dtype} of shape {tuple(losses.shape)}, expected float32 ({expected},)"
        )
    if not _all_finite(losses) or bool((losses < 0).any()):
        raise UpdateLocalLossesRejected("the update's local losses must be finite and non-negative (cross-entropies)")


def _checked_tensors(
    data: bytes, expected_spec: ParamSpec, expected_meta: UpdateMeta | None, extra: str
) -> tuple[UpdateMeta, dict[str, torch.Tensor], torch.Tensor | None]:
    """A payload's metadata, its model tensors (``expected_spec``'s names, shapes and dtypes, all finite) and its
    ``extra`` tensor (None when absent), or the :class:`UpdateRejected` subclass of what is wrong."""
    header = _header(data)
    try:
        tensors = load_safetensors(bytes(data))
    except Exception as err:  # safetensors raises its own SafetensorError and others on bad input
        raise UpdateNotSafetensors(f"the update is not a valid safetensors file: {err}") from err
    metadata = header.get("__metadata__")
    if not isinstance(metadata, dict) or not isinstance(metadata.get(METADATA_KEY), str):
        raise UpdateMetadataMismatch(f"the update carries no {METADATA_KEY!r} metadata: it was not written by FedChain")
    meta = UpdateMeta.from_json(metadata[METADATA_KEY])
    if expected_meta is not None and meta != expected_meta:
        raise UpdateMetadataMismatch(f"the update is for {meta}, expected {expected_meta}")
    extra_tensor = tensors.pop(extra, None)
    _check_spec(tensors, expected_spec)
    for name in expected_spec.names:
        if not _all_finite(tensors[name]):
            raise UpdateNonFinite(f"tensor {name!r} holds NaN or infinite values")
    return meta, tensors, extra_tensor


def _decode_hashed(
    data: bytes,
    digest: bytes,
    expected_spec: ParamSpec,
    expected_meta: UpdateMeta | None,
    expected_local_losses: int | None = None,
) -> DecodedUpdate:
    """The checks after size and hash: format, metadata, tensor spec, finiteness, local losses."""
    meta, tensors, local_losses = _checked_tensors(data, expected_spec, expected_meta, LOCAL_LOSSES)
    _check_local_losses(local_losses, expected_local_losses)
    return DecodedUpdate(
        params={name: tensors[name] for name in expected_spec.names},
        meta=meta,
        digest=digest,
        local_losses=local_losses,
    )


def _require_canonical(store: BlobStore) -> None:
    """Refuse a store whose object names are not the hashes committed on chain."""
    if store.hash_name != CANONICAL_HASH:
        raise StoreError(
            f"{store!r} files objects by {store.hash_name}, so its names are not the hashes committed on chain",
            hint=f"open the store with hash_name={CANONICAL_HASH!r} (the default) for updates and models",
        )


def store_update(
    store: BlobStore, params: Mapping[str, torch.Tensor], meta: UpdateMeta, *, local_losses: torch.Tensor | None = None
) -> bytes:
    """Encode ``params`` (and ``local_losses``) and put them in ``store``; returns the hash to commit on chain."""
    _require_canonical(store)
    return store.put(encode_update(params, meta, local_losses=local_losses))


def fetch_update(
    store: BlobStore,
    expected_hash: bytes | str,
    expected_spec: ParamSpec,
    max_bytes: int,
    *,
    expected_meta: UpdateMeta | None = None,
    expected_local_losses: int | None = None,
) -> DecodedUpdate:
    """Fetch the payload committed as ``expected_hash`` from ``store`` and check it like :func:`decode_update`.

    Store failures become rejections too: absent -> ``missing``, larger than
    ``max_bytes`` -> ``oversized``, damaged -> ``hash_mismatch``.
    """
    _require_canonical(store)
    name = to_hex(parse_digest(expected_hash))
    try:
        data = store.get(expected_hash, max_bytes=max_bytes)
    except BlobNotFound as err:
        raise UpdateMissing(f"update {name} is not in the store {store.url}") from err
    except BlobTooLarge as err:
        raise UpdateTooLarge(f"update {name}: {err.args[0]}") from err
    except BlobCorrupted as err:
        raise UpdateHashMismatch(f"update {name}: {err.args[0]}") from err
    # The store has just checked the size and verified the bytes against expected_hash: do not hash twice.
    return _decode_hashed(data, parse_digest(expected_hash), expected_spec, expected_meta, expected_local_losses)


# --------------------------------------------------------------------------- checkpoints


@dataclass(frozen=True)
class DecodedCheckpoint:
    """A checkpoint of a training transcript that passed every check: the model's state and SGD's velocity."""

    params: Params
    #: SGD's velocity, flat float32 ``[d]``, when the task trains with momentum; else None.
    velocity: torch.Tensor | None
    meta: UpdateMeta
    digest: bytes


def encode_checkpoint(
    params: Mapping[str, torch.Tensor], meta: UpdateMeta, *, velocity: torch.Tensor | None = None
) -> bytes:
    """Serialise one training state as deterministic safetensors bytes: the model's tensors and, with momentum,
    the velocity as the float32 vector :data:`VELOCITY`."""
    if meta.kind != "checkpoint":
        raise ValueError(f"a checkpoint's metadata must be of kind 'checkpoint', got {meta.kind!r}")
    tensors = {name: tensor.detach().to("cpu").contiguous() for name, tensor in params.items()}
    if velocity is not None:
        tensors[VELOCITY] = velocity.detach().to("cpu", torch.float32).reshape(-1).contiguous()
    return save_safetensors(tensors, metadata={METADATA_KEY: meta.to_json()})


def decode_checkpoint(
    data: bytes,
    expected_hash: bytes | str,
    expected_spec: ParamSpec,
    max_bytes: int,
    *,
    expected_meta: UpdateMeta,
    momentum: bool,
) -> DecodedCheckpoint:
    """Check an untrusted checkpoint like :func:`decode_update` (size, hash, format, metadata, tensors, finiteness);
    it must carry a finite float32 velocity of the model's length exactly when ``momentum``."""
    if len(data) > max_bytes:
        raise UpdateTooLarge(f"the checkpoint has {len(data)} bytes, over the limit of {max_bytes}")
    digest = update_hash(data)
    if digest != parse_digest(expected_hash):
        raise UpdateHashMismatch(
            f"the checkpoint hashes to {to_hex(digest)}, but {to_hex(parse_digest(expected_hash))} was committed"
        )
    meta, tensors, velocity = _checked_tensors(data, expected_spec, expected_meta, VELOCITY)
    if momentum != (velocity is not None):
        raise UpdateSpecMismatch(
            f"the checkpoint {'lacks' if momentum else 'carries'} {VELOCITY!r}: the task trains "
            f"{'with' if momentum else 'without'} momentum",
            reason=RejectReason.WRONG_NAMES,
        )
    if velocity is not None:
        if velocity.dtype != torch.float32 or tuple(velocity.shape) != (expected_spec.numel,):
            raise UpdateSpecMismatch(
                f"the checkpoint's velocity is {velocity.dtype} of shape {tuple(velocity.shape)}, "
                f"expected float32 ({expected_spec.numel},)",
                reason=RejectReason.WRONG_SHAPE,
            )
        if not _all_finite(velocity):
            raise UpdateNonFinite("the checkpoint's velocity holds NaN or infinite values")
    return DecodedCheckpoint({name: tensors[name] for name in expected_spec.names}, velocity, meta, digest)


def checkpoint_bytes(spec: ParamSpec, momentum: bool) -> int:
    """The size limit of one checkpoint of a model of ``spec``: the tensors, a velocity, and room for the header."""
    tensors = sum(
        size * torch.empty((), dtype=dtype).element_size() for size, dtype in zip(spec.sizes, spec.dtypes, strict=True)
    )
    return tensors + (4 * spec.numel if momentum else 0) + 64 * 1024
