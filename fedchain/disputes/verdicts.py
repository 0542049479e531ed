"""Verdicts of the arbiter committee: EIP-712 typed data, signatures, and the quorum a verdict needs.

A member signs ``Verdict(uint256 challengeId, uint256 taskId, uint16 round,
uint32 clientIndex, bool upheld)`` in the committee's EIP-712 domain
("FedChain Arbiter Committee", version "1", the chain id and the committee's
address), exactly what ``ArbiterCommittee.verdictDigest`` hashes. Members
exchange their signed verdicts as notes on a board of the shared blob store
(:meth:`~fedchain.store.blobs.BlobStore.pin`): each note is authenticated by
recovering its signer, never by where it was found. Once a quorum of members
signed the same outcome, anyone submits the signatures
(``Disputes.resolve``), ordered by signer as the contract wants them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from eth_account import Account
from eth_account.messages import encode_typed_data
from eth_account.signers.local import LocalAccount
from eth_utils import to_checksum_address

from fedchain.chain.abi import EIP712_DOMAIN_TYPE
from fedchain.errors import VerdictError

DOMAIN_NAME = "FedChain Arbiter Committee"
DOMAIN_VERSION = "1"
VERDICT_FIELDS = (
    ("challengeId", "uint256"),
    ("taskId", "uint256"),
    ("round", "uint16"),
    ("clientIndex", "uint32"),
    ("upheld", "bool"),
)
#: The format tag of a signed verdict note.
NOTE_FORMAT = "fedchain-verdict/1"


@dataclass(frozen=True)
class Domain:
    """Where verdicts count: the chain and the committee contract."""

    chain_id: int
    committee: str


@dataclass(frozen=True)
class Verdict:
    """A committee member's judgement of one challenge."""

    challenge_id: int
    task_id: int
    round: int
    client_index: int
    upheld: bool

    def typed_data(self, domain: Domain) -> dict[str, Any]:
        """The EIP-712 message (eth-account's ``full_message`` form)."""
        return {
            "types": {
                "EIP712Domain": list(EIP712_DOMAIN_TYPE),
                "Verdict": [{"name": name, "type": kind} for name, kind in VERDICT_FIELDS],
            },
            "primaryType": "Verdict",
            "domain": {
                "name": DOMAIN_NAME,
                "version": DOMAIN_VERSION,
                "chainId": domain.chain_id,
                "verifyingContract": to_checksum_address(domain.committee),
            },
            "message": {
                "challengeId": self.challenge_id,
                "taskId": self.task_id,
                "round": self.round,
                "clientIndex": self.client_index,
                "upheld": self.upheld,
            },
        }


@dataclass(frozen=True)
class SignedVerdict:
    """A verdict with its signature and the member it claims to come from (checked by :func:`signer_of`)."""

    verdict: Verdict
    signer: str
    signature: bytes

    def to_note(self) -> bytes:
        """The note a member pins on the challenge's board."""
        return json.dumps(
            {
                "format": NOTE_FORMAT,
                "challenge_id": self.verdict.challenge_id,
                "task_id": self.verdict.task_id,
                "round": self.verdict.round,
                "client_index": self.verdict.client_index,
                "upheld": self.verdict.upheld,
                "signer": self.signer,
                "signature": "0x" + self.signature.hex(),
            },
            sort_keys=True,
        ).encode()

    @classmethod
    def from_note(cls, data: bytes) -> SignedVerdict:
        """Parse a note; a VerdictError when it is not a signed verdict (its signature is checked by :func:`signer_of`)."""
        try:
            note = json.loads(data)
            if note.get("format") != NOTE_FORMAT:
                raise ValueError(f"format {note.get('format')!r}")
            verdict = Verdict(
                int(note["challenge_id"]),
                int(note["task_id"]),
                int(note["round"]),
                int(note["client_index"]),
                bool(note["upheld"]),
            )
            return cls(
                verdict, to_checksum_address(note["signer"]), bytes.fromhex(str(note["signature"]).removeprefix("0x"))
            )
        except (ValueError, KeyError, TypeError) as err:
            raise VerdictError(f"not a signed verdict note: {err}") from err


def sign(verdict: Verdict, account: LocalAccount, domain: Domain) -> SignedVerdict:
    """``account``'s EIP-712 signature of ``verdict``."""
    signed = Account.sign_message(encode_typed_data(full_message=verdict.typed_data(domain)), account.key)
    return SignedVerdict(verdict, account.address, bytes(signed.signature))


def signer_of(signed: SignedVerdict, domain: Domain) -> str:
    """The address that signed ``signed.verdict`` (a VerdictError if it is not the claimed signer or malformed)."""
    try:
        signer = Account.recover_message(
            encode_typed_data(full_message=signed.verdict.typed_data(domain)), signature=signed.signature
        )
    except Exception as err:
        raise VerdictError(f"a malformed verdict signature from {signed.signer}: {err}") from err
    if to_checksum_address(signer) != signed.signer:
        raise VerdictError(f"a verdict signed by {signer} claims to come from {signed.signer}")
    return signer


def quorum_signatures(
    signed: Iterable[SignedVerdict], verdict: Verdict, members: Sequence[str], quorum: int, domain: Domain
) -> list[bytes] | None:
    """The signatures of ``verdict`` (this outcome) by distinct members, ordered by signer as ``Disputes.resolve``
    wants them, once at least ``quorum`` signed it; else None. Notes that do not verify are left out."""
    committee = {to_checksum_address(m) for m in members}
    valid: dict[str, bytes] = {}
    for note in signed:
        if note.verdict != verdict:
            continue
        try:
            signer = signer_of(note, domain)
        except VerdictError:
            continue
        if signer in committee:
            valid[signer] = note.signature
    if len(valid) < quorum:
        return None
    return [valid[signer] for signer in sorted(valid, key=lambda address: int(address, 16))]


def board_of(domain: Domain, challenge_id: int) -> str:
    """The store board on which the members pin their verdicts of a challenge."""
    return f"verdicts/{domain.chain_id}-{domain.committee.lower()}/{challenge_id}"
