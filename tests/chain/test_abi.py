"""ABI decoding without a chain: selectors, names, and every kind of revert data."""

from __future__ import annotations

import enum
import pickle
import typing
from operator import attrgetter

import pytest
from eth_abi import encode
from eth_utils import keccak

from fedchain.chain.abi import AbiRegistry, CustomError, Panic, RevertReason, error_class, field_names, snake_case
from fedchain.errors import ContractRevert

#: OpenZeppelin's Ownable error; its selector 0x118cdaa7 is published in the OpenZeppelin docs.
OWNABLE = {
    "type": "error",
    "name": "OwnableUnauthorizedAccount",
    "inputs": [{"name": "account", "type": "address", "internalType": "address"}],
}
BID_TOO_LATE = {
    "type": "error",
    "name": "AuctionBidTooLate",
    "inputs": [
        {"name": "auctionId", "type": "uint256"},
        {"name": "deadline", "type": "uint64"},
        {"name": "now_", "type": "uint64"},
    ],
}


def test_error_selector_matches_the_published_one() -> None:
    assert error_class(OWNABLE).selector().hex() == "118cdaa7"


@pytest.mark.parametrize(
    ("name", "expected"),
    [("auctionId", "auction_id"), ("TaskID", "task_id"), ("now_", "now_"), ("_value", "_value"), ("rAMin", "r_a_min")],
)
def test_snake_case(name: str, expected: str) -> None:
    assert snake_case(name) == expected


def test_field_names_avoid_keywords_reserved_names_and_duplicates() -> None:
    params = [{"name": "from"}, {"name": "args"}, {"name": ""}, {"name": "_x"}, {"name": "x"}]

    assert field_names(params) == ("from_", "args_", "arg2", "x", "x_")


def test_custom_error_is_decoded_with_its_arguments() -> None:
    registry = AbiRegistry()
    registry.add_abi([BID_TOO_LATE])
    data = keccak(text="AuctionBidTooLate(uint256,uint64,uint64)")[:4] + encode(
        ["uint256", "uint64", "uint64"], [4, 100, 101]
    )

    error = registry.decode_revert(data)  # a class built from the ABI at run time

    assert isinstance(error, CustomError) and isinstance(error, ContractRevert)
    assert type(error).__name__ == "AuctionBidTooLate"
    assert attrgetter("auction_id", "deadline", "now_")(error) == (4, 100, 101)
    assert str(error).startswith("reverted with AuctionBidTooLate(auction_id=4, deadline=100, now_=101)")
    assert "hint:" in str(error)


def test_decoded_error_survives_pickling_across_processes() -> None:
    cls = error_class(BID_TOO_LATE)
    registry = AbiRegistry([cls])
    data = cls.selector() + encode(["uint256", "uint64", "uint64"], [1, 2, 3])

    error = pickle.loads(pickle.dumps(registry.decode_revert(data)))

    assert (error.auction_id, error.deadline, error.now_, error.data) == (1, 2, 3, data)


def test_builtin_error_string_and_panic_are_decoded() -> None:
    registry = AbiRegistry()

    reason = registry.decode_revert(keccak(text="Error(string)")[:4] + encode(["string"], ["no"]))
    panic = registry.decode_revert("0x" + (keccak(text="Panic(uint256)")[:4] + encode(["uint256"], [0x11])).hex())

    assert isinstance(reason, RevertReason) and reason.reason == "no"
    assert isinstance(panic, Panic) and panic.code == 0x11 and "overflow" in str(panic)


@pytest.mark.parametrize(
    "data",
    [b"", b"\xde\xad\xbe\xef" + b"\x00" * 32, keccak(text="AuctionBidTooLate(uint256,uint64,uint64)")[:4] + b"\x01"],
)
def test_unknown_or_malformed_data_gives_generic_revert_with_raw_data(data: bytes) -> None:
    registry = AbiRegistry()
    registry.add_abi([BID_TOO_LATE])

    error = registry.decode_revert(data)

    assert type(error) is ContractRevert
    assert error.data == data


class TaskStatus(enum.IntEnum):
    NONE = 0
    OPEN = 1
    RUNNING = 2


def test_enum_values_decode_to_their_enum_and_revert_messages_name_them() -> None:
    # prepare: an error whose second argument is a Solidity enum (ABI type uint8)
    entry = {
        "type": "error",
        "name": "TaskWrongStatus",
        "inputs": [
            {"name": "taskId", "type": "uint256", "internalType": "uint256"},
            {"name": "status", "type": "uint8", "internalType": "enum ITaskRegistry.TaskStatus"},
        ],
    }
    cls = error_class(entry, types={"ITaskRegistry.TaskStatus": TaskStatus})

    # execute
    known = cls.decode(cls.selector() + encode(["uint256", "uint8"], [7, 2]))
    unknown = cls.decode(cls.selector() + encode(["uint256", "uint8"], [7, 9]))

    # assert
    assert known.values == (7, TaskStatus.RUNNING) and known.values[1] is TaskStatus.RUNNING
    assert str(known).startswith("reverted with TaskWrongStatus(task_id=7, status=TaskStatus.RUNNING)")
    assert unknown.values == (7, 9) and type(unknown.values[1]) is int  # a value the enum lacks stays a number


def test_the_bindings_hold_the_contracts_enums_with_the_solidity_values() -> None:
    from fedchain.chain import bindings

    assert bindings.TYPES["ITaskRegistry.TaskStatus"] is bindings.TaskStatus
    assert [m.name for m in bindings.TaskStatus] == [
        "NONE",
        "OPEN",
        "RUNNING",
        "FINISHED",
        "SETTLED",
        "CANCELLED",
        "ABANDONED",
    ]
    assert list(bindings.JobStatus) == list(range(5)) and bindings.JobStatus.VACANT == 3
    assert typing.get_type_hints(bindings.Job)["status"] is bindings.JobStatus  # decoded views carry the enum too
