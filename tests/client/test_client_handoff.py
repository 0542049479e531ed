"""The job data codec, the commitments and the auction rule the client escrows by."""

from __future__ import annotations

import dataclasses
import pickle

import pytest
import torch
from eth_abi import encode as abi_encode
from eth_utils import keccak

from fedchain.client import (
    JobDataMeta,
    bid_commitment,
    data_commitment,
    decode_job_data,
    derive_salt,
    encode_job_data,
    winning_bid,
)
from fedchain.client.commitments import BID_SALT, DATA_SIZE_SALT
from fedchain.client.handoff import ExpectedJobData, JobData
from fedchain.data.datasets import ImageDataset
from fedchain.errors import JobDataRejected

AUCTION = "0x" + "11" * 20


def dataset(n: int = 5, classes: int = 10) -> ImageDataset:
    generator = torch.Generator().manual_seed(0)
    images = torch.randn(n, 1, 28, 28, generator=generator)
    labels = torch.arange(n) % classes
    return ImageDataset("mnist", images, labels, classes, (0.1307,), (0.3081,))


def encoded(n: int = 5, task_id: int = 3, client_index: int = 1) -> bytes:
    return encode_job_data(
        dataset(n), JobDataMeta(task_id=task_id, client_index=client_index, dataset="mnist", epsilon=2.0)
    )


def decode(data: bytes, expected_hash: bytes | None = None, /, **changes: int) -> JobData:
    expected = dataclasses.replace(
        ExpectedJobData(task_id=3, client_index=1, data_size=5, num_classes=10, in_channels=1), **changes
    )
    return decode_job_data(data, expected_hash if expected_hash is not None else keccak(data), expected)


def test_job_data_round_trips_with_its_hash_and_is_deterministic() -> None:
    data = encoded()

    decoded = decode(data)

    assert data == encoded()
    assert torch.equal(decoded.images, dataset().images) and torch.equal(decoded.labels, dataset().labels)
    assert decoded.meta == JobDataMeta(3, 1, "mnist", 2.0)
    assert decoded.digest == keccak(data)


@pytest.mark.parametrize(
    ("data", "changes", "message"),
    [
        (encoded(), {"data_size": 6}, "data size of 6"),
        (encoded(task_id=4), {}, "task 4"),
        (encoded(), {"num_classes": 3}, "labels outside"),
        (encoded(), {"in_channels": 3}, "images are"),
        (pickle.dumps({"images": [1.0]}), {}, "not a safetensors"),
    ],
)
def test_job_data_that_does_not_fit_the_job_is_rejected(data: bytes, changes: dict[str, int], message: str) -> None:
    with pytest.raises(JobDataRejected, match=message):
        decode(data, **changes)


def test_job_data_that_does_not_hash_to_the_committed_hash_is_rejected() -> None:
    data = encoded()

    with pytest.raises(JobDataRejected, match="hashes to"):
        decode(data[:-1] + bytes([data[-1] ^ 1]), keccak(data))


def test_commitments_are_the_contracts_abi_encodings() -> None:
    salt = bytes(range(32))
    bidder = "0x" + "22" * 20

    assert data_commitment(600, salt) == keccak(abi_encode(["uint256", "bytes32"], [600, salt]))
    assert bid_commitment(10**9, 5, salt, bidder) == keccak(
        abi_encode(["uint64", "uint96", "bytes32", "address"], [10**9, 5, salt, bidder])
    )


def test_salts_are_reproducible_from_the_key_and_differ_per_job_and_purpose() -> None:
    key = bytes(31) + b"\x01"

    salt = derive_salt(key, BID_SALT, AUCTION, 1, 0)

    assert salt == derive_salt(key, BID_SALT, AUCTION, 1, 0)
    others = {
        derive_salt(key, BID_SALT, AUCTION, 1, 1),
        derive_salt(key, DATA_SIZE_SALT, AUCTION, 1, 0),
        derive_salt(bytes(31) + b"\x02", BID_SALT, AUCTION, 1, 0),
        derive_salt(key, BID_SALT, AUCTION, 2, 0),
    }
    assert salt not in others and len(others) == 4


def test_the_best_ranked_bid_wins_at_its_own_price() -> None:
    # (bid index, price, utility) of the ranked bids, best first, as the contract keeps them
    award = winning_bid([(2, 40, 120), (3, 30, 120), (0, 50, 100)], second_price=False)

    assert (award.winner, award.price) == (2, 40)


def test_second_price_adds_the_margin_over_the_runner_up() -> None:
    # winner utility 120, runner-up 100: paid 40 + 20; alone: its own price
    assert winning_bid([(1, 40, 120), (0, 50, 100)], second_price=True).price == 60
    assert winning_bid([(1, 40, 120), (0, 50, 120)], second_price=True).price == 40
    assert winning_bid([(0, 40, 120)], second_price=True).price == 40


def test_no_ranked_bid_awards_nothing() -> None:
    assert winning_bid([], second_price=False) == winning_bid([], second_price=True)
    assert winning_bid([], second_price=False).winner is None
