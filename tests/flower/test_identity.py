"""The signed claim a self-trained client attaches to each reply (fedchain.flower.identity)."""

from __future__ import annotations

import dataclasses

import pytest
from eth_account import Account

from fedchain.errors import RejectReason, UpdateSignatureRejected
from fedchain.flower.identity import ReplyClaim, SignedReply, data_commitment, sign_reply, verify_reply

CLIENT, OTHER = Account.create(), Account.create()
CLAIM = ReplyClaim(
    chain_id=31337,
    ledger="0x" + "12" * 20,
    task_id=3,
    round=2,
    start_model=b"\x5a" * 32,
    update_hash=b"\xab" * 32,
    data_size=600,
    salt=b"\x07" * 32,
)
COMMITMENT = data_commitment(600, b"\x07" * 32)


def test_a_reply_signed_by_the_joined_wallet_and_opening_its_commitment_passes() -> None:
    reply = sign_reply(CLIENT.key, CLAIM)
    verify_reply(reply, account=CLIENT.address, commitment=COMMITMENT, expected=CLAIM)
    assert SignedReply.from_json(reply.to_json()) == reply


def test_a_reply_signed_by_another_wallet_is_rejected_naming_both() -> None:
    reply = sign_reply(OTHER.key, CLAIM)
    with pytest.raises(UpdateSignatureRejected, match=f"signed by {OTHER.address}, not by {CLIENT.address}") as err:
        verify_reply(reply, account=CLIENT.address, commitment=COMMITMENT)
    assert err.value.reason is RejectReason.BAD_SIGNATURE


def test_a_data_size_other_than_the_committed_one_is_rejected() -> None:
    reply = sign_reply(CLIENT.key, dataclasses.replace(CLAIM, data_size=6000))
    with pytest.raises(UpdateSignatureRejected, match="do not open the commitment"):
        verify_reply(reply, account=CLIENT.address, commitment=COMMITMENT)


@pytest.mark.parametrize(
    "change",
    [
        {"round": 3},
        {"task_id": 4},
        {"chain_id": 1},
        {"ledger": "0x" + "34" * 20},
        {"start_model": b"\x5b" * 32},
        {"update_hash": b"\xac" * 32},
    ],
)
def test_a_claim_replayed_on_another_round_task_chain_deployment_or_update_is_rejected(change: dict) -> None:
    reply = sign_reply(CLIENT.key, dataclasses.replace(CLAIM, **change))
    with pytest.raises(UpdateSignatureRejected, match=f"names {next(iter(change))}"):
        verify_reply(reply, account=CLIENT.address, commitment=COMMITMENT, expected=CLAIM)


def test_a_tampered_signature_or_record_is_rejected() -> None:
    reply = sign_reply(CLIENT.key, CLAIM)
    forged = SignedReply(dataclasses.replace(CLAIM, update_hash=b"\xcd" * 32), reply.signature)
    with pytest.raises(UpdateSignatureRejected, match="signed by"):
        verify_reply(forged, account=CLIENT.address, commitment=COMMITMENT)
    with pytest.raises(UpdateSignatureRejected, match="cannot be read"):
        verify_reply(SignedReply(CLAIM, b"\x01" * 10), account=CLIENT.address, commitment=COMMITMENT)
    with pytest.raises(UpdateSignatureRejected, match="not a signed claim"):
        SignedReply.from_json(b'{"round": 1}')
