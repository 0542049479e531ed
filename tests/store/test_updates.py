"""The update codec round-trips parameters and rejects every malformed kind with its reason code."""

from __future__ import annotations

import io
import json
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import save as save_safetensors

from fedchain.errors import (
    RejectReason,
    StoreError,
    UpdateHashMismatch,
    UpdateLocalLossesRejected,
    UpdateMetadataMismatch,
    UpdateMissing,
    UpdateNonFinite,
    UpdateNotSafetensors,
    UpdateRejected,
    UpdateSpecMismatch,
    UpdateTooLarge,
)
from fedchain.fl.params import ParamSpec
from fedchain.store import keccak256, open_store
from fedchain.updates import (
    LOCAL_LOSSES,
    MAX_LOCAL_LOSSES,
    DecodedUpdate,
    UpdateMeta,
    decode_update,
    encode_update,
    fetch_update,
    local_loss_count,
    store_update,
    update_hash,
)

LIMIT = 1_000_000
META = UpdateMeta(task_id=3, round=2, job_id=11, client="0x00000000000000000000000000000000000000c1", model="tiny")


def tiny_params() -> dict[str, torch.Tensor]:
    """A two-layer model's parameters, seeded."""
    generator = torch.Generator().manual_seed(7)
    return {
        "fc.weight": torch.randn(4, 3, generator=generator),
        "fc.bias": torch.randn(4, generator=generator),
    }


SPEC = ParamSpec.of(tiny_params())


def decode(data: bytes, **kwargs: Any) -> DecodedUpdate:
    """decode_update with the hash of ``data`` itself: isolates the check under test from the hash check."""
    return decode_update(data, keccak256(data), SPEC, LIMIT, **kwargs)


class Evil:
    """Unpickling this creates a file: proof that a decoder unpickled."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Callable[..., object], tuple[Path]]:
        return (Path.touch, (self.marker,))


def test_decode_returns_the_encoded_parameters_and_metadata() -> None:
    params = tiny_params()
    data = encode_update(params, META)

    update = decode_update(data, keccak256(data), SPEC, LIMIT, expected_meta=META)

    assert update.meta == META
    assert update.digest == keccak256(data) == update_hash(data)
    assert list(update.params) == list(SPEC.names)
    for name, tensor in params.items():
        assert torch.equal(update.params[name], tensor)


def test_encoding_is_deterministic_whatever_the_key_order() -> None:
    params = tiny_params()
    reversed_params = dict(reversed(list(params.items())))

    assert encode_update(params, META) == encode_update(reversed_params, META)


def test_metadata_is_one_sorted_json_key_in_the_safetensors_header() -> None:
    data = encode_update(tiny_params(), UpdateMeta(task_id=1, round=0, kind="model", model="tiny"))
    header_length = int.from_bytes(data[:8], "little")

    metadata = json.loads(data[8 : 8 + header_length])["__metadata__"]

    assert list(metadata) == ["fedchain"]
    assert metadata["fedchain"] == (
        '{"client":null,"format":"fedchain-params/1","job_id":null,"kind":"model","model":"tiny","round":0,"task_id":1}'
    )


def test_an_update_over_the_size_limit_is_rejected_before_anything_else() -> None:
    data = encode_update(tiny_params(), META)

    with pytest.raises(UpdateTooLarge) as raised:
        decode_update(data, b"\x00" * 32, SPEC, max_bytes=len(data) - 1)

    assert raised.value.reason is RejectReason.OVERSIZED


def test_an_update_whose_bytes_differ_from_the_committed_hash_is_rejected() -> None:
    data = encode_update(tiny_params(), META)
    committed = keccak256(data)
    flipped = data[:-1] + bytes([data[-1] ^ 1])

    with pytest.raises(UpdateHashMismatch) as raised:
        decode_update(flipped, committed, SPEC, LIMIT)

    assert raised.value.reason is RejectReason.HASH_MISMATCH


def test_a_pickle_is_rejected_and_never_unpickled(tmp_path: Path) -> None:
    marker = tmp_path / "unpickled"
    data = pickle.dumps({"fc.weight": Evil(marker)})

    with pytest.raises(UpdateNotSafetensors):
        decode(data)

    assert not marker.exists()


def test_a_torch_save_file_is_rejected_and_never_unpickled(tmp_path: Path) -> None:
    marker = tmp_path / "unpickled"
    buffer = io.BytesIO()
    torch.save({"fc.weight": Evil(marker)}, buffer)

    with pytest.raises(UpdateNotSafetensors):
        decode(buffer.getvalue())

    assert not marker.exists()


def valid() -> bytes:
    return encode_update(tiny_params(), META)


def header_lies_about_its_length() -> bytes:
    data = valid()
    return (len(data)).to_bytes(8, "little") + data[8:]


def header_is_not_json() -> bytes:
    return (6).to_bytes(8, "little") + b"{oops}" + b"\x00" * 16


def header_is_a_list() -> bytes:
    return (2).to_bytes(8, "little") + b"[]"


def offsets_overlap() -> bytes:
    header = (
        b'{"fc.bias":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},'
        b'"fc.weight":{"dtype":"F32","shape":[4,3],"data_offsets":[0,48]}}'
    )
    return len(header).to_bytes(8, "little") + header + b"\x00" * 48


def plain_safetensors_without_fedchain_metadata() -> bytes:
    return save_safetensors(tiny_params())


def metadata_is_not_json() -> bytes:
    return save_safetensors(tiny_params(), metadata={"fedchain": "not json"})


def metadata_has_a_foreign_format() -> bytes:
    fields = json.loads(META.to_json()) | {"format": "someone-else/9"}
    return save_safetensors(tiny_params(), metadata={"fedchain": json.dumps(fields)})


def metadata_round_is_text() -> bytes:
    fields = json.loads(META.to_json()) | {"round": "2"}
    return save_safetensors(tiny_params(), metadata={"fedchain": json.dumps(fields)})


def a_tensor_is_missing() -> bytes:
    return encode_update({"fc.weight": tiny_params()["fc.weight"]}, META)


def an_extra_tensor() -> bytes:
    return encode_update(tiny_params() | {"fc.extra": torch.zeros(1)}, META)


def a_tensor_is_renamed() -> bytes:
    params = tiny_params()
    return encode_update({"fc.weight": params["fc.weight"], "fc.b": params["fc.bias"]}, META)


def a_shape_is_transposed() -> bytes:
    params = tiny_params()
    return encode_update(params | {"fc.weight": params["fc.weight"].T.contiguous()}, META)


def a_dtype_is_float64() -> bytes:
    params = tiny_params()
    return encode_update(params | {"fc.bias": params["fc.bias"].double()}, META)


def with_value(value: float) -> Callable[[], bytes]:
    def build() -> bytes:
        params = tiny_params()
        params["fc.weight"][1, 2] = value
        return encode_update(params, META)

    return build


MALFORMED = [
    ("empty", lambda: b"", UpdateNotSafetensors, RejectReason.NOT_SAFETENSORS),
    (
        "garbage",
        lambda: bytes(torch.randint(0, 256, (4096,), generator=torch.Generator().manual_seed(1)).tolist()),
        UpdateNotSafetensors,
        RejectReason.NOT_SAFETENSORS,
    ),
    ("truncated", lambda: valid()[:-5], UpdateNotSafetensors, RejectReason.NOT_SAFETENSORS),
    ("header-length-lies", header_lies_about_its_length, UpdateNotSafetensors, RejectReason.NOT_SAFETENSORS),
    ("header-not-json", header_is_not_json, UpdateNotSafetensors, RejectReason.NOT_SAFETENSORS),
    ("header-a-list", header_is_a_list, UpdateNotSafetensors, RejectReason.NOT_SAFETENSORS),
    ("offsets-overlap", offsets_overlap, UpdateNotSafetensors, RejectReason.NOT_SAFETENSORS),
    (
        "no-fedchain-metadata",
        plain_safetensors_without_fedchain_metadata,
        UpdateMetadataMismatch,
        RejectReason.WRONG_METADATA,
    ),
    ("metadata-not-json", metadata_is_not_json, UpdateMetadataMismatch, RejectReason.WRONG_METADATA),
    ("foreign-format", metadata_has_a_foreign_format, UpdateMetadataMismatch, RejectReason.WRONG_METADATA),
    ("round-as-text", metadata_round_is_text, UpdateMetadataMismatch, RejectReason.WRONG_METADATA),
    ("missing-tensor", a_tensor_is_missing, UpdateSpecMismatch, RejectReason.WRONG_NAMES),
    ("extra-tensor", an_extra_tensor, UpdateSpecMismatch, RejectReason.WRONG_NAMES),
    ("renamed-tensor", a_tensor_is_renamed, UpdateSpecMismatch, RejectReason.WRONG_NAMES),
    ("wrong-shape", a_shape_is_transposed, UpdateSpecMismatch, RejectReason.WRONG_SHAPE),
    ("wrong-dtype", a_dtype_is_float64, UpdateSpecMismatch, RejectReason.WRONG_DTYPE),
    ("nan", with_value(float("nan")), UpdateNonFinite, RejectReason.NON_FINITE),
    ("inf", with_value(float("inf")), UpdateNonFinite, RejectReason.NON_FINITE),
    ("minus-inf", with_value(float("-inf")), UpdateNonFinite, RejectReason.NON_FINITE),
]


@pytest.mark.parametrize(("build", "error", "reason"), [case[1:] for case in MALFORMED], ids=[c[0] for c in MALFORMED])
def test_each_malformed_update_is_rejected_with_its_reason_code(
    build: Callable[[], bytes], error: type[UpdateRejected], reason: RejectReason
) -> None:
    data = build()

    with pytest.raises(error) as raised:
        decode(data)

    assert isinstance(raised.value, UpdateRejected)
    assert raised.value.reason is reason


def test_an_update_for_another_round_is_rejected_when_metadata_is_expected() -> None:
    data = encode_update(tiny_params(), META)
    expected = UpdateMeta(task_id=3, round=3, job_id=11, client=META.client, model="tiny")

    with pytest.raises(UpdateMetadataMismatch, match="round=2"):
        decode(data, expected_meta=expected)


def test_fetch_update_reads_and_checks_what_store_update_wrote(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    params = tiny_params()

    digest = store_update(store, params, META)
    update = fetch_update(store, digest, SPEC, LIMIT, expected_meta=META)

    assert digest == update.digest
    assert torch.equal(update.params["fc.weight"], params["fc.weight"])


def test_fetch_update_rejects_a_hash_missing_from_the_store(tmp_path: Path) -> None:
    with pytest.raises(UpdateMissing) as raised:
        fetch_update(open_store(tmp_path), keccak256(b"never uploaded"), SPEC, LIMIT)

    assert raised.value.reason is RejectReason.MISSING


def test_fetch_update_rejects_a_corrupted_object_as_a_hash_mismatch(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    digest = store_update(store, tiny_params(), META)
    Path(store.path_of(digest)).write_bytes(encode_update(tiny_params(), UpdateMeta(task_id=3, round=1)))

    with pytest.raises(UpdateHashMismatch):
        fetch_update(store, digest, SPEC, LIMIT)


def test_fetch_update_rejects_an_oversized_object_without_reading_it(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    digest = store_update(store, tiny_params(), META)

    with pytest.raises(UpdateTooLarge):
        fetch_update(store, digest, SPEC, max_bytes=100)


def test_updates_refuse_a_store_not_addressed_by_the_on_chain_hash(tmp_path: Path) -> None:
    store = open_store(tmp_path, hash_name="sha256")

    with pytest.raises(StoreError, match="sha256"):
        store_update(store, tiny_params(), META)
    with pytest.raises(StoreError, match="sha256"):
        fetch_update(store, store.put(encode_update(tiny_params(), META)), SPEC, LIMIT)


def test_client_addresses_compare_equal_whatever_their_checksum_casing() -> None:
    checksummed = UpdateMeta(task_id=1, round=1, client="0xAbC0000000000000000000000000000000000001")
    lowercase = UpdateMeta(task_id=1, round=1, client="0xabc0000000000000000000000000000000000001")

    assert checksummed == lowercase
    assert encode_update(tiny_params(), checksummed) == encode_update(tiny_params(), lowercase)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_non_finite_values_are_caught_in_every_float_dtype(dtype: torch.dtype) -> None:
    params = {name: tensor.to(dtype) for name, tensor in tiny_params().items()}
    params["fc.bias"][0] = float("nan")
    data = encode_update(params, META)

    with pytest.raises(UpdateNonFinite):
        decode_update(data, keccak256(data), ParamSpec.of(params), LIMIT)


def test_integer_tensors_pass_the_finiteness_check() -> None:
    params = tiny_params() | {"steps": torch.tensor([3], dtype=torch.int64)}
    data = encode_update(params, META)

    update = decode_update(data, keccak256(data), ParamSpec.of(params), LIMIT)

    assert update.params["steps"].tolist() == [3]


LOSSES = torch.tensor([0.5, 0.0, 2.25], dtype=torch.float32)


def test_local_losses_travel_inside_the_payload_and_change_its_hash() -> None:
    data = encode_update(tiny_params(), META, local_losses=LOSSES)

    update = decode(data, expected_local_losses=3)

    assert update.local_losses is not None and torch.equal(update.local_losses, LOSSES)
    assert update_hash(data) != update_hash(encode_update(tiny_params(), META, local_losses=LOSSES * 2))
    assert decode(encode_update(tiny_params(), META)).local_losses is None


def test_local_loss_count_is_the_data_size_capped_at_the_limit() -> None:
    assert [local_loss_count(n) for n in (0, 64, MAX_LOCAL_LOSSES, MAX_LOCAL_LOSSES + 1)] == [
        0,
        64,
        MAX_LOCAL_LOSSES,
        MAX_LOCAL_LOSSES,
    ]


BAD_LOSSES = [
    ("missing", None, 3),
    ("unexpected", LOSSES, None),
    ("too-short", LOSSES[:2], 3),
    ("too-long", torch.cat([LOSSES, LOSSES]), 3),
    ("nan", torch.tensor([0.5, float("nan"), 1.0]), 3),
    ("inf", torch.tensor([0.5, float("inf"), 1.0]), 3),
    ("negative", torch.tensor([0.5, -0.1, 1.0]), 3),
]


@pytest.mark.parametrize(("losses", "expected"), [c[1:] for c in BAD_LOSSES], ids=[c[0] for c in BAD_LOSSES])
def test_malformed_local_losses_reject_the_update(losses: torch.Tensor | None, expected: int | None) -> None:
    data = encode_update(tiny_params(), META, local_losses=losses)

    with pytest.raises(UpdateLocalLossesRejected) as raised:
        decode(data, expected_local_losses=expected)

    assert raised.value.reason is RejectReason.BAD_LOCAL_LOSSES


@pytest.mark.parametrize("losses", [LOSSES.double(), LOSSES.reshape(3, 1)], ids=["float64", "2-d"])
def test_local_losses_of_another_dtype_or_rank_reject_the_update(losses: torch.Tensor) -> None:
    tensors = tiny_params() | {LOCAL_LOSSES: losses}
    data = save_safetensors(tensors, metadata={"fedchain": META.to_json()})

    with pytest.raises(UpdateLocalLossesRejected, match="float32"):
        decode(data, expected_local_losses=3)
