"""What a FedChain client and the ``IncentiveStrategy`` exchange through Flower messages, and where the signed
claims are kept in the store.

A training message carries, in its ``config`` record, what the client signs: ``fedchain.chain``,
``fedchain.ledger``, ``fedchain.task`` and ``fedchain.round``, and the model's name for the update's metadata
(``fedchain.model``). A reply carries a ``fedchain`` ConfigRecord:

========== =====================================================================
key        value
========== =====================================================================
update     the update's bytes: FedChain's safetensors format (trained minus start
           parameters, local losses when the task's strategy needs them)
account    the wallet that joined the task (checksum address)
data-size  the data size committed at join (it weights the update)
salt       the salt of that commitment (32 bytes)
signature  the EIP-191 signature of the claim (:mod:`fedchain.flower.identity`)
========== =====================================================================

The aggregator pins each claim it scored on the store's board ``replies/<task>``, named ``<round>-<client>``:
the audit reads them back and checks each committed entry against its signature.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fedchain.flower.identity import SignedReply
from fedchain.store.blobs import BlobStore

#: The reply's ConfigRecord holding the update and the signed claim.
CLAIM_RECORD = "fedchain"
#: The keys of the training message's config that name what the client signs.
ROUND_KEYS = {
    "chain": "fedchain.chain",
    "ledger": "fedchain.ledger",
    "task": "fedchain.task",
    "round": "fedchain.round",
    "model": "fedchain.model",
}


def config_int(record: Mapping[str, Any], key: str) -> int:
    """``record[key]`` as an int; a missing key or another type raises KeyError or TypeError."""
    value = record[key]
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{key} must be an integer, got {type(value).__name__}")
    return value


def config_bytes(record: Mapping[str, Any], key: str) -> bytes:
    """``record[key]`` as bytes; a missing key or another type raises KeyError or TypeError."""
    value = record[key]
    if not isinstance(value, bytes):
        raise TypeError(f"{key} must be bytes, got {type(value).__name__}")
    return value


def start_model_hash(params: Mapping[str, Any], model: str, task_id: int, round_number: int) -> bytes:
    """The hash the store files round ``round_number``'s start model under (``params``: its tensors): the global
    model of the round before, or in round 1 the task's initial model (``fedchain.taskspec.model_meta``)."""
    from fedchain.taskspec import INITIAL_MODEL_TASK_ID
    from fedchain.updates import UpdateMeta, encode_update, update_hash

    before = round_number - 1
    task = INITIAL_MODEL_TASK_ID if before == 0 else task_id
    return update_hash(encode_update(params, UpdateMeta(task_id=task, round=before, kind="model", model=model)))


def replies_board(task_id: int) -> str:
    return f"replies/{task_id}"


def pin_reply(store: BlobStore, task_id: int, round_number: int, index: int, reply: SignedReply) -> None:
    """Keep the claim the aggregator scored for client ``index`` in round ``round_number``."""
    store.pin(replies_board(task_id), f"{round_number}-{index}", reply.to_json())


def stored_replies(store: BlobStore, task_id: int) -> dict[tuple[int, int], SignedReply]:
    """(round, client index) -> the claim pinned for it; a note that is not a claim is left out (the audit reports
    the committed entries that lack one)."""
    from fedchain.errors import UpdateSignatureRejected

    replies = {}
    for name, data in store.notes(replies_board(task_id)).items():
        round_text, _, index_text = name.partition("-")
        if not (round_text.isdigit() and index_text.isdigit()):
            continue
        try:
            replies[(int(round_text), int(index_text))] = SignedReply.from_json(data)
        except UpdateSignatureRejected:
            continue
    return replies
