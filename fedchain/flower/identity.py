"""Who sent a reply: the signed claim a self-trained client attaches to each update.

Flower's node ids are not identities: a SuperNode can restart under a new id, and nothing ties one to a wallet.
A client of a self-trained task (contracts/README.md, "Tasks trained by their own clients") therefore signs, with
the wallet that joined the task, a claim naming the task, the round and the update's hash, and opens its data
commitment (data size and salt, committed at join). The aggregator checks the claim before it scores the update,
stores it beside the update, and the audit checks it again: an aggregator cannot pay an update that nobody sent,
nor credit one client with another's.

The digest is ``keccak256(abi.encode(uint256 chainId, address ledger, uint256 taskId, uint16 round,
bytes32 startModel, bytes32 updateHash, uint64 dataSize, bytes32 salt))``, signed as an EIP-191 personal message,
so a claim made for one chain, deployment, task or round is worthless on any other. ``startModel`` is the hash of
the model the client trained from, as the store files it (the round before's posted model, or the task's initial
model in round 1): an aggregator that sent one client another start model than the one it posted is caught.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from eth_abi import encode as abi_encode
from eth_account import Account
from eth_account.messages import encode_defunct
from eth_utils import keccak, to_checksum_address

from fedchain.client.commitments import data_commitment
from fedchain.errors import UpdateSignatureRejected

__all__ = ["ReplyClaim", "SignedReply", "data_commitment", "sign_reply", "verify_reply"]


@dataclass(frozen=True)
class ReplyClaim:
    """What one reply says: this update, of this round of this task, from data of this size."""

    chain_id: int
    ledger: str
    task_id: int
    round: int
    start_model: bytes
    update_hash: bytes
    data_size: int
    salt: bytes

    def digest(self) -> bytes:
        return keccak(
            abi_encode(
                ["uint256", "address", "uint256", "uint16", "bytes32", "bytes32", "uint64", "bytes32"],
                [
                    self.chain_id,
                    to_checksum_address(self.ledger),
                    self.task_id,
                    self.round,
                    self.start_model,
                    self.update_hash,
                    self.data_size,
                    self.salt,
                ],
            )
        )


@dataclass(frozen=True)
class SignedReply:
    """A claim and its signature, as the aggregator stores it beside the update (JSON, hex fields)."""

    claim: ReplyClaim
    signature: bytes

    def to_json(self) -> bytes:
        c = self.claim
        fields = {
            "chain_id": c.chain_id,
            "ledger": to_checksum_address(c.ledger),
            "task_id": c.task_id,
            "round": c.round,
            "start_model": "0x" + c.start_model.hex(),
            "update_hash": "0x" + c.update_hash.hex(),
            "data_size": c.data_size,
            "salt": "0x" + c.salt.hex(),
            "signature": "0x" + self.signature.hex(),
        }
        return json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes) -> SignedReply:
        try:
            f = json.loads(data)
            claim = ReplyClaim(
                chain_id=int(f["chain_id"]),
                ledger=to_checksum_address(f["ledger"]),
                task_id=int(f["task_id"]),
                round=int(f["round"]),
                start_model=bytes.fromhex(f["start_model"].removeprefix("0x")),
                update_hash=bytes.fromhex(f["update_hash"].removeprefix("0x")),
                data_size=int(f["data_size"]),
                salt=bytes.fromhex(f["salt"].removeprefix("0x")),
            )
            return cls(claim, bytes.fromhex(f["signature"].removeprefix("0x")))
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise UpdateSignatureRejected(f"the stored reply is not a signed claim: {err}") from err


def sign_reply(private_key: str | bytes, claim: ReplyClaim) -> SignedReply:
    """The claim signed by ``private_key`` (the wallet that joined the task)."""
    signed = Account.sign_message(encode_defunct(primitive=claim.digest()), private_key=private_key)
    return SignedReply(claim, bytes(signed.signature))


def verify_reply(reply: SignedReply, *, account: str, commitment: bytes, expected: ReplyClaim | None = None) -> None:
    """Raise :class:`UpdateSignatureRejected` unless ``account`` (the joined wallet) signed ``reply`` and its data
    size and salt open ``commitment`` (the join's); with ``expected``, the claim must also name that chain,
    deployment, task, round, start model and update."""
    claim = reply.claim
    if expected is not None:
        for name in ("chain_id", "ledger", "task_id", "round", "start_model", "update_hash"):
            got, want = getattr(claim, name), getattr(expected, name)
            if (got.lower() if isinstance(got, str) else got) != (want.lower() if isinstance(want, str) else want):
                raise UpdateSignatureRejected(f"the reply's claim names {name} {got!r}, expected {want!r}")
    try:
        signer = Account.recover_message(encode_defunct(primitive=claim.digest()), signature=reply.signature)
    except Exception as err:  # eth_account raises several types for a malformed signature
        raise UpdateSignatureRejected(f"the reply's signature cannot be read: {err}") from err
    if signer.lower() != account.lower():
        raise UpdateSignatureRejected(
            f"the reply is signed by {signer}, not by {to_checksum_address(account)}, the wallet that joined",
            hint="each client signs with the key it joined the task with (fedchain.flower.FedChainClient)",
        )
    if data_commitment(claim.data_size, claim.salt) != commitment:
        raise UpdateSignatureRejected(
            f"data size {claim.data_size} and its salt do not open the commitment made at join",
            hint="the client must report the data size it committed to when it joined",
        )
